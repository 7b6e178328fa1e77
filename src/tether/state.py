"""Run state: everything needed to resume a run, as plain JSON.

A run's committed events are its truth. :class:`Journal` folds them, one at a
time, into what the loop needs (the notebook, the calls still open, counters,
usage); the live loop folds the events it emits, and loading a run from a store
folds the same events again, so both paths agree by construction.

:class:`RunState` is a frozen snapshot of that fold: plain JSON with a
``schema_version``, never pickles and never object revival. A person's answer to
a paused call is a :class:`Decision`, bound to the call id and a hash of the
exact arguments they were shown; with a signing key, states and decisions carry
an HMAC and a tampered one is refused before anything runs.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, get_args

from .context import Context
from .events import (
    ApprovalDecided,
    ApprovalRequested,
    Cancelled,
    Compacted,
    Event,
    Failed,
    Finished,
    LimitReached,
    ModelReplied,
    Paused,
    RunStarted,
    ToolFinished,
    ToolStarted,
)
from .exceptions import StateError, StateIncompatible, StateTampered
from .messages import Message, ToolCall, Usage, check_keys

if TYPE_CHECKING:
    from .stores import RunStore

SCHEMA_VERSION = 1
Status = Literal["running", "paused", "needs-decision", "finished", "failed", "cancelled", "limit-reached"]
CallStatus = Literal["proposed", "awaiting-approval", "started"]
Verdict = Literal["approve", "deny", "retry", "skip"]


def canonical_json(value: Any) -> str:
    """Deterministic JSON: sorted keys, no spaces, UTF-8 kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def args_hash(arguments: str) -> str:
    """A hash of a call's arguments, insensitive to key order and spacing."""
    try:
        text = canonical_json(json.loads(arguments))
    except ValueError:
        text = arguments
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _mac(key: bytes, payload: Any) -> str:
    return hmac.new(key, canonical_json(payload).encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A call of the current turn that has no result yet."""

    call: ToolCall
    status: CallStatus = "proposed"
    attempts: int = 0

    @property
    def args_hash(self) -> str:
        return args_hash(self.call.arguments)


@dataclass(frozen=True, slots=True)
class Decision:
    """A human's answer to one paused call.

    ``approve`` (optionally with edited ``args``), ``deny`` (``message`` is what
    the model reads), and for a ``once`` call whose outcome is unknown after a
    crash, ``retry`` or ``skip``. ``args_hash`` is the hash of the arguments the
    human saw; ``state_seq`` the state version it was made for.
    """

    run_id: str
    call_id: str
    verdict: Verdict
    args_hash: str
    state_seq: int
    args: dict[str, Any] | None = None
    message: str = ""
    by: str = ""
    expires_at: float | None = None
    signature: str = ""

    def _payload(self) -> dict[str, Any]:
        data = self.to_dict()
        data.pop("signature")
        return data

    def sign(self, key: bytes) -> Decision:
        return replace(self, signature=_mac(key, self._payload()))

    def verify(self, key: bytes) -> None:
        if not self.signature or not hmac.compare_digest(self.signature, _mac(key, self._payload())):
            raise StateTampered(f"decision for call {self.call_id!r} has a bad or missing signature")
        if self.expires_at is not None and time.time() > self.expires_at:
            raise StateError(f"decision for call {self.call_id!r} has expired")

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "call_id": self.call_id,
            "verdict": self.verdict,
            "args_hash": self.args_hash,
            "state_seq": self.state_seq,
            "args": self.args,
            "message": self.message,
            "by": self.by,
            "expires_at": self.expires_at,
            "signature": self.signature,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Decision:
        try:
            check_keys(data, _DECISION_KEYS, "decision")
            if missing := _DECISION_KEYS - set(data):
                raise ValueError(f"missing field(s) {sorted(missing)}")
            if data["verdict"] not in get_args(Verdict):
                raise ValueError(f"unknown verdict {data['verdict']!r}")
            args = data.get("args")
            if args is not None and not isinstance(args, dict):
                raise ValueError("edited args must be an object")
            return cls(
                run_id=_typed(data, "run_id", str),
                call_id=_typed(data, "call_id", str),
                verdict=data["verdict"],
                args_hash=_typed(data, "args_hash", str),
                state_seq=_typed(data, "state_seq", int),
                args=args,
                message=_typed(data, "message", str, ""),
                by=_typed(data, "by", str, ""),
                expires_at=_expiry(data.get("expires_at")),
                signature=_typed(data, "signature", str, ""),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise StateError(f"malformed decision: {exc}") from None


class Journal:
    """Folds committed events into the state the loop runs on.

    Mutable and private to one run; :meth:`snapshot` gives the frozen
    :class:`RunState`.
    """

    def __init__(self) -> None:
        self.run_id = ""
        self.fingerprint = ""
        self.seq = 0
        self.steps = 0
        self.tool_calls = 0
        self.usage = Usage()
        self.status: Status = "running"
        self.closed = False  # cancelled for good by a person
        self.paused_at = 0  # seq of the latest pause: decisions must be at least this new
        self.pending: dict[str, PendingCall] = {}  # insertion order = call order
        self.decisions: dict[str, Decision] = {}  # recorded in the journal
        self.call_ids: set[str] = set()  # every call id of the run: ids are unique within a run
        self._ctx = Context()
        self._results: dict[str, Message] = {}
        self._order: list[str] = []  # call ids of this turn whose results are not written

    @classmethod
    def from_state(cls, state: RunState) -> Journal:
        """A journal that continues from a snapshot; its decisions are recorded by the loop."""
        j = cls()
        j.run_id, j.fingerprint, j.seq = state.run_id, state.fingerprint, state.seq
        j.steps, j.tool_calls, j.usage, j.status = state.steps, state.tool_calls, state.usage, state.status
        j.paused_at = state.paused_at
        j.pending = {p.call.id: p for p in state.pending}
        j.call_ids = {c.id for m in state.messages for c in m.tool_calls}
        j.decisions = {d.call_id: d for d in state.decisions}
        j._ctx = Context(state.messages)
        j._order = list(j.pending)
        return j

    @property
    def context(self) -> Context:
        """The notebook, with every result written so far in call order."""
        if self._results:
            order = [cid for cid in self._order if cid in self._results]
            self._ctx = self._ctx.add(*(self._results.pop(cid) for cid in order))
            self._order = [cid for cid in self._order if cid not in order]
        return self._ctx

    def apply(self, ev: Event) -> None:
        if ev.kind == "token":
            return
        self.seq += 1
        if isinstance(ev, RunStarted):
            self.run_id = ev.run_id
            self.fingerprint = ev.fingerprint or self.fingerprint
            self._ctx = self.context.add(*ev.messages)
            self.status = "running"
        elif isinstance(ev, ModelReplied):
            self._ctx = self.context.add(ev.message)
            self._order = [c.id for c in ev.message.tool_calls]
            self.pending = {c.id: PendingCall(c) for c in ev.message.tool_calls}
            self.call_ids.update(self.pending)
            self.decisions = {}
            self.steps += 1
            if ev.message.usage is not None:
                self.usage = self.usage + ev.message.usage
        elif isinstance(ev, ToolStarted):
            p = self.pending.get(ev.call.id)
            if p is not None:  # the started call carries the arguments it really ran with
                self.pending[ev.call.id] = replace(p, call=ev.call, status="started", attempts=ev.attempt)
            # A decision is spent once its call starts: a retry allows one attempt, and an
            # approval was for the arguments shown, which the started call now records.
            self.decisions.pop(ev.call.id, None)
            if ev.attempt == 1:
                self.tool_calls += 1
        elif isinstance(ev, ToolFinished):
            self.pending.pop(ev.call_id, None)
            self.decisions.pop(ev.call_id, None)
            self._results[ev.call_id] = ev.result
        elif isinstance(ev, ApprovalRequested):
            p = self.pending.get(ev.call.id)
            if p is not None and p.status == "proposed":
                self.pending[ev.call.id] = replace(p, status="awaiting-approval")
        elif isinstance(ev, ApprovalDecided):
            d = Decision.from_dict(ev.decision)
            self.decisions[d.call_id] = d
        elif isinstance(ev, Compacted):
            self._ctx = Context(ev.messages)
            self._results.clear()
        elif isinstance(ev, Paused):
            self.paused_at = self.seq
            self.status = "needs-decision" if ev.reason == "outcome-unknown" else "paused"
        elif isinstance(ev, Finished):
            self.status = "finished"
        elif isinstance(ev, Failed):
            self.status = "failed"
        elif isinstance(ev, Cancelled):
            self.status = "cancelled"
            self.closed = ev.final
        elif isinstance(ev, LimitReached):
            self.status = "limit-reached"

    def snapshot(self, pausing: Status | None = None) -> RunState:
        """The state now; ``pausing`` gives the state a ``paused`` event about to be committed carries."""
        seq = self.seq + 1 if pausing else self.seq
        return RunState(
            run_id=self.run_id,
            messages=self.context.messages,
            pending=tuple(self.pending.values()),
            decisions=tuple(self.decisions.values()),
            steps=self.steps,
            tool_calls=self.tool_calls,
            usage=self.usage,
            fingerprint=self.fingerprint,
            seq=seq,
            status=pausing or self.status,
            paused_at=seq if pausing else self.paused_at,
        )


@dataclass(frozen=True, slots=True)
class RunState:
    """A resumable snapshot of a run, as plain JSON.

    >>> state = result.state                      # doctest: +SKIP
    >>> state = state.approve("call_2_0")          # doctest: +SKIP
    >>> await agent.run(state)                     # doctest: +SKIP
    """

    run_id: str
    messages: tuple[Message, ...]
    pending: tuple[PendingCall, ...] = ()
    decisions: tuple[Decision, ...] = ()
    steps: int = 0
    tool_calls: int = 0
    usage: Usage = Usage()
    fingerprint: str = ""
    seq: int = 0
    status: Status = "paused"
    paused_at: int = 0
    signature: str = ""
    schema_version: int = SCHEMA_VERSION

    @property
    def context(self) -> Context:
        return Context(self.messages)

    def pending_call(self, call_id: str) -> PendingCall:
        for p in self.pending:
            if p.call.id == call_id:
                return p
        open_ids = [p.call.id for p in self.pending]
        raise StateError(f"call {call_id!r} is not waiting in run {self.run_id!r}; open calls: {open_ids}")

    # -- decisions ---------------------------------------------------------

    def approve(
        self,
        call_id: str,
        args: dict[str, Any] | None = None,
        *,
        by: str = "",
        key: bytes | None = None,
        ttl: float | None = None,
    ) -> RunState:
        """Approve a call, optionally with edited arguments (validated again on resume)."""
        return self._decide(call_id, "approve", args=args, by=by, key=key, ttl=ttl)

    def deny(
        self,
        call_id: str,
        message: str = "",
        *,
        by: str = "",
        key: bytes | None = None,
        ttl: float | None = None,
    ) -> RunState:
        """Deny a call; ``message`` becomes the call's result, for the model to read."""
        return self._decide(call_id, "deny", message=message, by=by, key=key, ttl=ttl)

    def retry(self, call_id: str, *, by: str = "", key: bytes | None = None) -> RunState:
        """Run again a ``once`` call whose outcome is unknown after a crash."""
        return self._decide(call_id, "retry", by=by, key=key)

    def skip(self, call_id: str, message: str = "", *, by: str = "", key: bytes | None = None) -> RunState:
        """Do not run again a call whose outcome is unknown; ``message`` goes to the model."""
        return self._decide(call_id, "skip", message=message, by=by, key=key)

    def _decide(
        self,
        call_id: str,
        verdict: Verdict,
        *,
        args: dict[str, Any] | None = None,
        message: str = "",
        by: str = "",
        key: bytes | None = None,
        ttl: float | None = None,
    ) -> RunState:
        p = self.pending_call(call_id)
        wanted = ("retry", "skip") if p.status == "started" else ("approve", "deny")
        if verdict not in wanted:
            raise StateError(f"call {call_id!r} is {p.status!r}: decide it with {' or '.join(wanted)}, not {verdict!r}")
        d = Decision(
            run_id=self.run_id,
            call_id=call_id,
            verdict=verdict,
            args_hash=p.args_hash,
            state_seq=self.seq,
            args=args,
            message=message,
            by=by,
            expires_at=time.time() + ttl if ttl is not None else None,
        )
        if key is not None:
            d = d.sign(key)
        kept = tuple(x for x in self.decisions if x.call_id != call_id)
        return replace(self, decisions=(*kept, d))

    def decision(self, call_id: str) -> Decision | None:
        for d in self.decisions:
            if d.call_id == call_id:
                return d
        return None

    # -- integrity ---------------------------------------------------------

    def _body(self) -> dict[str, Any]:
        data = self.to_dict()
        data.pop("signature")
        data.pop("decisions")  # decisions carry their own signatures
        return data

    def sign(self, key: bytes) -> RunState:
        return replace(self, signature=_mac(key, self._body()))

    def verify(self, key: bytes) -> None:
        """Raise :class:`StateTampered` unless the state and its decisions are signed by ``key``."""
        if not self.signature or not hmac.compare_digest(self.signature, _mac(key, self._body())):
            raise StateTampered(f"run state {self.run_id!r} has a bad or missing signature")
        for d in self.decisions:
            d.verify(key)

    def check_decisions(self) -> None:
        """Each decision must name an open call of this run, once, by its exact arguments."""
        ids = [d.call_id for d in self.decisions]
        if len(set(ids)) != len(ids):
            raise StateTampered(f"run state {self.run_id!r} holds two decisions for one call")
        for d in self.decisions:
            p = self.pending_call(d.call_id)
            if d.run_id != self.run_id:
                raise StateTampered(f"decision for call {d.call_id!r} belongs to run {d.run_id!r}")
            if not hmac.compare_digest(d.args_hash, p.args_hash):
                raise StateTampered(f"decision for call {d.call_id!r} was made for other arguments than the call has")
            if d.state_seq > self.seq:
                raise StateTampered(f"decision for call {d.call_id!r} names a future state version")
            wanted = ("retry", "skip") if p.status == "started" else ("approve", "deny")
            if d.verdict not in wanted:
                raise StateTampered(
                    f"decision for call {d.call_id!r} says {d.verdict!r}, which does not fit a {p.status!r} call"
                )
            if d.expires_at is not None and time.time() > d.expires_at:
                raise StateError(f"decision for call {d.call_id!r} has expired")
            if d.state_seq < self.paused_at:
                raise StateError(
                    f"decision for call {d.call_id!r} was made for an older state "
                    f"(version {d.state_seq}; the run paused at {self.paused_at})"
                )

    # -- JSON --------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "run_id": self.run_id,
            "status": self.status,
            "seq": self.seq,
            "paused_at": self.paused_at,
            "fingerprint": self.fingerprint,
            "steps": self.steps,
            "tool_calls": self.tool_calls,
            "usage": self.usage.to_dict(),
            "messages": [m.to_dict() for m in self.messages],
            "pending": [{"call": p.call.to_dict(), "status": p.status, "attempts": p.attempts} for p in self.pending],
            "decisions": [d.to_dict() for d in self.decisions],
            "signature": self.signature,
        }

    def to_json(self) -> str:
        return canonical_json(self.to_dict())

    @classmethod
    def from_json(cls, text: str | bytes) -> RunState:
        """Parse a state; anything malformed, truncated or unknown raises StateError."""
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise StateError(f"run state is not valid JSON: {exc}") from None
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Any) -> RunState:
        if not isinstance(data, dict):
            raise StateError("run state must be a JSON object")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise StateIncompatible(
                f"run state schema_version {version!r} is not supported (this tether reads {SCHEMA_VERSION})"
            )
        try:
            check_keys(data, _STATE_KEYS, "run state")
            pending = []
            for p in _typed(data, "pending", list):
                check_keys(p, _PENDING_KEYS, "pending call")
                status = p["status"]
                if status not in get_args(CallStatus):
                    raise ValueError(f"unknown call status {status!r}")
                pending.append(PendingCall(ToolCall.from_dict(p["call"]), status, _typed(p, "attempts", int)))
            status = data["status"]
            if status not in get_args(Status):
                raise ValueError(f"unknown status {status!r}")
            return cls(
                run_id=_typed(data, "run_id", str),
                messages=tuple(Message.from_dict(m) for m in _typed(data, "messages", list)),
                pending=tuple(pending),
                decisions=tuple(Decision.from_dict(d) for d in _typed(data, "decisions", list)),
                steps=_typed(data, "steps", int),
                tool_calls=_typed(data, "tool_calls", int),
                usage=Usage.from_dict(_typed(data, "usage", dict)),
                fingerprint=_typed(data, "fingerprint", str),
                seq=_typed(data, "seq", int),
                paused_at=_typed(data, "paused_at", int),
                status=status,
                signature=_typed(data, "signature", str),
            )
        except StateError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StateError(f"malformed run state: {exc!s}") from None

    @classmethod
    def from_events(cls, events: list[Event]) -> RunState:
        """The state a run's committed events describe."""
        journal = Journal()
        for ev in events:
            journal.apply(ev)
        return journal.snapshot()


_DECISION_KEYS = frozenset(
    ("run_id", "call_id", "verdict", "args_hash", "state_seq", "args", "message", "by", "expires_at", "signature")
)
_PENDING_KEYS = frozenset(("call", "status", "attempts"))
_STATE_KEYS = frozenset(
    (
        "schema_version",
        "run_id",
        "status",
        "seq",
        "paused_at",
        "fingerprint",
        "steps",
        "tool_calls",
        "usage",
        "messages",
        "pending",
        "decisions",
        "signature",
    )
)


async def record_decisions(store: RunStore, run_id: str, decide: Callable[[RunState], RunState]) -> RunState:
    """Decide on a stored run without running it: the approval inbox's one operation.

    Rebuilds the run's state from its journal, applies ``decide`` (for example
    ``lambda s: s.approve(call_id, key=key)``), and appends one ``approval-decided``
    event per new decision at the state's position, so a decision made while
    another process advanced the run is refused (``LeaseConflict``) instead of
    landing on a state nobody saw. Resume the run by id to act on it.
    """
    events = await store.load(run_id)
    if not events:
        raise StateError(f"no run {run_id!r} in the store")
    state = RunState.from_events(events)
    decided = decide(state)
    new = [ApprovalDecided(d.to_dict()) for d in decided.decisions if state.decision(d.call_id) != d]
    await store.append(run_id, new, expected_seq=state.seq)
    return decided


def _expiry(value: Any) -> float | None:
    if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
        return value
    raise TypeError(f"field 'expires_at' must be a number or null, got {type(value).__name__}")


def _typed(data: dict[str, Any], key: str, kind: type, default: Any = ...) -> Any:
    if key not in data:
        if default is ...:
            raise KeyError(f"missing field {key!r}")
        return default
    value = data[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"field {key!r} must be {kind.__name__}, got {type(value).__name__}")
    return value
