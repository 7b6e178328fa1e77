"""Constrained tool calling: how small models pick tools reliably.

Small local models (Qwen2.5-Coder 0.5B/1.5B GGUF) do not emit their chat
template's tool-call tags, so a server finds no ``tool_calls`` in their output.
What works is to constrain the output with a JSON Schema: the model must write
a list of one or more calls ``[{"name": <a tool>, "arguments": {...}}, ...]``
whose arguments follow each tool's parameter schema, or the answer
``{"name": "final_answer", "arguments": {"text": ...}}``; for an agent with an
output type, the call of its output tool (``final_result``) takes the answer's
place, so the answer is decoded under the type's own JSON Schema. What the model is
shown (schema, prompt, notebook) is :mod:`~tether.providers._prompt`; reading
its reply is :mod:`~tether.providers._reply`. Images and files are refused
before any request: the protocol is text only.

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
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from ..context import Context
from ..exceptions import ProviderError
from ..messages import Message, ToolCall, Usage
from ..tools import Tool
from ._http import dumps
from ._parts import refuse_parts
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
    final_name,
    offered,
    output_tool,
    render,
    request,
    since_user,
    system_prompt,
    tool_line,
)
from ._reply import AnswerStream, parse_reply
from ._tool_choice import confirmed, decided, decision_request, verify_request
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
    "final_name",
    "fresh_calls",
    "offered",
    "output_tool",
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


# -- the guard and the turn --------------------------------------------------


def calls_this_task(context: Context) -> int:
    """Tool calls the model made since the last user message."""
    return sum(len(m.tool_calls) for m in since_user(context))


def repeats_a_call(context: Context, reply: Message) -> bool:
    """True if ``reply`` makes a call (same tool, same arguments) already made in this task.

    Small models that lose the thread tend to go round in circles: the same
    call again, or two calls in turn. Either way that result is already in the
    notebook.
    """
    return len(fresh_calls(context, reply)) < len(reply.tool_calls)


def fresh_calls(context: Context, reply: Message) -> tuple[ToolCall, ...]:
    """The calls of ``reply`` not made before in this task (nor earlier in the same reply)."""
    made = {_key(c) for m in since_user(context) for c in m.tool_calls}
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
    seen = " ".join(m.text for m in since_user(context)).casefold()
    return tuple(c for n, c in enumerate(calls) if n == 0 or all(v in seen for v in _values(c)))


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
    what_is_left: bool = True,
) -> Turn:
    """One decision under the protocol: yields request bodies, receives Completions.

    Asks once, for a list of calls or the answer. Calls the model already made
    for this task are dropped, and so are calls past ``max_tool_calls`` for the
    task; if no call is left, or the budget was spent already, it asks (again)
    allowing only ``final_answer``. With ``decide_first``, a short request
    first asks which tool fits (:func:`~tether.providers._tool_choice.decision_request`):
    ``"none"`` allows only the answer, a tool's name only calls (with
    ``narrow``, only calls of that tool: the 0.5B otherwise pads its list with
    calls nobody asked for; with ``verify``, a second short request asks
    whether the named tool really gives what the question asks, and a "no"
    allows only the answer; once tools have answered, the decision asks what is
    left of the task, or with ``what_is_left=False`` the first question again).
    With an output type the answer is its tool's call
    (:func:`~tether.providers._prompt.output_tool`); with no other tool there is
    nothing to decide. The returned Message carries the usage of every request.
    """
    refuse_parts(context, "this brain (constrained decoding: LocalModel, ConstrainedOpenAI)")
    left = max_tool_calls - calls_this_task(context)
    final_only = bool(tools) and left <= 0
    calls_only, only = False, None
    usage = Usage()
    final = output_tool(tools)
    if decide_first and any(t is not final for t in tools) and not final_only:
        answer = yield decision_request(context, tools, what_is_left=what_is_left)
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
    ``decide_first``, ``verify``, ``narrow`` and ``what_is_left`` are :func:`turn`'s; deciding
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
        what_is_left: bool = True,
        stream: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(
            model, base_url=base_url, temperature=temperature, max_tokens=max_tokens, stream=stream, **options
        )
        self.max_tool_calls = max_tool_calls
        self.protocol = {"decide_first": decide_first, "verify": verify, "narrow": narrow, "what_is_left": what_is_left}

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
                    yield Completion(piece.text, piece.usage or Usage(requests=1))
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
