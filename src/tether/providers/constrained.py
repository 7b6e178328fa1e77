"""Constrained tool calling: how small models pick tools reliably.

Small local models (Qwen2.5-Coder 0.5B/1.5B GGUF) do not emit their chat
template's tool-call tags, so a server finds no ``tool_calls`` in their output.
What works is to constrain the output with a JSON Schema: the model must write
a list of one or more calls ``[{"name": <a tool>, "arguments": {...}}, ...]``
whose arguments follow each tool's parameter schema, or the answer
``{"name": "final_answer", "arguments": {"text": ...}}``. What the model is
shown (schema, prompt, notebook) is :mod:`~tether.providers._prompt`.

Everything here is a pure function of the notebook and the tools, so any
backend that can decode under a JSON Schema can use it:

* :func:`turn` is the protocol for one decision, written once as a generator: it
  yields request bodies (OpenAI chat-completions shape, with
  ``response_format: {"type": "json_schema", ...}``), receives each
  :class:`Completion`, and returns the assistant Message. Its repeat guard
  drops calls the model already made for the task, and asks again allowing
  only ``final_answer`` when nothing new is left or the tool-call budget is spent.
* :func:`drive` runs that generator with any async ``complete`` function, and
  :func:`drive_stream` with a streaming one (passing on only the text of a
  ``final_answer``); :class:`~tether.providers.local.LocalModel` drives it
  in-process and :class:`ConstrainedOpenAI` over HTTP.

Rendering is deterministic, so each request is a prefix of the next and the
server's prompt cache hits.

>>> two = '[{"name": "add", "arguments": {"a": 1}}, {"name": "neg", "arguments": {"a": 1}}]'
>>> [c.name for c in parse_reply(two).tool_calls]
['add', 'neg']
>>> parse_reply('{"name": "final_answer", "arguments": {"text": "3"}}').content
'3'
"""

from __future__ import annotations

import contextvars
import json
import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from ..context import Context
from ..exceptions import ProviderError
from ..messages import Message, ToolCall, Usage, new_call_id
from ..tools import Tool
from ._http import dumps
from ._prompt import (
    DENIED_NUDGE,
    ERROR_NUDGE,
    FINAL_ANSWER,
    FINAL_ONLY,
    MAX_CALLS_PER_REPLY,
    MAX_RESULT_CHARS,
    NUDGE,
    call_text,
    calls_text,
    check_tools,
    choice_schema,
    confirmed,
    decided,
    decision_request,
    offered,
    render,
    request,
    system_prompt,
    tool_line,
    verify_request,
)
from .openai_compat import OpenAICompatible

__all__ = [
    "AnswerStream",
    "Completion",
    "ConstrainedOpenAI",
    "DENIED_NUDGE",
    "ERROR_NUDGE",
    "FINAL_ANSWER",
    "FINAL_ONLY",
    "MAX_CALLS_PER_REPLY",
    "MAX_RESULT_CHARS",
    "NUDGE",
    "call_text",
    "calls_text",
    "calls_this_task",
    "check_tools",
    "choice_schema",
    "completion_of",
    "drive",
    "drive_stream",
    "fresh_calls",
    "offered",
    "parse_reply",
    "render",
    "repeats_a_call",
    "request",
    "system_prompt",
    "tool_line",
    "turn",
]


@dataclass(frozen=True, slots=True)
class Completion:
    """What a backend returned for one request: the text and its token usage."""

    text: str
    usage: Usage = Usage()


# -- reading the reply -------------------------------------------------------

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


# -- the guard and the turn --------------------------------------------------


def calls_this_task(context: Context) -> int:
    """Tool calls the model made since the last user message."""
    n = 0
    for m in reversed(context.messages):
        if m.role == "user":
            break
        n += len(m.tool_calls)
    return n


def repeats_a_call(context: Context, reply: Message) -> bool:
    """True if ``reply`` makes a call (same tool, same arguments) already made in this task.

    Small models that lose the thread tend to go round in circles: the same
    call again, or two calls in turn. Either way that result is already in the
    notebook.
    """
    return len(fresh_calls(context, reply)) < len(reply.tool_calls)


def fresh_calls(context: Context, reply: Message) -> tuple[ToolCall, ...]:
    """The calls of ``reply`` not made before in this task (nor earlier in the same reply)."""
    made: set[tuple[str, Any]] = set()
    for m in reversed(context.messages):
        if m.role == "user":
            break
        made.update(_key(c) for c in m.tool_calls)
    fresh = []
    for c in reply.tool_calls:
        if _key(c) not in made:
            made.add(_key(c))
            fresh.append(c)
    return tuple(fresh)


def grounded(context: Context, calls: Sequence[ToolCall]) -> tuple[ToolCall, ...]:
    """The first call, and each further call whose argument values all appear in the task's notes.

    A small model asked for a list sometimes pads it with calls nobody asked
    for (``get_weather("Berlin")`` after the two cities the user named); a
    value that is in neither the user's words nor a result since is such a pad.
    """
    seen = " ".join(m.content for m in _since_user(context)).casefold()
    return tuple(c for n, c in enumerate(calls) if n == 0 or all(v in seen for v in _values(c)))


def _since_user(context: Context) -> list[Message]:
    out: list[Message] = []
    for m in reversed(context.messages):
        out.append(m)
        if m.role == "user":
            break
    return out


def _values(call: ToolCall) -> list[str]:
    try:
        args = json.loads(call.arguments)
    except ValueError:
        return []
    values = args.values() if isinstance(args, dict) else []
    return [_number_text(v).casefold() for v in values if isinstance(v, str | int | float) and not isinstance(v, bool)]


def _number_text(v: str | int | float) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _key(call: ToolCall) -> tuple[str, Any]:
    try:
        return call.name, json.dumps(json.loads(call.arguments), sort_keys=True)
    except ValueError:
        return call.name, call.arguments


Turn = Generator[dict[str, Any], Completion, Message]


def turn(
    context: Context,
    tools: Sequence[Tool],
    *,
    max_tool_calls: int = 6,
    decide_first: bool = False,
    verify: bool = False,
    narrow: bool = False,
) -> Turn:
    """One decision under the protocol: yields request bodies, receives Completions.

    Asks once, for a list of calls or the answer. Calls the model already made
    for this task are dropped, and so are calls past ``max_tool_calls`` for the
    task; if no call is left, or the budget was spent already, it asks (again)
    allowing only ``final_answer``. With ``decide_first``, a short request
    first asks which tool fits (:func:`~tether.providers._prompt.decision_request`):
    ``"none"`` allows only the answer, a tool's name only calls (with
    ``narrow``, only calls of that tool: the 0.5B otherwise pads its list with
    calls nobody asked for; with ``verify``, a second short request asks
    whether the named tool really gives what the question asks, and a "no"
    allows only the answer). The returned Message carries the usage of every request.
    """
    left = max_tool_calls - calls_this_task(context)
    final_only = bool(tools) and left <= 0
    calls_only, only = False, None
    usage = Usage()
    if decide_first and tools and not final_only:
        answer = yield decision_request(context, tools)
        usage += answer.usage
        name = decided(answer.text)
        chosen = next((t for t in tools if t.name == name), None)
        if verify and chosen is not None:
            verdict = yield verify_request(context, tools, chosen)
            usage += verdict.usage
            name = name if confirmed(verdict.text) else None
        calls_only, final_only = name is not None, name is None
        if narrow and name and chosen is not None:
            only = [chosen]
    done = yield request(context, tools, final_only=final_only, calls_only=calls_only, only=only)
    usage += done.usage
    reply = _reply(done, tools)
    if not final_only and reply.tool_calls:
        fresh = fresh_calls(context, reply)
        if not fresh:
            done = yield request(context, tools, final_only=True)
            usage += done.usage
            reply = _reply(done, tools)
        else:
            reply = Message.assistant("", grounded(context, fresh)[:left])
    return Message("assistant", reply.content, reply.tool_calls, usage=usage)


def _reply(done: Completion, tools: Sequence[Tool]) -> Message:
    return parse_reply(done.text) if tools else Message.assistant(done.text)


async def drive(flow: Turn, complete: Callable[[dict[str, Any]], Awaitable[Completion]]) -> Message:
    """Run a :func:`turn` with ``complete`` (an async function: request body -> Completion)."""
    body = next(flow)
    while True:
        done = await complete(body)
        try:
            body = flow.send(done)
        except StopIteration as stop:
            result: Message = stop.value
            return result


Send = Callable[[dict[str, Any]], AsyncIterator["str | Completion"]]


async def drive_stream(flow: Turn, send: Send, *, tools: Sequence[Tool]) -> AsyncIterator[str | Message]:
    """Run a :func:`turn` with a streaming ``send`` (text pieces, then one Completion).

    With tools, only the text of a ``final_answer`` is passed on: a user sees
    the answer as it is written and never a tool call's JSON. Ends with the Message.
    """
    body = next(flow)
    while True:
        answer = AnswerStream() if tools else None
        done = None
        async for piece in send(body):
            if isinstance(piece, Completion):
                done = piece
            elif text := (answer.feed(piece) if answer else piece):
                yield text
        if done is None:
            raise ProviderError("the model's stream ended without a completion")
        try:
            body = flow.send(done)
        except StopIteration as stop:
            yield stop.value
            return


# -- any OpenAI-compatible server with json_schema ----------------------------

# The constrained request that ConstrainedOpenAI.body() sends next (see stream()).
_REQUEST: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("tether_constrained_request")


class ConstrainedOpenAI(OpenAICompatible):
    """A Policy for any OpenAI-compatible server that decodes under ``json_schema``.

    For small open models (llama.cpp server, vLLM, Ollama, LM Studio...) that
    cannot be trusted to emit ``tool_calls``: tool choice goes through the
    constrained protocol above, and each request asks for
    ``response_format: {"type": "json_schema", ...}`` instead of sending
    ``tools``. Transport, retries and streaming are
    :class:`~tether.providers.OpenAICompatible`'s; with ``stream=True`` only
    the text of a ``final_answer`` is streamed, never a tool call's JSON.
    No API key is read from the environment unless ``api_key_env`` names one.
    ``decide_first``, ``verify`` and ``narrow`` are :func:`turn`'s; deciding
    first costs one short request per step and is what makes a small model
    answer without a tool (``decide_first=False`` sends one request per step).

    >>> policy = ConstrainedOpenAI("qwen", base_url="http://127.0.0.1:8080/v1")
    """

    label = "constrained OpenAI-compatible"
    key_env = ""

    def __init__(
        self,
        model: str = "",
        *,
        base_url: str,
        temperature: float | None = 0.0,
        max_tokens: int | None = 512,
        max_tool_calls: int = 6,
        decide_first: bool = True,
        verify: bool = False,
        narrow: bool = False,
        stream: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(
            model, base_url=base_url, temperature=temperature, max_tokens=max_tokens, stream=stream, **options
        )
        self.max_tool_calls = max_tool_calls
        self.protocol = {"decide_first": decide_first, "verify": verify, "narrow": narrow}

    def body(self, context: Context, tools: Sequence[Tool]) -> bytes:
        payload = self.sampling()
        payload.update(self.extra_body)
        request = _REQUEST.get()
        if "response_format" in request:
            payload["response_format"] = request["response_format"]
        payload["messages"] = request["messages"]  # last, so each body is a prefix of the next
        return dumps(payload)

    async def decide(self, context: Context, tools: Sequence[Tool]) -> Message:
        async for piece in self.stream(context, tools):
            if isinstance(piece, Message):
                return piece
        raise AssertionError("unreachable: stream() always ends with a Message")

    async def stream(self, context: Context, tools: Sequence[Tool]) -> AsyncGenerator[str | Message, None]:
        """Text of the answer as it arrives (with ``stream=True``), then the Message."""

        async def send(body: dict[str, Any]) -> AsyncIterator[str | Completion]:
            _REQUEST.set(body)
            async for piece in OpenAICompatible.stream(self, context, tools):
                if isinstance(piece, Message):
                    yield Completion(piece.content, piece.usage or Usage(requests=1))
                else:
                    yield piece

        flow = turn(context, tools, max_tool_calls=self.max_tool_calls, **self.protocol)
        async for piece in drive_stream(flow, send, tools=tools):
            yield piece


def completion_of(data: dict[str, Any]) -> Completion:
    """A :class:`Completion` from a chat-completions response body."""
    try:
        text = data["choices"][0]["message"].get("content") or ""
    except (KeyError, IndexError, TypeError, AttributeError):
        raise ProviderError(f"unexpected response shape: {json.dumps(data)[:300]}", body=json.dumps(data)) from None
    u = data.get("usage") or {}
    usage = Usage(int(u.get("prompt_tokens", 0)), int(u.get("completion_tokens", 0)), 1)
    return Completion(text, usage)
