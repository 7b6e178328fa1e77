"""Reading the notebook as text: the recent notes, their words, and the values worth copying.

A *candidate* is a span of a recent note that an argument or an answer may
copy: a token (``A1234``, ``$79``, ``Paris``), the number inside one (``79``),
a run of capitalised words (``New York``), a quoted span, the text after the
user's last colon, or a whole short tool result. Each carries where it came
from and its neighbours, which is what the pointer network reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..context import Context
from ..messages import Message

_TOKEN = re.compile(r"\S+")
_WORD = re.compile(r"[a-z0-9]+")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_QUOTED = re.compile("[\"'\u2018\u201c]([^\"'\u2019\u201d]{1,80})[\"'\u2019\u201d]")
_CAPS = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)+\b")
_STRIP = ".,;:!?()[]{}\"'\u2018\u2019\u201c\u201d"
_COMMON = (
    "a an and are as at be but by for from has have i in is it its me my no not of on or our so than that "
    "the their then there this to was we were what when where which who will with you your"
)
STOPWORDS = frozenset(_COMMON.split())


@dataclass(frozen=True, slots=True)
class Candidate:
    """A span that may be copied: its text, source note, position and neighbours."""

    text: str
    source: str  # "user" or "tool:<name>"
    position: int  # index among this source's spans
    kind: str  # token, number, caps, quoted, tail, whole
    before: str
    after: str
    latest: bool  # from the most recent tool result


def segment(context: Context) -> list[Message]:
    """The notes of the current task: the last user message and everything after it."""
    notes = list(context)
    start = max((i for i, m in enumerate(notes) if m.role == "user"), default=0)
    return notes[start:]


def words(text: str) -> list[str]:
    """Lower-case alphanumeric words.

    >>> words("Where's order A1234?")
    ['where', 's', 'order', 'a1234']
    """
    return _WORD.findall(text.lower())


def shape(text: str) -> str:
    """A coarse shape: letters to X/x, digits to d, repeats collapsed.

    >>> shape("A1234"), shape("Paris"), shape("$79")
    ('Xd', 'Xx', '$d')
    """
    out: list[str] = []
    for ch in text:
        c = "X" if ch.isupper() else "x" if ch.isalpha() else "d" if ch.isdigit() else ch
        if not out or out[-1] != c:
            out.append(c)
    return "".join(out)[:8]


def candidates(context: Context) -> list[Candidate]:
    """Every candidate span of the current task's user message and tool results."""
    notes = segment(context)
    last_tool = max((i for i, m in enumerate(notes) if m.role == "tool"), default=-1)
    out: list[Candidate] = []
    for i, note in enumerate(notes):
        if note.role == "user":
            out += _spans(note.text, "user", latest=False, tail=True)
        elif note.role == "tool":
            out += _spans(note.text, f"tool:{note.name}", latest=i == last_tool, tail=False)
    return out


def _spans(text: str, source: str, *, latest: bool, tail: bool) -> list[Candidate]:
    tokens = [(m.group().strip(_STRIP), m.start()) for m in _TOKEN.finditer(text)]
    tokens = [(t, s) for t, s in tokens if t]
    found: list[tuple[str, str, int]] = []  # (text, kind, token index)
    for n, (tok, _) in enumerate(tokens):
        found.append((tok, "token", n))
        nums = _NUMBER.findall(tok)
        if len(nums) == 1 and nums[0] != tok:
            found.append((nums[0], "number", n))
    for m in _CAPS.finditer(text):
        found.append((m.group(), "caps", _index_at(tokens, m.start())))
    for m in _QUOTED.finditer(text):
        found.append((m.group(1).strip(), "quoted", _index_at(tokens, m.start())))
    if tail and ":" in text and text.rsplit(":", 1)[1].strip():
        found.append((text.rsplit(":", 1)[1].strip(), "tail", len(tokens) - 1))
    if not tail and len(text) <= 200:
        found.append((text.strip(), "whole", 0))
    out = []
    for position, (value, kind, n) in enumerate(found):
        before = tokens[n - 1][0].lower() if n > 0 else "^"
        after = tokens[n + 1][0].lower() if n + 1 < len(tokens) else "$"
        out.append(Candidate(value, source, position, kind, before, after, latest))
    return out


def _index_at(tokens: list[tuple[str, int]], offset: int) -> int:
    return max((n for n, (_, start) in enumerate(tokens) if start <= offset), default=0)


def value_text(value: object) -> str:
    """How a recorded argument value reads as text (``79`` and ``79.0`` both as ``79``)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def matches(candidate: str, value: object) -> bool:
    """A candidate's text equals a value: case-insensitively, or as the same number."""
    text = value_text(value)
    if candidate.casefold() == text.casefold():
        return True
    try:
        return float(candidate) == float(text) and not isinstance(value, bool)
    except ValueError:
        return False


def copyable(token: str) -> bool:
    """Whether an answer's token is worth turning into a slot (not a common word)."""
    bare = token.strip(_STRIP)
    return len(bare) >= 2 and bare.lower() not in STOPWORDS
