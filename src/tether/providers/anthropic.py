"""A policy for Anthropic's native Messages API.

System messages become the ``system`` prompt; assistant tool calls become
``tool_use`` blocks; consecutive tool results become ``tool_result`` blocks of
one user message (with ``is_error`` when the call failed); tools are offered
with their ``input_schema``. Streaming reads ``message_start``,
``content_block_start`` / ``content_block_delta`` (``text_delta``,
``input_json_delta``, ``thinking_delta`` and ``signature_delta``),
``message_delta`` (stop reason and usage), ``message_stop`` and ``error``
events. Faults follow the same retry policy as every tether provider; an
``overloaded_error`` inside a 200 stream discards the partial turn and retries it.

Extended thinking: ``thinking`` and ``redacted_thinking`` blocks become the
reply's :class:`~tether.messages.Reasoning` (text and signature, or the opaque
data) and go back verbatim, before the text and tool calls of their turn, on
every later request: that is what lets a thinking model use tools.

Prompt caching (``cache=True``, the default) marks three breakpoints that
never move: the last tool, the system prompt, and the request itself
(top-level ``cache_control``: Anthropic puts that one on the last block and
moves it forward as the conversation grows). The body of each request in a run
therefore stays a byte-prefix of the next one, and the cache counts come back
as ``Usage.cache_read_tokens`` / ``cache_write_tokens``.

>>> from tether import Agent
>>> model = Anthropic("claude-sonnet-4-5")                   # doctest: +SKIP
>>> Agent(model).run_sync("Say hi").output                    # doctest: +SKIP
'Hi!'
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..context import Context
from ..exceptions import UserError
from ..messages import Message, Reasoning, ToolCall, Usage, new_call_id
from ..tools import Tool
from ._http import AttemptFailed, HTTPPolicy, dumps, error_message, excerpt
from ._parts import anthropic_content
from ._sse import ServerSentEvent
from .options import HTTPOptions, merged

__all__ = ["ANTHROPIC_VERSION", "EPHEMERAL", "Anthropic", "to_anthropic"]

ANTHROPIC_VERSION = "2023-06-01"
# Error types in a stream's ``error`` event that another attempt may fix.
_TRANSIENT = frozenset(("overloaded_error", "api_error", "rate_limit_error", "timeout_error"))


class Anthropic(HTTPPolicy):
    """A Claude model, through the Messages API, as a tether Policy.

    ``api_key`` defaults to ``$ANTHROPIC_API_KEY``. ``tool_choice`` is
    ``"auto"``, ``"none"``, ``"required"`` (Anthropic's ``any``), a tool name,
    or the raw dict; ``parallel_tool_calls=False`` asks for one call per turn.
    ``thinking`` turns on extended thinking: a token budget (at least 1024 and
    below ``max_tokens``) or the raw ``thinking`` object. ``cache=False``
    sends no ``cache_control`` at all. Connection and retry settings are an
    :class:`~tether.providers.HTTPOptions` (``options=``), or the same names as
    keywords.

    >>> model = Anthropic("claude-sonnet-4-5", max_tokens=4096, thinking=2048)   # doctest: +SKIP
    """

    label = "Anthropic"
    key_env = "ANTHROPIC_API_KEY"
    default_base_url = "https://api.anthropic.com"
    path = "/v1/messages"

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int = 1024,
        temperature: float | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        parallel_tool_calls: bool | None = None,
        thinking: int | dict[str, Any] | None = None,
        cache: bool = True,
        options: HTTPOptions | None = None,
        **shared: Any,
    ) -> None:
        super().__init__(
            model, merged(options, shared), tool_choice=tool_choice, parallel_tool_calls=parallel_tool_calls
        )
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.thinking = _thinking(thinking, max_tokens, temperature, self.tool_choice)
        self.cache = cache

    def headers(self) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream" if self.streaming else "application/json",
            "anthropic-version": ANTHROPIC_VERSION,
        }
        if self.api_key:
            headers["x-api-key"] = self.api_key
        headers.update(self.extra_headers)
        return headers

    def body(self, context: Context, tools: Sequence[Tool]) -> bytes:
        system, messages = to_anthropic(context)
        payload: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens}
        if self.streaming:
            payload["stream"] = True
        if self.temperature is not None:
            payload["temperature"] = self.temperature
        if self.thinking is not None:
            payload["thinking"] = self.thinking
        if self.cache:
            payload["cache_control"] = EPHEMERAL  # the moving breakpoint: the end of the conversation
        if system:
            payload["system"] = [{"type": "text", "text": system, "cache_control": EPHEMERAL}] if self.cache else system
        if tools:
            payload["tools"] = self._tools(tools)
            choice = self._tool_choice()
            if choice is not None:
                payload["tool_choice"] = choice
        payload.update(self.extra_body)
        payload["messages"] = messages  # last, so each request extends the previous one
        return dumps(payload)

    def tool_definition(self, tool: Tool) -> dict[str, Any]:
        return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}

    def _tools(self, tools: Sequence[Tool]) -> list[dict[str, Any]]:
        defs = self.tool_definitions(tools)
        return [*defs[:-1], {**defs[-1], "cache_control": EPHEMERAL}] if self.cache else defs

    def _tool_choice(self) -> dict[str, Any] | None:
        choice = self.tool_choice
        if isinstance(choice, dict):
            return choice
        if choice is None and self.parallel_tool_calls is None:
            return None
        kinds = {None: "auto", "auto": "auto", "none": "none", "required": "any"}
        out: dict[str, Any] = {"type": kinds[choice]} if choice in kinds else {"type": "tool", "name": choice}
        if self.parallel_tool_calls is False and out["type"] != "none":
            out["disable_parallel_tool_use"] = True
        return out

    def parse(self, data: Any, text: str) -> Message:
        blocks = data.get("content") if isinstance(data, dict) else None
        if not isinstance(blocks, list):
            raise AttemptFailed(
                f"the reply has no 'content' list: {excerpt(error_message(text))!r}", body=text, retryable=False
            )
        parts: list[str] = []
        calls: list[ToolCall] = []
        reasoning: list[Reasoning] = []
        for block in blocks:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif kind == "tool_use":
                calls.append(_tool_call(block.get("id"), block.get("name"), block.get("input", {})))
            elif kind in ("thinking", "redacted_thinking"):
                reasoning.append(_reasoning(block))
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return Message("assistant", "".join(parts), tuple(calls), reasoning=tuple(reasoning), usage=_usage(usage))

    def reader(self) -> _StreamReader:
        return _StreamReader()


EPHEMERAL: dict[str, str] = {"type": "ephemeral"}


def _thinking(
    thinking: int | dict[str, Any] | None,
    max_tokens: int,
    temperature: float | None,
    choice: str | dict[str, Any] | None,
) -> dict[str, Any] | None:
    """The ``thinking`` request field, refusing combinations the API documents as errors."""
    if thinking is None:
        return None
    if temperature is not None:
        raise UserError("extended thinking does not work with temperature; leave temperature=None")
    if isinstance(choice, str) and choice not in ("auto", "none"):
        raise UserError(f"extended thinking allows tool_choice 'auto' or 'none', not {choice!r}")
    if isinstance(thinking, dict):
        return dict(thinking)
    if isinstance(thinking, bool) or not isinstance(thinking, int) or not 1024 <= thinking < max_tokens:
        raise UserError(f"thinking must be a token budget >= 1024 and < max_tokens ({max_tokens}), got {thinking!r}")
    return {"type": "enabled", "budget_tokens": thinking}


def to_anthropic(context: Context) -> tuple[str, list[dict[str, Any]]]:
    """The context as Anthropic's ``(system, messages)``.

    >>> to_anthropic(Context([Message.system("Be brief."), Message.user("hi")]))
    ('Be brief.', [{'role': 'user', 'content': 'hi'}])
    """
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for m in context:
        if m.role == "system":
            system.append(m.text)
        elif m.role == "tool":
            _add_result(out, m)
        elif m.role == "assistant" and (m.tool_calls or _sendable(m.reasoning)):
            out.append({"role": "assistant", "content": _assistant_blocks(m)})
        else:
            out.append({"role": m.role, "content": anthropic_content(m) if m.role == "user" else m.text})
    return "\n\n".join(system), out


def _add_result(out: list[dict[str, Any]], m: Message) -> None:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": anthropic_content(m)}
    if m.is_error:
        block["is_error"] = True
    last = out[-1] if out else None
    if (
        last is not None
        and last["role"] == "user"
        and isinstance(last["content"], list)
        and last["content"]
        and last["content"][-1].get("type") == "tool_result"
    ):
        last["content"].append(block)  # parallel results answer in one message
    else:
        out.append({"role": "user", "content": [block]})


def _assistant_blocks(m: Message) -> list[dict[str, Any]]:
    """Thinking first, exactly as received, then the text and the tool calls."""
    content = [_thinking_block(r) for r in _sendable(m.reasoning)]
    if m.content:
        content.append({"type": "text", "text": m.text})
    content += [{"type": "tool_use", "id": c.id, "name": c.name, "input": _input(c.arguments)} for c in m.tool_calls]
    return content


def _sendable(reasoning: tuple[Reasoning, ...]) -> list[Reasoning]:
    # Reasoning without Anthropic's seal (another vendor's, or text only) cannot go back as a block.
    return [r for r in reasoning if r.redacted or r.signature]


def _thinking_block(r: Reasoning) -> dict[str, Any]:
    if r.redacted:
        return {"type": "redacted_thinking", "data": r.redacted}
    return {"type": "thinking", "thinking": r.text, "signature": r.signature}


def _reasoning(block: dict[str, Any]) -> Reasoning:
    if block.get("type") == "redacted_thinking":
        return Reasoning(redacted=_text(block.get("data")))
    return Reasoning(_text(block.get("thinking")), signature=_text(block.get("signature")))


class _Block:
    """One content block of a streamed reply, as it arrives."""

    __slots__ = ("id", "kind", "name", "parts", "signature", "start")

    def __init__(self, kind: str, data: dict[str, Any]) -> None:
        self.kind = kind
        self.id, self.name, self.start = data.get("id"), data.get("name"), data.get("input")
        self.parts: list[str] = [_text(data.get("thinking") or data.get("data"))]
        self.signature = _text(data.get("signature"))

    def reasoning(self) -> Reasoning:
        text = "".join(self.parts)
        return Reasoning(redacted=text) if self.kind == "redacted_thinking" else Reasoning(text, self.signature)

    def call(self) -> ToolCall:
        arguments = "".join(self.parts)
        return _tool_call(self.id, self.name, arguments if arguments else self.start or {})


class _StreamReader:
    """Assembles a streamed Messages reply, block by block."""

    def __init__(self) -> None:
        self.complete = False
        self.text: list[str] = []
        self.blocks: dict[int, _Block] = {}  # tool_use, thinking and redacted_thinking blocks by index
        self.usage: dict[str, Any] = {}

    def feed(self, event: ServerSentEvent) -> str | None:
        try:
            data = json.loads(event.data)
        except ValueError:
            raise AttemptFailed(
                f"the stream sent an event that is not JSON: {excerpt(event.data)!r}", body=event.data
            ) from None
        if not isinstance(data, dict):
            return None
        kind = data.get("type") or event.event
        if kind == "content_block_delta":
            return self._delta(data)
        if kind == "content_block_start":
            return self._start(data)
        if kind == "message_start":
            self._count((data.get("message") or {}).get("usage") or {})
        elif kind == "message_delta":
            self._count(data.get("usage") or {})
            if (data.get("delta") or {}).get("stop_reason"):
                self.complete = True
        elif kind == "message_stop":
            self.complete = True
        elif kind == "error":
            raw = data.get("error")
            error: dict[str, Any] = raw if isinstance(raw, dict) else {}
            transient = error.get("type") in _TRANSIENT and "spend_limit" not in event.data
            raise AttemptFailed(
                f"the stream reported an error: {error_message(event.data)}", body=event.data, retryable=transient
            )
        return None

    def _start(self, data: dict[str, Any]) -> str | None:
        block = data.get("content_block") or {}
        kind = block.get("type")
        if kind in ("tool_use", "thinking", "redacted_thinking"):
            self.blocks[_int(data.get("index"))] = _Block(kind, block)
        elif kind == "text" and block.get("text"):
            self.text.append(block["text"])
            return str(block["text"])
        return None

    def _delta(self, data: dict[str, Any]) -> str | None:
        delta = data.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta" and isinstance(delta.get("text"), str):
            self.text.append(delta["text"])
            return str(delta["text"])
        block = self.blocks.get(_int(data.get("index")))
        if block is None:
            return None
        if kind in ("input_json_delta", "thinking_delta"):
            piece = delta.get("partial_json" if kind == "input_json_delta" else "thinking")
            if isinstance(piece, str):
                block.parts.append(piece)
        elif kind == "signature_delta" and isinstance(delta.get("signature"), str):
            block.signature += delta["signature"]
        return None

    def _count(self, usage: dict[str, Any]) -> None:
        # message_delta repeats the counts cumulatively; a zero input count there means "not given".
        for key, value in usage.items():
            if isinstance(value, int) and not isinstance(value, bool) and (value or key == "output_tokens"):
                self.usage[key] = value

    def finish(self) -> Message:
        blocks = [self.blocks[i] for i in sorted(self.blocks)]
        calls = tuple(b.call() for b in blocks if b.kind == "tool_use")
        reasoning = tuple(b.reasoning() for b in blocks if b.kind != "tool_use")
        return Message("assistant", "".join(self.text), calls, reasoning=reasoning, usage=_usage(self.usage))


def _tool_call(call_id: Any, name: Any, arguments: Any) -> ToolCall:
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return ToolCall(
        call_id if isinstance(call_id, str) and call_id else new_call_id(),
        name if isinstance(name, str) else "",
        arguments,
    )


def _input(arguments: str) -> dict[str, Any]:
    """A call's arguments as the object Anthropic wants (malformed ones were reported already)."""
    try:
        value = json.loads(arguments or "{}")
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _usage(usage: dict[str, Any]) -> Usage:
    # Anthropic counts cached prompt tokens apart; tether's input_tokens counts them all.
    read, written = _int(usage.get("cache_read_input_tokens")), _int(usage.get("cache_creation_input_tokens"))
    return Usage(_int(usage.get("input_tokens")) + read + written, _int(usage.get("output_tokens")), 1, read, written)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
