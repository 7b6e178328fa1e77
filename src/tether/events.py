"""Events: every step of a run, as a typed, JSON-ready value.

The loop (:mod:`tether._loop.run`) is an async generator of these events. The same
vocabulary serves streaming, logging, the run store, the CLI and tests. Each
event is a frozen dataclass with a ``kind`` tag; :func:`to_dict` and
:func:`from_dict` convert losslessly. Payloads are typed: a decision is a
:class:`~tether.state.Decision`, a paused state a :class:`~tether.state.RunState`,
so a stored event that the loop would refuse is refused when it is read.

``token`` events (streamed text) and ``child`` events (a child run's events,
shown in its parent's stream) are never persisted in the run that yields them
(:data:`PERSISTED` says which kinds are). Every committed event carries ``at``, the time it was committed
(epoch seconds; ``0.0`` on an event that was never committed); it is not part
of an event's equality. Folding committed events into a run's state is :mod:`tether.journal`.

>>> to_dict(Finished("done"))["kind"]
'finished'
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal

from .exceptions import StateError
from .messages import Message, ToolCall, Usage
from .state import Decision, RunState

__all__ = [
    "PERSISTED",
    "RESERVED_LABELS",
    "TERMINAL",
    "ApprovalDecided",
    "ApprovalRequested",
    "Cancelled",
    "ChildEvent",
    "ChildStopped",
    "Compacted",
    "ErrorKind",
    "Event",
    "Failed",
    "Finished",
    "HandedOff",
    "Kind",
    "LimitReached",
    "ModelReplied",
    "Noted",
    "PauseReason",
    "Paused",
    "QuestionAsked",
    "RunStarted",
    "Token",
    "ToolFinished",
    "ToolStarted",
    "from_dict",
    "to_dict",
]

Kind = Literal[
    "run-started",
    "token",
    "model-replied",
    "tool-started",
    "tool-finished",
    "approval-requested",
    "question-asked",
    "approval-decided",
    "child-stopped",
    "child",
    "handed-off",
    "paused",
    "compacted",
    "noted",
    "finished",
    "failed",
    "cancelled",
    "limit-reached",
]
ErrorKind = Literal[
    "unknown-tool", "bad-json", "invalid-arguments", "raised", "timeout", "denied", "skipped", "stopped"
]
PauseReason = Literal["approval", "outcome-unknown", "question"]


RESERVED_LABELS = frozenset(("session", "continues"))
"""The labels (``RunStarted.meta``) only tether sets: which session a run belongs to and which of its runs it
continues. Every face refuses them from a caller: a run given them would be spliced into that session."""


@dataclass(frozen=True, slots=True)
class RunStarted:
    """A run began (or resumed); ``messages`` are the notes added at its start.

    ``fingerprint`` identifies the agent's tool definitions, so that resuming
    against changed tools fails loudly; ``agent`` is the name of the agent that
    drives the run from here (a worker looks it up to resume the run), and
    ``meta`` holds labels the caller gave the run (never secrets). ``model`` is
    the model name of the brain that drives the run from here, when it has one
    (it prices the replies: :mod:`tether.cost`; it names the spans: :mod:`tether.telemetry`).
    """

    kind: ClassVar[Literal["run-started"]] = "run-started"
    run_id: str
    messages: tuple[Message, ...] = ()
    resumed: bool = False
    fingerprint: str = ""
    agent: str = ""
    meta: dict[str, str] = field(default_factory=dict)
    model: str = ""
    at: float = field(default=0.0, compare=False)  # when it was committed (epoch seconds)


@dataclass(frozen=True, slots=True)
class Token:
    """A piece of streamed model text (not persisted)."""

    kind: ClassVar[Literal["token"]] = "token"
    text: str
    at: float = field(default=0.0, compare=False)  # when it was committed (epoch seconds)


@dataclass(frozen=True, slots=True)
class ModelReplied:
    """The policy's reply was committed (before any of its tools run)."""

    kind: ClassVar[Literal["model-replied"]] = "model-replied"
    message: Message
    at: float = field(default=0.0, compare=False)  # when it was committed (epoch seconds)


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """A tool call is about to run; committed before its first side effect.

    ``by`` is the worker that runs it (its lease owner, ``host:machine:pid:nonce``;
    empty without a store): if the call never reports back, a person deciding on
    it learns which worker may still be inside it.
    """

    kind: ClassVar[Literal["tool-started"]] = "tool-started"
    call: ToolCall
    attempt: int = 1
    at: float = field(default=0.0, compare=False)  # when it was committed (epoch seconds)
    by: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """A tool call has a result (``error`` names the kind of failure, if any)."""

    kind: ClassVar[Literal["tool-finished"]] = "tool-finished"
    result: Message
    error: ErrorKind | None = None
    at: float = field(default=0.0, compare=False)  # when it was committed (epoch seconds)

    @property
    def call_id(self) -> str:
        return self.result.tool_call_id or ""


@dataclass(frozen=True, slots=True)
class ApprovalRequested:
    """A call waits for a human; ``args_hash`` binds a decision to these exact arguments.

    ``note`` says why, when it is not the plain case (e.g. the approval gate raised).
    """

    kind: ClassVar[Literal["approval-requested"]] = "approval-requested"
    call: ToolCall
    args_hash: str
    note: str = ""
    at: float = field(default=0.0, compare=False)  # when it was committed (epoch seconds)


@dataclass(frozen=True, slots=True)
class QuestionAsked:
    """A question tool waits for a person's answer; ``args_hash`` binds the answer to this question."""

    kind: ClassVar[Literal["question-asked"]] = "question-asked"
    call: ToolCall
    args_hash: str
    question: str
    at: float = field(default=0.0, compare=False)  # when it was committed (epoch seconds)


@dataclass(frozen=True, slots=True)
class ApprovalDecided:
    """A human decision for one call (an approval, a denial, a retry, a skip, an answer), committed
    before it takes effect."""

    kind: ClassVar[Literal["approval-decided"]] = "approval-decided"
    decision: Decision
    at: float = field(default=0.0, compare=False)  # when it was committed (epoch seconds)


@dataclass(frozen=True, slots=True)
class ChildStopped:
    """The child run of a delegating call stopped before it finished (it waits for a person, or
    was interrupted); ``state`` is the child's state, so the tree resumes without a store too."""

    kind: ClassVar[Literal["child-stopped"]] = "child-stopped"
    call_id: str
    state: RunState
    at: float = field(default=0.0, compare=False)  # when it was committed (epoch seconds)


@dataclass(frozen=True, slots=True)
class ChildEvent:
    """An event of a child run, shown in its parent's stream (not persisted there: the child's
    own journal keeps it). ``call_id`` is the parent's delegating call, ``agent`` the child's name."""

    kind: ClassVar[Literal["child"]] = "child"
    call_id: str
    agent: str
    event: Event
    at: float = field(default=0.0, compare=False)  # when it was committed (epoch seconds)

    @property
    def path(self) -> tuple[str, ...]:
        """The delegating call ids down to the innermost event."""
        inner = self.event
        return (self.call_id, *inner.path) if isinstance(inner, ChildEvent) else (self.call_id,)


@dataclass(frozen=True, slots=True)
class HandedOff:
    """The agent named ``agent`` drives the run from here (a ``transfer_to_...`` call);
    ``messages`` are the notes added for it (its instructions)."""

    kind: ClassVar[Literal["handed-off"]] = "handed-off"
    agent: str
    messages: tuple[Message, ...] = ()
    model: str = ""  # the model name of its brain, when it has one (as in run-started)
    at: float = field(default=0.0, compare=False)  # when it was committed (epoch seconds)


@dataclass(frozen=True, slots=True)
class Paused:
    """The run stopped to wait for people; ``state`` resumes it.

    ``reason`` is ``"approval"``, ``"question"`` (a question tool waits for an
    answer) or ``"outcome-unknown"`` (a ``once`` tool was interrupted and a
    human must retry or skip it); the state's pending calls say which item is
    which.
    """

    kind: ClassVar[Literal["paused"]] = "paused"
    reason: PauseReason
    call_ids: tuple[str, ...]
    state: RunState
    at: float = field(default=0.0, compare=False)  # when it was committed (epoch seconds)


@dataclass(frozen=True, slots=True)
class Compacted:
    """The context was replaced by a shorter one (memory compaction)."""

    kind: ClassVar[Literal["compacted"]] = "compacted"
    messages: tuple[Message, ...]
    at: float = field(default=0.0, compare=False)  # when it was committed (epoch seconds)


@dataclass(frozen=True, slots=True)
class Noted:
    """The loop wrote a note for the model that answers no call (``message``, a user-role note
    with ``is_error``): a text reply refused because the agent's output type wants its tool."""

    kind: ClassVar[Literal["noted"]] = "noted"
    message: Message
    at: float = field(default=0.0, compare=False)  # when it was committed (epoch seconds)


@dataclass(frozen=True, slots=True)
class Finished:
    """The run ended with an answer."""

    kind: ClassVar[Literal["finished"]] = "finished"
    output: str
    usage: Usage = Usage()
    at: float = field(default=0.0, compare=False)  # when it was committed (epoch seconds)


@dataclass(frozen=True, slots=True)
class Failed:
    """The run ended on an error it cannot fix itself; it can be resumed."""

    kind: ClassVar[Literal["failed"]] = "failed"
    error: str
    error_type: str = ""
    at: float = field(default=0.0, compare=False)  # when it was committed (epoch seconds)


@dataclass(frozen=True, slots=True)
class Cancelled:
    """The run was cancelled; async tools were cancelled (a sync tool's thread cannot be
    stopped and may still finish: its call is then resolved on resume by its ``effect``).

    An interrupted run can be resumed; one cancelled with ``final=True`` cannot."""

    kind: ClassVar[Literal["cancelled"]] = "cancelled"
    reason: str = ""
    final: bool = False  # a person ended the run for good: it cannot be resumed
    at: float = field(default=0.0, compare=False)  # when it was committed (epoch seconds)


@dataclass(frozen=True, slots=True)
class LimitReached:
    """A budget ran out (``limit`` is steps, tool_calls, tokens, cost or seconds)."""

    kind: ClassVar[Literal["limit-reached"]] = "limit-reached"
    limit: str
    value: float
    at: float = field(default=0.0, compare=False)  # when it was committed (epoch seconds)


Event = (
    RunStarted
    | Token
    | ModelReplied
    | ToolStarted
    | ToolFinished
    | ApprovalRequested
    | QuestionAsked
    | ApprovalDecided
    | ChildStopped
    | ChildEvent
    | HandedOff
    | Paused
    | Compacted
    | Noted
    | Finished
    | Failed
    | Cancelled
    | LimitReached
)

EVENT_TYPES: dict[str, type[Event]] = {cls.kind: cls for cls in typing.get_args(Event)}
_EVENT_CLASSES = frozenset(EVENT_TYPES.values())
PERSISTED: frozenset[str] = frozenset(EVENT_TYPES) - {"token", "child"}
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
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"unknown event kind {kind!r}")
    try:
        kwargs = {name: decode(data[name]) for name, decode in _decoders(cls).items() if name in data}
        return cls(**kwargs)
    except (TypeError, StateError) as exc:
        raise ValueError(f"malformed {kind!r} event: {exc}") from None


def _encode(value: Any) -> Any:
    if type(value) in _EVENT_CLASSES:  # a child run's event, inside a ChildEvent
        return to_dict(value)
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    if hasattr(value, "to_dict"):  # Message, ToolCall, Usage, Decision, RunState
        return value.to_dict()
    return value


_VALUE_TYPES: dict[Any, Callable[[Any], Any]] = {
    Message: Message.from_dict,
    ToolCall: ToolCall.from_dict,
    Usage: Usage.from_dict,
    Decision: Decision.from_dict,
    RunState: RunState.from_dict,
    tuple[Message, ...]: lambda v: tuple(Message.from_dict(m) for m in v),
    tuple[str, ...]: tuple,
}
_VALUE_TYPES[Event] = lambda v: from_dict(v)  # a child run's event, inside a ChildEvent
_DECODERS: dict[type[Any], dict[str, Callable[[Any], Any]]] = {}


def _decoders(cls: type[Any]) -> dict[str, Callable[[Any], Any]]:
    if cls not in _DECODERS:
        hints = typing.get_type_hints(cls)
        _DECODERS[cls] = {f.name: _VALUE_TYPES.get(hints[f.name], _identity) for f in fields(cls)}
    return _DECODERS[cls]


def _identity(value: Any) -> Any:
    return value
