"""Events: every step of a run, as a typed, JSON-ready value.

The loop in :mod:`tether.agent` is an async generator of these events. The same
vocabulary serves streaming, logging, the run store, the CLI, the web inbox and
tests. Each event is a frozen dataclass with a ``kind`` tag; :func:`to_dict` and
:func:`from_dict` convert losslessly, and :func:`replay` folds committed events
back into the run's :class:`~tether.context.Context`.

``token`` events are streamed text, never persisted (:data:`PERSISTED` says which
kinds are).
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from .context import Context
from .messages import Message, ToolCall, Usage

ErrorKind = typing.Literal["unknown-tool", "bad-json", "invalid-arguments", "raised", "timeout", "denied", "skipped"]


@dataclass(frozen=True, slots=True)
class RunStarted:
    """A run began (or resumed); ``messages`` are the notes added at its start.

    ``fingerprint`` identifies the agent's tool definitions, so that resuming
    against changed tools fails loudly.
    """

    kind: ClassVar[str] = "run-started"
    run_id: str
    messages: tuple[Message, ...] = ()
    resumed: bool = False
    fingerprint: str = ""


@dataclass(frozen=True, slots=True)
class Token:
    """A piece of streamed model text (not persisted)."""

    kind: ClassVar[str] = "token"
    text: str


@dataclass(frozen=True, slots=True)
class ModelReplied:
    """The policy's reply was committed (before any of its tools run)."""

    kind: ClassVar[str] = "model-replied"
    message: Message


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """A tool call is about to run; committed before its first side effect."""

    kind: ClassVar[str] = "tool-started"
    call: ToolCall
    attempt: int = 1


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """A tool call has a result (``error`` names the kind of failure, if any)."""

    kind: ClassVar[str] = "tool-finished"
    result: Message
    error: ErrorKind | None = None

    @property
    def call_id(self) -> str:
        return self.result.tool_call_id or ""


@dataclass(frozen=True, slots=True)
class ApprovalRequested:
    """A call waits for a human; ``args_hash`` binds a decision to these exact arguments."""

    kind: ClassVar[str] = "approval-requested"
    call: ToolCall
    args_hash: str


@dataclass(frozen=True, slots=True)
class ApprovalDecided:
    """A human decision for one call, committed before it takes effect."""

    kind: ClassVar[str] = "approval-decided"
    decision: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Paused:
    """The run stopped to wait for people; ``state`` (a RunState dict) resumes it.

    ``reason`` is ``"approval"`` or ``"outcome-unknown"`` (a ``once`` tool was
    interrupted and a human must retry or skip it).
    """

    kind: ClassVar[str] = "paused"
    reason: str
    call_ids: tuple[str, ...]
    state: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Compacted:
    """The context was replaced by a shorter one (memory compaction)."""

    kind: ClassVar[str] = "compacted"
    messages: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class Finished:
    """The run ended with an answer."""

    kind: ClassVar[str] = "finished"
    output: str
    usage: Usage = Usage()


@dataclass(frozen=True, slots=True)
class Failed:
    """The run ended on an error it cannot fix itself; it can be resumed."""

    kind: ClassVar[str] = "failed"
    error: str
    error_type: str = ""


@dataclass(frozen=True, slots=True)
class Cancelled:
    """The run was cancelled; async tools were cancelled (a sync tool's thread cannot be
    stopped and may still finish: its call is then resolved on resume by its ``effect``).

    An interrupted run can be resumed; one cancelled with ``final=True`` cannot."""

    kind: ClassVar[str] = "cancelled"
    reason: str = ""
    final: bool = False  # a person ended the run for good: it cannot be resumed


@dataclass(frozen=True, slots=True)
class LimitReached:
    """A budget ran out (``limit`` is steps, tool_calls, tokens or seconds)."""

    kind: ClassVar[str] = "limit-reached"
    limit: str
    value: float


Event = (
    RunStarted
    | Token
    | ModelReplied
    | ToolStarted
    | ToolFinished
    | ApprovalRequested
    | ApprovalDecided
    | Paused
    | Compacted
    | Finished
    | Failed
    | Cancelled
    | LimitReached
)

EVENT_TYPES: dict[str, type[Any]] = {cls.kind: cls for cls in typing.get_args(Event)}
PERSISTED: frozenset[str] = frozenset(EVENT_TYPES) - {"token"}
TERMINAL: frozenset[str] = frozenset(("paused", "finished", "failed", "cancelled", "limit-reached"))


def to_dict(event: Event) -> dict[str, Any]:
    """A JSON-ready dict with the ``kind`` tag first."""
    data: dict[str, Any] = {"kind": event.kind}
    for f in fields(event):
        data[f.name] = _encode(getattr(event, f.name))
    return data


def from_dict(data: dict[str, Any]) -> Event:
    """The event a :func:`to_dict` dict describes; ``ValueError`` if malformed."""
    if not isinstance(data, dict):
        raise ValueError(f"an event must be a JSON object, got {type(data).__name__}")
    kind = data.get("kind")
    cls = EVENT_TYPES.get(kind)  # type: ignore[arg-type]
    if cls is None:
        raise ValueError(f"unknown event kind {kind!r}")
    kwargs = {}
    for name, decode in _decoders(cls).items():
        if name in data:
            kwargs[name] = decode(data[name])
    try:
        return typing.cast(Event, cls(**kwargs))
    except TypeError as exc:
        raise ValueError(f"malformed {kind!r} event: {exc}") from None


def _encode(value: Any) -> Any:
    if isinstance(value, Message | ToolCall | Usage):
        return value.to_dict()
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    return value


_DECODERS: dict[type[Any], dict[str, typing.Callable[[Any], Any]]] = {}


def _decoders(cls: type[Any]) -> dict[str, typing.Callable[[Any], Any]]:
    if cls in _DECODERS:
        return _DECODERS[cls]
    hints = typing.get_type_hints(cls)
    out: dict[str, typing.Callable[[Any], Any]] = {}
    for f in fields(cls):
        hint = hints[f.name]
        if hint is Message:
            out[f.name] = Message.from_dict
        elif hint is ToolCall:
            out[f.name] = ToolCall.from_dict
        elif hint is Usage:
            out[f.name] = Usage.from_dict
        elif hint == tuple[Message, ...]:
            out[f.name] = lambda v: tuple(Message.from_dict(m) for m in v)
        elif hint == tuple[str, ...]:
            out[f.name] = tuple
        else:
            out[f.name] = _identity
    _DECODERS[cls] = out
    return out


def _identity(value: Any) -> Any:
    return value


def replay(events: typing.Iterable[Event]) -> Context:
    """Rebuild a run's Context from its committed events.

    Tool results join the notebook in the order of the calls that asked for
    them, as the live loop writes them, whatever order the tools finished in.
    """
    from .state import Journal

    journal = Journal()
    for ev in events:
        journal.apply(ev)
    return journal.context
