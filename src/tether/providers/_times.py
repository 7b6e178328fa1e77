"""Times in tool results, written out for a small model that misreads ISO 8601.

The 1.5B model read ``"datetime": "2026-12-02T07:33:58+09:00"`` as "07:33:58 PM".
:func:`spelled_out` gives, for each ISO time in a text, a line that says it in
words ("7:33 in the morning"), which the local protocol puts after the result.

>>> print(spelled_out('{"datetime": "2026-12-02T07:33:58+09:00"}'))
(2026-12-02T07:33:58+09:00 is Wednesday 2 December 2026, 7:33 in the morning (07:33:58), at UTC+09:00)
>>> spelled_out("no time here")
''
"""

from __future__ import annotations

import datetime as dt
import re

__all__ = ["spelled_out"]

_ISO = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?\b|\b\d{4}-\d{2}-\d{2}\b"
)
_MOST = 5  # times spelled out per result: a listing of many rows needs none of this


def spelled_out(text: str) -> str:
    """One line per ISO date or time in ``text`` (at most five), saying it in words; "" when none."""
    lines: list[str] = []
    for found in dict.fromkeys(m.group(0) for m in _ISO.finditer(text)):
        said = _said(found)
        if said:
            lines.append(f"({found} is {said})")
        if len(lines) == _MOST:
            break
    return "\n".join(lines)


def _said(text: str) -> str:
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return ""
    day = f"{when:%A} {when.day} {when:%B %Y}"
    if len(text) == 10:  # a date alone
        return day
    hour = when.hour % 12 or 12
    part = "at night" if when.hour < 5 else "in the morning" if when.hour < 12 else "in the afternoon"
    if when.hour >= 18:
        part = "in the evening"
    if when.hour == 12 and when.minute == 0:
        part = "noon"
    return f"{day}, {hour}:{when.minute:02d} {part} ({when:%H:%M:%S}){_zone(when)}"


def _zone(when: dt.datetime) -> str:
    offset = when.utcoffset()
    if offset is None:
        return ""
    minutes = int(offset.total_seconds()) // 60
    if minutes == 0:
        return ", at UTC"
    sign = "+" if minutes > 0 else "-"
    return f", at UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
