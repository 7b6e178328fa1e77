"""A policy for Anthropic's native Messages API.

System messages become the ``system`` prompt; assistant tool calls become
``tool_use`` blocks; consecutive tool results become ``tool_result`` blocks of
one user message (with ``is_error`` when the call failed); tools are offered
with their ``input_schema``. Streaming reads ``message_start``,
``content_block_start`` / ``content_block_delta`` (``text_delta`` and
``input_json_delta``), ``message_delta`` (stop reason and usage),
``message_stop`` and ``error`` events. Faults follow the same retry policy as
every tether provider; an ``overloaded_error`` inside a 200 stream discards the
partial turn and retries it.

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
from ..messages import Message, ToolCall, Usage, new_call_id
from ..tools import Tool
from ._http import AttemptFailed, HTTPPolicy, dumps, error_message, excerpt
from ._sse import ServerSentEvent
from .options import HTTPOptions, merged

__all__ = ["ANTHROPIC_VERSION", "Anthropic", "to_anthropic"]

ANTHROPIC_VERSION = "2023-06-01"
# Error types in a stream's ``error`` event that another attempt may fix.
_TRANSIENT = frozenset(("overloaded_error", "api_error", "rate_limit_error", "timeout_error"))


class Anthropic(HTTPPolicy):
    """A Claude model, through the Messages API, as a tether Policy.

    ``api_key`` defaults to ``$ANTHROPIC_API_KEY``. ``tool_choice`` is
    ``"auto"``, ``"none"``, ``"required"`` (Anthropic's ``any``), a tool name,
    or the raw dict; ``parallel_tool_calls=False`` asks for one call per turn.
    Connection and retry settings are an :class:`~tether.providers.HTTPOptions`
    (``options=``), or the same names as keywords.

    >>> model = Anthropic("claude-haiku-4-5", max_tokens=512)   # doctest: +SKIP
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
        options: HTTPOptions | None = None,
        **shared: Any,
    ) -> None:
        super().__init__(
            model, merged(options, shared), tool_choice=tool_choice, parallel_tool_calls=parallel_tool_calls
        )
        self.max_tokens = max_tokens
        self.temperature = temperature

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
        if system:
            payload["system"] = system
        if tools:
            payload["tools"] = self.tool_definitions(tools)
            choice = self._tool_choice()
            if choice is not None:
                payload["tool_choice"] = choice
        payload.update(self.extra_body)
        payload["messages"] = messages  # last, so each request extends the previous one
        return dumps(payload)

    def tool_definition(self, tool: Tool) -> dict[str, Any]:
        return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}

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
        for block in blocks:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif block.get("type") == "tool_use":
                calls.append(_tool_call(block.get("id"), block.get("name"), block.get("input", {})))
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return Message(
            "assistant",
            "".join(parts),
            tuple(calls),
            usage=Usage(_input_tokens(usage), _int(usage.get("output_tokens")), 1),
        )

    def reader(self) -> _StreamReader:
        return _StreamReader()


def to_anthropic(context: Context) -> tuple[str, list[dict[str, Any]]]:
    """The context as Anthropic's ``(system, messages)``.

    >>> to_anthropic(Context([Message.system("Be brief."), Message.user("hi")]))
    ('Be brief.', [{'role': 'user', 'content': 'hi'}])
    """
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for m in context:
        if m.role == "system":
            system.append(m.content)
        elif m.role == "tool":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
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
        elif m.role == "assistant" and m.tool_calls:
            content: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
            content += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": _input(c.arguments)} for c in m.tool_calls
            ]
            out.append({"role": "assistant", "content": content})
        else:
            out.append({"role": m.role, "content": m.content})
    return "\n\n".join(system), out


class _StreamReader:
    """Assembles a streamed Messages reply, block by block."""

    def __init__(self) -> None:
        self.complete = False
        self.text: list[str] = []
        self.blocks: dict[int, list[Any]] = {}  # index -> ["tool", id, name, [json parts], start input]
        self.input_tokens = 0
        self.output_tokens = 0

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
            block = data.get("content_block") or {}
            if block.get("type") == "tool_use":
                self.blocks[_int(data.get("index"))] = [block.get("id"), block.get("name"), [], block.get("input")]
            elif block.get("type") == "text" and block.get("text"):
                self.text.append(block["text"])
                return str(block["text"])
        elif kind == "message_start":
            usage = (data.get("message") or {}).get("usage") or {}
            self.input_tokens = _input_tokens(usage)
            self.output_tokens = _int(usage.get("output_tokens"))
        elif kind == "message_delta":
            self._message_delta(data)
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

    def _delta(self, data: dict[str, Any]) -> str | None:
        delta = data.get("delta") or {}
        if delta.get("type") == "text_delta" and isinstance(delta.get("text"), str):
            self.text.append(delta["text"])
            return str(delta["text"])
        if delta.get("type") == "input_json_delta":
            block = self.blocks.get(_int(data.get("index")))
            if block is not None and isinstance(delta.get("partial_json"), str):
                block[2].append(delta["partial_json"])
        return None

    def _message_delta(self, data: dict[str, Any]) -> None:
        usage = data.get("usage") or {}
        if "output_tokens" in usage:
            self.output_tokens = _int(usage["output_tokens"])  # cumulative
        if usage.get("input_tokens"):
            self.input_tokens = _input_tokens(usage)
        if (data.get("delta") or {}).get("stop_reason"):
            self.complete = True

    def finish(self) -> Message:
        calls = []
        for index in sorted(self.blocks):
            call_id, name, parts, start = self.blocks[index]
            calls.append(_tool_call(call_id, name, "".join(parts) if parts else start or {}))
        usage = Usage(self.input_tokens, self.output_tokens, 1)
        return Message("assistant", "".join(self.text), tuple(calls), usage=usage)


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


def _input_tokens(usage: dict[str, Any]) -> int:
    # Anthropic counts cached prompt tokens apart; tether's Usage counts them all as input.
    return (
        _int(usage.get("input_tokens"))
        + _int(usage.get("cache_creation_input_tokens"))
        + _int(usage.get("cache_read_input_tokens"))
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
