"""Messages: the notes an agent writes in its notebook.

A :class:`Message` is one frozen note (`system`, `user`, `assistant` or `tool`).
An assistant message may carry :class:`ToolCall` requests and the model's
:class:`Reasoning` (sent back to the model where its vendor wants it); a tool
message answers exactly one call through ``tool_call_id``. Messages are plain values: they
compare by content, round-trip through JSON exactly (:meth:`Message.to_dict` /
:meth:`Message.from_dict`) and convert to the OpenAI chat-completions wire shape.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from ._schema.strictjson import check_keys
from .parts import MAX_PARTS, Part, check_parts, content_of, describe, part_from_dict, safe_text

__all__ = ["Message", "ROLES", "Reasoning", "Role", "ToolCall", "Usage", "check_keys", "new_call_id"]

Role = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset(("system", "user", "assistant", "tool"))


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens spent by model requests.

    ``input_tokens`` counts every prompt token; ``cache_read_tokens`` and
    ``cache_write_tokens`` say how many of them the provider read from, or
    wrote to, its prompt cache (zero when it does not say).

    >>> Usage(input_tokens=10, output_tokens=2) + Usage(input_tokens=5, requests=1)
    Usage(input_tokens=15, output_tokens=2, requests=1)
    >>> Usage(100, 5, 1, cache_read_tokens=80).to_dict()
    {'input_tokens': 100, 'output_tokens': 5, 'requests': 1, 'cache_read_tokens': 80}
    """

    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.requests + other.requests,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v}" for k, v in self.to_dict().items())
        return f"Usage({fields})"

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, int]:
        """The counts as JSON; the cache counts only when non-zero (older readers know the rest)."""
        data = {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "requests": self.requests}
        if self.cache_read_tokens:
            data["cache_read_tokens"] = self.cache_read_tokens
        if self.cache_write_tokens:
            data["cache_write_tokens"] = self.cache_write_tokens
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Usage:
        check_keys(data, _USAGE_KEYS, "usage")
        values = [data.get(k) for k in ("input_tokens", "output_tokens", "requests")]
        values += [data.get(k, 0) for k in ("cache_read_tokens", "cache_write_tokens")]
        counts = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
        if len(counts) != len(values):
            raise ValueError(f"usage needs integer counts, got {data!r}")
        return cls(*counts)


@dataclass(frozen=True, slots=True)
class Reasoning:
    """What the model thought before it answered, kept so that it can be sent back.

    ``text`` is readable reasoning (or the vendor's summary of it);
    ``signature`` is the vendor's seal on that text (Anthropic's thinking
    blocks carry one, and must come back unchanged); ``redacted`` is reasoning
    the vendor returns only as opaque data (Anthropic's ``redacted_thinking``).

    >>> Reasoning("2 + 3 is 5.", signature="c2ln").to_dict()
    {'text': '2 + 3 is 5.', 'signature': 'c2ln'}
    """

    text: str = ""
    signature: str = ""
    redacted: str = ""

    def to_dict(self) -> dict[str, str]:
        return {k: v for k, v in (("text", self.text), ("signature", self.signature), ("redacted", self.redacted)) if v}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Reasoning:
        check_keys(data, _REASONING_KEYS, "reasoning")
        return cls(_str(data, "text", ""), _str(data, "signature", ""), _str(data, "redacted", ""))


def new_call_id() -> str:
    """A fresh, unique tool-call id (``call_`` + 24 hex digits)."""
    return "call_" + uuid.uuid4().hex[:24]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A request from the model to run one tool.

    ``arguments`` is the raw JSON text the model wrote, kept verbatim: it may be
    malformed, and the loop turns that into a note the model can read.

    >>> call = ToolCall.of("add", {"a": 1, "b": 2}, id="c1")
    >>> call.arguments
    '{"a": 1, "b": 2}'
    """

    id: str
    name: str
    arguments: str = "{}"

    def __post_init__(self) -> None:
        for name in ("id", "name", "arguments"):  # from the model: made safe once, here (see parts.safe_text)
            value = getattr(self, name)
            if isinstance(value, str) and not value.isascii():
                object.__setattr__(self, name, safe_text(value))

    @classmethod
    def of(cls, name: str, args: dict[str, Any] | None = None, *, id: str | None = None) -> ToolCall:
        """Build a call from a Python dict of arguments."""
        return cls(id or new_call_id(), name, json.dumps(args or {}, ensure_ascii=False))

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        check_keys(data, _CALL_KEYS, "tool call")
        return cls(_str(data, "id"), _str(data, "name"), _str(data, "arguments"))


@dataclass(frozen=True, slots=True)
class Message:
    """One note in the notebook.

    ``content`` is a string, or a tuple of :mod:`~tether.parts` (text, images,
    files) for a note that holds more than text.

    >>> Message.user("Where is my order?").role
    'user'
    >>> from tether.parts import Image
    >>> Message.user("look at this", Image(url="https://example.com/a.png")).text
    'look at this\\n[image ?, https://example.com/a.png]'
    >>> Message.tool_result("c1", "shipped", name="look_up").tool_call_id
    'c1'
    """

    role: Role
    content: str | tuple[Part, ...] = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    reasoning: tuple[Reasoning, ...] = ()
    # Usage and the model's name are bookkeeping about how the note was made, not part of the note.
    usage: Usage | None = field(default=None, compare=False)
    model: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if type(self.content) is not str:
            object.__setattr__(self, "content", check_parts(self.content))
        elif not self.content.isascii():  # a lone surrogate from a model or a tool stops here (parts.safe_text)
            object.__setattr__(self, "content", safe_text(self.content))
        if self.name is not None and not self.name.isascii():
            object.__setattr__(self, "name", safe_text(self.name))
        if self.role not in ROLES:
            raise ValueError(f"unknown message role {self.role!r}")
        if self.tool_calls and self.role != "assistant":
            raise ValueError(f"only assistant messages carry tool calls, not {self.role!r}")
        if self.reasoning and self.role != "assistant":
            raise ValueError(f"only assistant messages carry reasoning, not {self.role!r}")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs the tool_call_id it answers")

    @property
    def text(self) -> str:
        """The content as text (an image or a file as a short placeholder)."""
        return self.content if isinstance(self.content, str) else describe(self.content)

    @property
    def parts(self) -> tuple[Part, ...]:
        """The non-text parts of the content (images and files), in order."""
        if isinstance(self.content, str):
            return ()
        return tuple(p for p in self.content if p.type != "text")

    @classmethod
    def system(cls, content: str) -> Message:
        return cls("system", content)

    @classmethod
    def user(cls, *content: str | Part) -> Message:
        """A user note: one string, or strings and parts (``Message.user("look", Image.from_path(p))``)."""
        return cls("user", content_of(content) if content else "")

    @classmethod
    def assistant(
        cls,
        content: str = "",
        tool_calls: tuple[ToolCall, ...] | list[ToolCall] = (),
        *,
        reasoning: tuple[Reasoning, ...] | list[Reasoning] = (),
    ) -> Message:
        return cls("assistant", content, tuple(tool_calls), reasoning=tuple(reasoning))

    @classmethod
    def tool_result(
        cls, tool_call_id: str, content: str | tuple[Part, ...], *, name: str | None = None, is_error: bool = False
    ) -> Message:
        return cls("tool", content, tool_call_id=tool_call_id, name=name, is_error=is_error)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict that :meth:`from_dict` turns back into an equal message."""
        content = self.content
        data: dict[str, Any] = {"role": self.role, "content": content if isinstance(content, str) else _dicts(content)}
        if self.tool_calls:
            data["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            data["name"] = self.name
        if self.is_error:
            data["is_error"] = True
        if self.reasoning:
            data["reasoning"] = [r.to_dict() for r in self.reasoning]
        if self.usage is not None:
            data["usage"] = self.usage.to_dict()
        if self.model is not None:
            data["model"] = self.model
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        if not isinstance(data, dict):
            raise ValueError(f"a message must be a JSON object, got {type(data).__name__}")
        check_keys(data, _MESSAGE_KEYS, "message")
        calls = data.get("tool_calls") or []
        reasoning = data.get("reasoning") or []
        if not isinstance(calls, list) or not isinstance(reasoning, list):
            raise ValueError("'tool_calls' and 'reasoning' must be lists")
        usage = data.get("usage")
        return cls(
            role=_str(data, "role"),  # type: ignore[arg-type]  # checked in __post_init__
            content=_content(data.get("content")),
            tool_calls=tuple(ToolCall.from_dict(c) for c in calls),
            tool_call_id=_opt_str(data, "tool_call_id"),
            name=_opt_str(data, "name"),
            is_error=bool(data.get("is_error", False)),
            reasoning=tuple(Reasoning.from_dict(r) for r in reasoning),
            usage=Usage.from_dict(usage) if isinstance(usage, dict) else None,
            model=_opt_str(data, "model"),
        )


_USAGE_KEYS = frozenset(f.name for f in fields(Usage))
_REASONING_KEYS = frozenset(f.name for f in fields(Reasoning))
_CALL_KEYS = frozenset(f.name for f in fields(ToolCall))
_MESSAGE_KEYS = frozenset(f.name for f in fields(Message))


def _str(data: dict[str, Any], key: str, default: str | None = None) -> str:
    value = data.get(key, default)
    if not isinstance(value, str):
        raise ValueError(f"field {key!r} must be a string, got {type(value).__name__}")
    return value


def _content(value: Any) -> str | tuple[Part, ...]:
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise ValueError(f"field 'content' must be a string or a list of parts, got {type(value).__name__}")
    if len(value) > MAX_PARTS:  # before parsing any: a huge list of tiny parts costs no time
        raise ValueError(f"a note holds at most {MAX_PARTS:,} parts, got {len(value):,}")
    return tuple(part_from_dict(p) for p in value)


def _dicts(parts: tuple[Part, ...]) -> list[dict[str, Any]]:
    return [p.to_dict() for p in parts]


def _opt_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"field {key!r} must be a string or null, got {type(value).__name__}")
    return value
