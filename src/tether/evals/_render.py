"""A report as a plain-text table for the terminal (no colours, so it pipes cleanly)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .results import ReportView, Summary


def table(report: ReportView, *, width: int = 100) -> str:
    """One line per case (pass count, pass@k, means, first reason it failed), then the summary."""
    s = report.summary()
    k = max(s.pass_at, default=1)
    head = f"eval {report.name}" + (f" ({report.label})" if report.label else "")
    lines = [f"{head}: {s.cases} cases x {k} trial{'s' if k > 1 else ''}", ""]
    cols = ["case", "pass", f"pass@{k}", "replies", "tokens", "seconds", "why not"]
    rows = [
        [
            c.case_id,
            f"{c.passes}/{c.trials}",
            f"{c.pass_at.get(k, 0.0):.2f}",
            f"{c.replies:.1f}",
            f"{c.tokens:.0f}",
            f"{c.seconds:.2f}",
            c.reasons[0] if c.reasons else "",
        ]
        for c in report.cases()
    ]
    lines += _grid(cols, rows, width)
    lines += ["", *summary_lines(s)]
    return "\n".join(lines)


def summary_lines(s: Summary) -> list[str]:
    """The summary as two or three short lines."""
    passes = " · ".join(f"pass@{k} {v:.2f}" for k, v in s.pass_at.items() if k in (1, 3, 5, 10) or k == len(s.pass_at))
    cost = f" · cost ${s.cost:.4f}" if s.cost is not None else ""
    out = [
        f"accuracy {s.accuracy:.0%} ± {s.accuracy_spread:.0%} over {s.trials} trials · {passes}",
        f"replies {s.replies:.1f} · tool calls {s.tool_calls:.1f} · tokens {s.input_tokens:,} in / "
        f"{s.output_tokens:,} out{cost} · latency p50 {s.seconds_p50:.2f} s, p95 {s.seconds_p95:.2f} s",
    ]
    if s.by_tag:
        out.append("by tag: " + " · ".join(f"{t} {v:.0%}" for t, v in s.by_tag.items()))
    if s.errors or s.read_back:
        out.append(f"errors {s.errors} · read back from the store {s.read_back}")
    return out


def _grid(cols: list[str], rows: list[list[str]], width: int) -> list[str]:
    widths = [max(len(r[i]) for r in [cols, *rows]) for i in range(len(cols))]
    fixed = sum(widths[:-1]) + 2 * (len(cols) - 1)
    widths[-1] = max(8, min(widths[-1], width - fixed))
    out = []
    for r in [cols, *rows]:
        cells = [_fit(v, w) for v, w in zip(r, widths, strict=True)]
        out.append("  ".join(cells).rstrip())
        if r is cols:
            out.append("  ".join("-" * w for w in widths))
    return out


def _fit(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text.ljust(width) if len(text) <= width else text[: width - 1] + "…"
