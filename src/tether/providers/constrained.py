"""Constrained tool calling: how small models pick tools reliably.

Small local models (Qwen2.5-Coder 0.5B/1.5B GGUF) do not emit their chat
template's tool-call tags, so a server finds no ``tool_calls`` in their output.
What works is to constrain the output with a JSON Schema: the model must write
one object ``{"name": <a tool>, "arguments": {...}}`` whose arguments follow that
tool's parameter schema, or ``{"name": "final_answer", "arguments": {"text": ...}}``.

Everything here is a pure function of the notebook and the tools, so any
backend that can decode under a JSON Schema can use it:

* :func:`turn` is the protocol for one decision, written once as a generator: it
  yields request bodies (OpenAI chat-completions shape, with
  ``response_format: {"type": "json_schema", ...}``), receives each
  :class:`Completion`, and returns the assistant Message. Its repeat guard asks
  again allowing only ``final_answer`` when the model repeats a call it
  already made for the task or has used up its tool-call budget.
* :func:`drive` runs that generator with any async ``complete`` function, and
  :func:`drive_stream` with a streaming one (passing on only the text of a
  ``final_answer``); :class:`~tether.providers.local.LocalModel` drives it
  in-process and :class:`ConstrainedOpenAI` over HTTP.

How the notebook is shown to the model: one system message (the agent's
instructions, then one line per tool); user messages as they are; a tool call
as the JSON object the model wrote; a tool result as a user message
``<tool> returned: ...`` followed by a nudge to call ``final_answer`` once it
has what it needs (several results in a row share one user message).
Rendering is deterministic, so each request is a prefix of the next and the
server's prompt cache hits.

>>> from tether import tool
>>> @tool(effect="none")
... def add(a: int, b: int) -> int:
...     '''Add two integers.'''
...     return a + b
>>> parse_reply('{"name": "add", "arguments": {"a": 1, "b": 2}}').tool_calls[0].arguments
'{"a": 1, "b": 2}'
>>> parse_reply('{"name": "final_answer", "arguments": {"text": "3"}}').content
'3'
"""

from __future__ import annotations

import contextvars
import copy
import json
import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from ..context import Context
from ..exceptions import ProviderError, UserError
from ..messages import Message, ToolCall, Usage, new_call_id
from ..output import OutputTool
from ..tools import Tool
from ._http import dumps
from ._parts import refuse_parts
from .openai_compat import OpenAICompatible

FINAL_ANSWER = "final_answer"
MAX_RESULT_CHARS = 6000  # a tool result longer than this is cut before the model sees it
NUDGE = (
    "If that answers the user's question, call final_answer with the answer in a short sentence; "
    "otherwise call another tool."
)
ERROR_NUDGE = "Fix the call and try again, or call final_answer to explain the problem."
FINAL_ONLY = "Now answer the user with final_answer."


@dataclass(frozen=True, slots=True)
class Completion:
    """What a backend returned for one request: the text and its token usage."""

    text: str
    usage: Usage = Usage()


# -- the JSON Schema -------------------------------------------------------


def choice_schema(tools: Sequence[Tool], *, final_only: bool = False) -> dict[str, Any]:
    """A JSON Schema whose instances are exactly one call of an offered tool.

    Each choice is ``{"name": const, "arguments": <parameters>}``; ``final_answer``
    is always among them (and alone when ``final_only``), unless the agent has an
    output type: then its output tool takes that place, so the final answer is
    decoded under the output type's own JSON Schema. Tool schemas' ``$defs``
    are hoisted to the root under ``<tool>__<name>`` so their ``$ref`` s resolve.
    """
    check_tools(tools)
    final = output_tool(tools)
    choices, defs = [], {}
    for t in [final] if final_only and final else () if final_only else tools:
        params, tool_defs = _hoisted(t)
        defs.update(tool_defs)
        choices.append(_choice(t.name, params))
    if final is None:
        choices.append(_choice(FINAL_ANSWER, _FINAL_PARAMS))
    schema: dict[str, Any] = {"anyOf": choices}
    if defs:
        schema["$defs"] = defs
    return schema


_FINAL_PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}


def _choice(name: str, params: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"name": {"const": name}, "arguments": params},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def _hoisted(t: Tool) -> tuple[dict[str, Any], dict[str, Any]]:
    params = copy.deepcopy(t.parameters) or {"type": "object", "properties": {}}
    params.setdefault("additionalProperties", False)
    defs = params.pop("$defs", {})
    renames = {f"#/$defs/{k}": f"#/$defs/{t.name}__{k}" for k in defs}
    if renames:
        _rewrite_refs(params, renames)
        _rewrite_refs(defs, renames)
    return params, {f"{t.name}__{k}": v for k, v in defs.items()}


def _rewrite_refs(node: Any, renames: dict[str, str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref in renames:
            node["$ref"] = renames[ref]
        for value in node.values():
            _rewrite_refs(value, renames)
    elif isinstance(node, list):
        for item in node:
            _rewrite_refs(item, renames)


def output_tool(tools: Sequence[Tool]) -> Tool | None:
    """The output tool of an agent with an output type (``final_result``), when it is offered."""
    return next((t for t in tools if isinstance(t, OutputTool)), None)


def final_name(tools: Sequence[Tool]) -> str:
    """The name of the choice that answers: ``final_answer``, or the output tool's name."""
    final = output_tool(tools)
    return final.name if final is not None else FINAL_ANSWER


def check_tools(tools: Sequence[Tool]) -> None:
    """Refuse a tool that would shadow the protocol's own ``final_answer``."""
    if any(t.name == FINAL_ANSWER for t in tools):
        raise UserError(
            f"a tool is named {FINAL_ANSWER!r}, which the constrained protocol reserves "
            "for the model's answer; rename the tool"
        )


# -- the prompt --------------------------------------------------------------


def system_prompt(tools: Sequence[Tool], instructions: str = "") -> str:
    """The protocol's system prompt: instructions, then one line per tool."""
    lines = [instructions.strip()] if instructions.strip() else []
    lines.append(
        'Reply with one JSON object that calls exactly one tool: {"name": <tool name>, "arguments": {...}}. Tools:'
    )
    final = output_tool(tools)
    lines += [f"- {tool_line(t)}" for t in tools if t is not final]
    if final is None:
        lines.append(f"- {FINAL_ANSWER}(text): answer the user; use it as soon as you can answer.")
    else:
        lines.append(f"- {tool_line(final)} Its arguments are the answer itself, as JSON.")
    lines.append(
        "Call a tool only when you need it to answer; for greetings, thanks or anything "
        f"you can answer yourself, call {final_name(tools)} right away."
    )
    return "\n".join(lines)


def tool_line(t: Tool) -> str:
    """``name(a, b): what it does. a: what a is; b: ...`` on one line."""
    props: dict[str, Any] = (t.parameters or {}).get("properties", {})
    summary = " ".join(t.description.split()).split(". ")[0].rstrip(".") if t.description.strip() else ""
    line = f"{t.name}({', '.join(props)})" + (f": {summary}." if summary else "")
    hints = [f"{k}: {_clause(v['description'])}" for k, v in props.items() if v.get("description")]
    return line + (" " + "; ".join(hints) + "." if hints else "")


def _clause(text: Any) -> str:
    return " ".join(str(text).split()).rstrip(".")


def render(context: Context, tools: Sequence[Tool], *, final_only: bool = False) -> list[dict[str, Any]]:
    """The notebook as OpenAI chat messages for the constrained protocol."""
    instructions = "\n\n".join(m.content for m in context if m.role == "system")
    name = final_name(tools)  # with an output type the answer is its tool, not final_answer
    out: list[dict[str, Any]] = [{"role": "system", "content": system_prompt(tools, instructions)}]
    for m in context:
        if m.role == "user":
            out.append({"role": "user", "content": m.content})
        elif m.role == "assistant":
            out.append({"role": "assistant", "content": _assistant_text(m)})
        elif m.role == "tool":
            _append_user(out, _result_text(m, name))
    if final_only:
        _append_user(out, FINAL_ONLY.replace(FINAL_ANSWER, name))
    return out


def _assistant_text(m: Message) -> str:
    if not m.tool_calls:
        return call_text(FINAL_ANSWER, {"text": m.content})
    return "\n".join(call_text(c.name, _loads_or_raw(c.arguments)) for c in m.tool_calls)


def call_text(name: str, arguments: Any) -> str:
    """A call as the model writes it (``indent=2``, the way llama.cpp's grammar
    lets Qwen lay it out), so the server's prompt cache sees the same tokens."""
    return json.dumps({"name": name, "arguments": arguments}, indent=2, ensure_ascii=False)


def _loads_or_raw(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def _result_text(m: Message, final: str = FINAL_ANSWER) -> str:
    content = m.content
    if len(content) > MAX_RESULT_CHARS:
        content = content[:MAX_RESULT_CHARS] + f"\n[... cut: {len(m.content):,} characters in all]"
    name = m.name or "the tool"
    if m.is_error:
        return f"{name} failed: {content}\n{ERROR_NUDGE.replace(FINAL_ANSWER, final)}"
    return f"{name} returned: {content}\n" + NUDGE.replace(FINAL_ANSWER, final)


def _append_user(out: list[dict[str, Any]], text: str) -> None:
    """Several results in a row become one user message (chat templates want turns to alternate)."""
    if out[-1]["role"] == "user":
        out[-1] = {"role": "user", "content": out[-1]["content"] + "\n\n" + text}
    else:
        out.append({"role": "user", "content": text})


def request(context: Context, tools: Sequence[Tool], *, final_only: bool = False) -> dict[str, Any]:
    """The messages and ``response_format`` of one constrained request.

    Without tools there is nothing to choose: a plain chat request. Images and
    files are refused before any request: the protocol is text only.
    """
    refuse_parts(context, "this brain (constrained decoding)")
    if not tools:
        return {"messages": [m.to_openai() for m in context]}
    schema = choice_schema(tools, final_only=final_only)
    return {
        "messages": render(context, tools, final_only=final_only),
        "response_format": {"type": "json_schema", "json_schema": {"name": "tool_call", "schema": schema}},
    }


# -- reading the reply -------------------------------------------------------

_NAME = re.compile(r'^\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_ARGS = re.compile(r'"arguments"\s*:\s*')


def parse_reply(text: str, call_id: str | None = None) -> Message:
    """The model's JSON object as an assistant Message: one ToolCall, or the answer text.

    A reply cut off at the token limit keeps what it has: a tool call keeps its
    raw (malformed) arguments, so the loop tells the model; a cut answer keeps
    the text written so far.
    """
    try:
        data = json.loads(text)
    except ValueError:
        return _parse_partial(text, call_id)
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise ProviderError(f"the model's reply is not a tool call object: {text[:200]!r}", body=text)
    args = data.get("arguments")
    args = args if isinstance(args, dict) else {}
    if data["name"] == FINAL_ANSWER:
        return Message.assistant(str(args.get("text", "")))
    return Message.assistant("", [ToolCall.of(data["name"], args, id=call_id or new_call_id())])


def _parse_partial(text: str, call_id: str | None) -> Message:
    name = _NAME.match(text)
    if name is None:
        raise ProviderError(f"the model's reply is not JSON: {text[:200]!r}", body=text)
    if name.group(1) == FINAL_ANSWER:
        return Message.assistant(AnswerStream().feed(text))
    args = _ARGS.search(text, name.end())
    raw = text[args.end() :] if args else ""
    return Message.assistant("", [ToolCall(call_id or new_call_id(), name.group(1), raw)])


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
    call again, or two calls in turn. Either way the answer is already in the
    notebook, so the guard asks for ``final_answer`` instead.
    """
    made: set[tuple[str, Any]] = set()
    for m in reversed(context.messages):
        if m.role == "user":
            break
        made.update(_key(c) for c in m.tool_calls)
    return any(_key(c) in made for c in reply.tool_calls)


def _key(call: ToolCall) -> tuple[str, Any]:
    try:
        return call.name, json.dumps(json.loads(call.arguments), sort_keys=True)
    except ValueError:
        return call.name, call.arguments


Turn = Generator[dict[str, Any], Completion, Message]


def turn(context: Context, tools: Sequence[Tool], *, max_tool_calls: int = 6) -> Turn:
    """One decision under the protocol: yields request bodies, receives Completions.

    Asks once; if the model repeats a call it already made for this task, or
    the task has used ``max_tool_calls`` calls already, asks (again) allowing
    only ``final_answer``. The returned Message carries the usage of every request.
    """
    final_only = bool(tools) and calls_this_task(context) >= max_tool_calls
    done = yield request(context, tools, final_only=final_only)
    usage = done.usage
    reply = _reply(done, tools)
    if not final_only and repeats_a_call(context, reply):
        done = yield request(context, tools, final_only=True)
        usage += done.usage
        reply = _reply(done, tools)
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
        stream: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(
            model, base_url=base_url, temperature=temperature, max_tokens=max_tokens, stream=stream, **options
        )
        self.max_tool_calls = max_tool_calls

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

        flow = turn(context, tools, max_tool_calls=self.max_tool_calls)
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
