"""A policy for any OpenAI-compatible chat-completions endpoint.

OpenAI itself, and everything that speaks its wire shape through ``base_url``:
DeepSeek, Groq, Together, OpenRouter, Ollama, vLLM, llama.cpp's server...
Written on ``httpx`` directly (no SDK), with streaming tool-call deltas and the
retry policy of :mod:`tether.providers._retry`.

Requests are serialised deterministically: fixed key order, no volatile
fields, compact JSON, ``messages`` last. Since a run's notebook only grows, the
body of each request up to the end of its messages is a byte-prefix of the next
one, which is what provider prompt caches key on.

Images (``image_url``, a data URL or a link) and PDF files (``file`` parts with
``file_data``) go in user notes only; a tool result here is text, so the images
and files a tool returned follow the turn's results as one user note
(:func:`openai_messages`).

>>> from tether import Agent
>>> model = OpenAICompatible("gpt-4o-mini")                   # doctest: +SKIP
>>> Agent(model).run_sync("Say hi").output                    # doctest: +SKIP
'Hi!'
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from ..context import Context
from ..exceptions import UserError
from ..messages import Message, Reasoning, ToolCall, Usage, new_call_id
from ..parts import File, Image, Part, Text
from ..tools import Tool
from ._http import AttemptFailed, HTTPPolicy, dumps, error_message, excerpt
from ._sse import ServerSentEvent
from .options import HTTPOptions, merged
from .presets import PRESETS, Preset
from .presets import preset as preset_named

OPENAI = PRESETS["openai"]

__all__ = ["OpenAICompatible"]


class OpenAICompatible(HTTPPolicy):
    """An OpenAI-compatible chat-completions model as a tether Policy.

    ``api_key`` defaults to ``$OPENAI_API_KEY`` (or the variable named by
    ``api_key_env``); servers that need no key (Ollama, vLLM) work without one.
    ``tool_choice`` is ``"auto"``, ``"none"``, ``"required"``, a tool name, or
    the raw dict. Connection and retry settings are an
    :class:`~tether.providers.HTTPOptions` (``options=``), or the same names as
    keywords (``base_url=``, ``stream=``, ``max_retries=``, ``extra_body=``...).

    >>> model = OpenAICompatible(
    ...     "deepseek-chat", base_url="https://api.deepseek.com/v1", api_key_env="DEEPSEEK_API_KEY"
    ... )                                                         # doctest: +SKIP
    """

    label = "OpenAI-compatible"
    key_env = "OPENAI_API_KEY"
    default_base_url = "https://api.openai.com/v1"
    path = "/chat/completions"

    def __init__(
        self,
        model: str,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        parallel_tool_calls: bool | None = None,
        preset: str | Preset | None = None,
        options: HTTPOptions | None = None,
        **shared: Any,
    ) -> None:
        self.quirks = OPENAI if preset is None else _endpoint(self, preset_named(preset), parallel_tool_calls)
        super().__init__(
            model, merged(options, shared), tool_choice=tool_choice, parallel_tool_calls=parallel_tool_calls
        )
        self.temperature = temperature
        self.max_tokens = max_tokens

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.streaming:
            headers["Accept"] = "text/event-stream"
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        headers.update(self.extra_headers)
        return headers

    def sampling(self) -> dict[str, Any]:
        """The leading request fields (model, streaming, sampling), in their fixed order."""
        payload: dict[str, Any] = {"model": self.model} if self.model else {}
        if self.streaming:
            payload["stream"] = True
            if self.quirks.stream_usage:
                payload["stream_options"] = {"include_usage": True}
        if self.temperature is not None:
            payload["temperature"] = self.temperature
        if self.max_tokens is not None:
            payload["max_tokens"] = self.max_tokens
        return payload

    def body(self, context: Context, tools: Sequence[Tool]) -> bytes:
        payload = self.sampling()
        if tools:
            payload["tools"] = self.tool_definitions(tools)
            if self.tool_choice is not None:
                payload["tool_choice"] = _openai_tool_choice(self.tool_choice)
            if self.parallel_tool_calls is not None:
                payload["parallel_tool_calls"] = self.parallel_tool_calls
        payload.update(self.extra_body)
        wire = _with_reasoning if self.quirks.send_reasoning else openai_message
        payload["messages"] = openai_messages(context, wire)  # last: see the module docstring
        return dumps(payload)

    def tool_definition(self, tool: Tool) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
        }

    def parse(self, data: Any, text: str) -> Message:
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise AttemptFailed(
                f"the reply has no 'choices': {excerpt(error_message(text))!r}", body=text, retryable=False
            )
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise AttemptFailed(
                f"the reply's first choice has no 'message': {excerpt(text)!r}", body=text, retryable=False
            )
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            raise AttemptFailed(
                f"the reply's 'tool_calls' is not a list: {excerpt(text)!r}", body=text, retryable=False
            )
        return Message(
            "assistant",
            _text(message.get("content")),
            tuple(_tool_call(c) for c in calls),
            reasoning=_reasoning(_reasoning_text(message)),
            usage=_usage(data.get("usage")),
        )

    def reader(self) -> _StreamReader:
        return _StreamReader()


def _endpoint(model: OpenAICompatible, found: Preset, parallel_tool_calls: bool | None) -> Preset:
    """Point ``model`` at the preset's endpoint; the preset's quirks are returned."""
    if parallel_tool_calls is not None and not found.parallel_tool_calls:
        raise UserError(f"{found.label} does not accept parallel_tool_calls; leave it None")
    model.label, model.key_env, model.needs_key = found.label, found.key_env, found.needs_key
    model.default_base_url = found.base_url
    return found


def _with_reasoning(m: Message) -> dict[str, Any]:
    """The wire message, carrying the reasoning of a tool-calling turn (DeepSeek's thinking mode)."""
    data = openai_message(m)
    if m.tool_calls:
        data["reasoning_content"] = "".join(r.text for r in m.reasoning)
    return data


# -- the notes on the wire ---------------------------------------------------------


def openai_messages(context: Context, wire: Callable[[Message], dict[str, Any]]) -> list[dict[str, Any]]:
    """The notes in OpenAI's shape, each by ``wire`` (:func:`openai_message`, or one that adds to it);
    a tool's images and files follow its turn's results as a user note."""
    out: list[dict[str, Any]] = []
    carried: list[Part] = []
    for m in context:
        if m.parts:
            _check_openai(m.parts)
        if m.role == "tool":
            carried += m.parts
        elif carried:
            out.append(_carried(carried))
            carried = []
        out.append(wire(m))
    if carried:
        out.append(_carried(carried))
    return out


def openai_message(m: Message) -> dict[str, Any]:
    """One note in the OpenAI chat-completions wire shape.

    Images become ``image_url`` parts and files ``file`` parts of a user note;
    elsewhere (a tool result, an assistant note) the wire takes text only, so
    parts are described there (:func:`openai_messages` sends a tool's images in
    a user note after the results).

    >>> openai_message(Message.user("hi"))
    {'role': 'user', 'content': 'hi'}
    """
    content: str | list[dict[str, Any]] = m.content if isinstance(m.content, str) else m.text
    if not isinstance(m.content, str) and m.role == "user":
        content = _openai_parts(m.content)
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": content}
    data: dict[str, Any] = {"role": m.role, "content": content}
    if m.tool_calls:
        data["content"] = content or None
        data["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in m.tool_calls
        ]
    return data


def _openai_parts(parts: tuple[Part, ...]) -> list[dict[str, Any]]:
    """Parts as OpenAI chat-completions content parts (``text``, ``image_url``, ``file``)."""
    out: list[dict[str, Any]] = []
    for p in parts:
        if isinstance(p, Text):
            out.append({"type": "text", "text": p.text})
        elif isinstance(p, Image):
            out.append({"type": "image_url", "image_url": {"url": p.data_url}})
        else:
            file: dict[str, Any] = {"filename": p.name} if p.name else {}
            file["file_data"] = p.data_url
            out.append({"type": "file", "file": file})
    return out


def _carried(parts: list[Part]) -> dict[str, Any]:
    note = Message.user(Text("The images and files the tool results above refer to, in order:"), *parts)
    return openai_message(note)


def _check_openai(parts: tuple[Part, ...]) -> None:
    for p in parts:
        if isinstance(p, File) and p.url is not None:
            raise UserError(f"OpenAI chat completions takes files as bytes, not URLs: {p!r} (read it, File(data=...))")


class _StreamReader:
    """Assembles a streamed chat completion: text, reasoning and tool-call fragments."""

    def __init__(self) -> None:
        self.complete = False
        self.text: list[str] = []
        self.thought: list[str] = []
        self.calls: dict[int, list[Any]] = {}  # index -> [id, name, [argument fragments]]
        self.usage: Any = None

    def feed(self, event: ServerSentEvent) -> str | None:
        if event.data == "[DONE]":
            self.complete = True
            return None
        try:
            chunk = json.loads(event.data)
        except ValueError:
            raise AttemptFailed(
                f"the stream sent an event that is not JSON: {excerpt(event.data)!r}", body=event.data
            ) from None
        if not isinstance(chunk, dict):
            return None
        if event.event == "error" or "error" in chunk:
            raise AttemptFailed(f"the stream reported an error: {error_message(event.data)}", body=event.data)
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        elif isinstance(chunk.get("x_groq"), dict) and chunk["x_groq"].get("usage"):
            self.usage = chunk["x_groq"]["usage"]  # Groq's own place for streamed usage
        choices = chunk.get("choices")
        if not choices or not isinstance(choices[0], dict):
            return None
        choice = choices[0]
        if choice.get("finish_reason"):
            self.complete = True
        delta = choice.get("delta") or {}
        for fragment in delta.get("tool_calls") or ():
            self._fragment(fragment)
        if thought := _reasoning_text(delta):
            self.thought.append(thought)
        piece = delta.get("content")
        if isinstance(piece, str) and piece:
            self.text.append(piece)
            return piece
        return None

    def _fragment(self, fragment: dict[str, Any]) -> None:
        index = fragment.get("index")
        call_id = fragment.get("id") or ""
        if not isinstance(index, int):  # some servers leave it out: a new id starts a new call
            last = max(self.calls, default=-1)
            index = last + 1 if last < 0 or (call_id and call_id != self.calls[last][0]) else last
        call = self.calls.setdefault(index, ["", "", []])
        if call_id and not call[0]:
            call[0] = call_id
        function = fragment.get("function") or {}
        name = function.get("name")
        if isinstance(name, str) and name and name != call[1]:
            call[1] += name  # a name split in pieces; servers that repeat it whole are not doubled
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            call[2].append(arguments)
        elif arguments is not None:
            call[2].append(json.dumps(arguments, ensure_ascii=False))

    def finish(self) -> Message:
        calls = tuple(
            ToolCall(cid or new_call_id(), name, "".join(parts) or "{}")
            for cid, name, parts in (self.calls[i] for i in sorted(self.calls))
        )
        reasoning = _reasoning("".join(self.thought))
        return Message("assistant", "".join(self.text), calls, reasoning=reasoning, usage=_usage(self.usage))


def _tool_call(data: Any) -> ToolCall:
    """A tool call from a reply, kept as the model wrote it (the loop reports mistakes)."""
    if not isinstance(data, dict):
        return ToolCall(new_call_id(), "", json.dumps(data, ensure_ascii=False))
    raw = data.get("function")
    function: dict[str, Any] = raw if isinstance(raw, dict) else {}
    name = function.get("name")
    arguments = function.get("arguments")
    if arguments is None:
        arguments = "{}"
    elif not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    call_id = data.get("id")
    return ToolCall(
        call_id if isinstance(call_id, str) and call_id else new_call_id(),
        name if isinstance(name, str) else "",
        arguments,
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _reasoning_text(message: dict[str, Any]) -> str:
    """Reasoning in a message or delta: DeepSeek and vLLM say ``reasoning_content``, others ``reasoning``."""
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _reasoning(text: str) -> tuple[Reasoning, ...]:
    return (Reasoning(text),) if text else ()


def _usage(data: Any) -> Usage:
    if not isinstance(data, dict):
        return Usage(requests=1)
    details = data.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}
    cached = _int(details.get("cached_tokens")) or _int(data.get("prompt_cache_hit_tokens"))  # DeepSeek's name
    written = _int(details.get("cache_write_tokens"))  # OpenRouter, for vendors that bill cache writes
    return Usage(_int(data.get("prompt_tokens")), _int(data.get("completion_tokens")), 1, cached, written)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _openai_tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    if isinstance(choice, dict) or choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}
