r"""A function's docstring as a tool description: the summary, and one line per parameter.

Understands Google (``Args:``), NumPy (``Parameters`` + dashes) and Sphinx
(``:param x:``) styles.

>>> parse_docstring("Refund an order.\n\nArgs:\n    order: the order id, e.g. A1.\n")
('Refund an order.', {'order': 'the order id, e.g. A1.'})
"""

from __future__ import annotations

import re

__all__ = ["parse_docstring"]


_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Returns|Return|Yields|Raises|Examples?|Notes?|See Also)\s*:?\s*$"
)


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a docstring into (description, {parameter: description}).

    Understands Google (``Args:``), NumPy (``Parameters`` + dashes) and Sphinx
    (``:param x:``) styles.
    """
    lines = doc.splitlines()
    params: dict[str, str] = {}
    summary: list[str] = []
    section: str | None = None
    current: str | None = None
    for i, raw in enumerate(lines):
        line = raw.strip()
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if m := re.match(r":param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)", line):
            section, current = "sphinx", m.group(1)
            params[current] = m.group(2).strip()
            continue
        if line.startswith(":"):
            section, current = "sphinx-other", None
            continue
        if _SECTION.match(line) or (line and nxt and set(nxt) == {"-"}):
            section = line.rstrip(":").lower()
            current = None
            continue
        if set(line) == {"-"}:
            continue
        if section is None:
            summary.append(line)
        elif section in ("args", "arguments", "parameters", "params"):
            google = re.match(r"(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)", line)
            numpy = re.match(r"(\w+)\s*:\s*[^\s].*$", line) if raw[:1] not in (" ", "\t") else None
            indent = len(raw) - len(raw.lstrip())
            if (numpy and section == "parameters" and not google) or (numpy and indent == 0):
                current = numpy.group(1)
                params[current] = ""
            elif google and (current is None or indent <= _indent_of(lines, current)):
                current = google.group(1).lstrip("*")
                params[current] = google.group(3).strip()
            elif current and line:
                params[current] = (params[current] + " " + line).strip()
        elif section == "sphinx" and current and line:
            params[current] = (params[current] + " " + line).strip()
    return "\n".join(summary).strip(), params


def _indent_of(lines: list[str], name: str) -> int:
    for raw in lines:
        if re.match(rf"\s*\*{{0,2}}{re.escape(name)}\s*(\([^)]*\))?\s*:", raw):
            return len(raw) - len(raw.lstrip())
    return 0
