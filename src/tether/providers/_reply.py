"""Reading a constrained reply: the model's JSON as calls or the answer, whole or cut, and streamed.

>>> parse_reply('[{"name": "add", "arguments": {"a": 1}}]').tool_calls[0].name
'add'
"""

from __future__ import annotations

import json
import re

from ..exceptions import ProviderError
from ..messages import Message, ToolCall, new_call_id
from ._prompt import FINAL_ANSWER

__all__ = ["AnswerStream", "parse_reply"]

_NAME = re.compile(r'^\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_ARGS = re.compile(r'"arguments"\s*:\s*')
_DECODER = json.JSONDecoder()


def parse_reply(text: str, call_id: str | None = None) -> Message:
    """The model's JSON as an assistant Message: its ToolCalls (a list, or one call), or the answer text.

    A reply cut off at the token limit keeps what it has: the calls written
    whole, and a cut call with its raw (malformed) arguments, so the loop tells
    the model; a cut answer keeps the text written so far.
    """
    try:
        data = json.loads(text)
    except ValueError:
        return _parse_partial(text, call_id)
    items = data if isinstance(data, list) else [data]
    if not items or not all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items):
        raise ProviderError(f"the model's reply is not a tool call object: {text[:200]!r}", body=text)
    answers = [i for i in items if i["name"] == FINAL_ANSWER]
    calls = [i for i in items if i["name"] != FINAL_ANSWER]
    if not calls:
        args = answers[0].get("arguments")
        return Message.assistant(str(args.get("text", "")) if isinstance(args, dict) else "")
    made = []
    for n, item in enumerate(calls):
        args = item.get("arguments")
        made.append(ToolCall.of(item["name"], args if isinstance(args, dict) else {}, id=_call_id(call_id, n)))
    return Message.assistant("", made)


def _call_id(given: str | None, n: int) -> str:
    return given if given and n == 0 else new_call_id()


def _parse_partial(text: str, call_id: str | None) -> Message:
    start = text.lstrip()
    if not start.startswith("["):
        return _partial_one(text, call_id, 0)
    calls: list[ToolCall] = []
    at = len(text) - len(start) + 1
    while True:
        at = _skip(text, at, ",")
        try:
            item, end = _DECODER.raw_decode(text, at)
        except ValueError:
            break
        if isinstance(item, dict) and isinstance(item.get("name"), str) and item["name"] != FINAL_ANSWER:
            args = item.get("arguments")
            calls.append(
                ToolCall.of(item["name"], args if isinstance(args, dict) else {}, id=_call_id(call_id, len(calls)))
            )
        at = end
    rest = text[at:]
    if _NAME.match(rest):
        cut = _partial_one(rest, call_id, len(calls))
        calls.extend(cut.tool_calls)
    if not calls:
        raise ProviderError(f"the model's reply is not JSON: {text[:200]!r}", body=text)
    return Message.assistant("", calls)


def _skip(text: str, at: int, separators: str) -> int:
    while at < len(text) and (text[at].isspace() or text[at] in separators):
        at += 1
    return at


def _partial_one(text: str, call_id: str | None, n: int) -> Message:
    name = _NAME.match(text)
    if name is None:
        raise ProviderError(f"the model's reply is not JSON: {text[:200]!r}", body=text)
    if name.group(1) == FINAL_ANSWER:
        return Message.assistant(AnswerStream().feed(text))
    args = _ARGS.search(text, name.end())
    raw = text[args.end() :] if args else ""
    return Message.assistant("", [ToolCall(_call_id(call_id, n), name.group(1), raw)])


class AnswerStream:
    """Pull the text of a ``final_answer`` out of a JSON reply as it streams in.

    ``feed`` takes the next piece of the raw reply and returns the answer text
    that became readable, so a user sees the answer word by word and never
    sees JSON or a tool call.

    >>> s = AnswerStream()
    >>> s.feed('{"name": "final_answer", "arguments": {"text": "Hel'), s.feed('lo\\\\n"}}')
    ('Hel', 'lo\\n')
    """

    _START = re.compile(r'\s*\{\s*"name"\s*:\s*"' + FINAL_ANSWER + r'"\s*,\s*"arguments"\s*:\s*\{\s*"text"\s*:\s*"')

    def __init__(self) -> None:
        self._raw = ""
        self._start: int | None = None
        self._sent = 0

    def feed(self, piece: str) -> str:
        self._raw += piece
        if self._start is None:
            m = self._START.match(self._raw)
            if m is None:
                return ""
            self._start = m.end()
        text = _decode_prefix(self._raw[self._start :])
        new, self._sent = text[self._sent :], len(text)
        return new


def _decode_prefix(raw: str) -> str:
    """The readable part of a JSON string body that may be cut anywhere."""
    i, end = 0, len(raw)
    while i < end:
        ch = raw[i]
        if ch == '"':
            break
        if ch == "\\":
            step = 6 if raw[i + 1 : i + 2] == "u" else 2
            if i + step > end or (step == 6 and _high_surrogate(raw[i + 2 : i + 6]) and i + 12 > end):
                break  # an escape that is not complete yet
            i += step
        else:
            i += 1
    try:
        return str(json.loads('"' + raw[:i] + '"'))
    except ValueError:
        return ""


def _high_surrogate(hex4: str) -> bool:
    try:
        return 0xD800 <= int(hex4, 16) <= 0xDBFF
    except ValueError:
        return False
