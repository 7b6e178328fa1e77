"""Run state: everything needed to resume a run, as plain JSON.

:class:`RunState` is a frozen snapshot of a run (the notebook, the calls still
open, counters, usage): plain JSON with a ``schema_version``, never pickles and
never object revival. A person's answer to a paused call is a :class:`Decision`,
bound to the call id and a hash of the exact arguments they were shown; with a
signing key, states and decisions carry an HMAC and a tampered one is refused
before anything runs.

This module holds values only. How committed events fold into a state is
:mod:`tether.journal`; how a store records decisions is :mod:`tether.store`.
"""

from __future__ import annotations

import hmac
import time
import warnings
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from ._schema.strictjson import (
    args_hash,
    canonical_json,
    literal,
    mac,
    strict_json,
    strict_loads,
    typed,
    utf8_size,
)
from .exceptions import StateError, StateIncompatible, StateTampered
from .messages import Message, Usage, check_keys
from .pending import CallStatus, Choice, Decision, PendingCall, Verdict, item_id, item_path, verdicts_for

__all__ = [
    "MAX_DEPTH",
    "MAX_STATE_BYTES",
    "SCHEMA_VERSION",
    "CallStatus",
    "Choice",
    "Decision",
    "PendingCall",
    "RunState",
    "Status",
    "Verdict",
    "args_hash",
    "canonical_json",
    "strict_json",
    "strict_loads",
]

SCHEMA_VERSION = 1
MAX_STATE_BYTES = 48 * 1024 * 1024
"""The largest state text :meth:`RunState.from_json` parses (checked before parsing): room for the
images and files a notebook may hold (:data:`~tether.parts.MAX_NOTEBOOK_PART_BYTES`) and 16 MiB more."""
MAX_DEPTH = 100
"""How deeply a state's JSON may nest (tool arguments included)."""
Status = Literal["running", "paused", "needs-decision", "finished", "failed", "cancelled", "limit-reached"]


@dataclass(frozen=True, slots=True)
class RunState:
    """A resumable snapshot of a run, as plain JSON.

    >>> from tether import Action, Agent, tool
    >>> from tether.testing import ScriptedModel
    >>> @tool(approval=True)
    ... def refund(order: str) -> str:
    ...     return f"refunded {order}"
    >>> agent = Agent(ScriptedModel([Action("refund", {"order": "A1"}), "Done."]), [refund])
    >>> paused = agent.run_sync("Refund A1")
    >>> blob = paused.state.to_json()                   # plain JSON: keep it anywhere
    >>> state = RunState.from_json(blob).approve(paused.open_calls[0].call.id)
    >>> agent.run_sync(state).output
    'Done.'
    """

    run_id: str
    messages: tuple[Message, ...]
    open_calls: tuple[PendingCall, ...] = ()  # this run's own (JSON: "pending"); the tree's open items: items()
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
    agent: str = ""  # the name of the agent driving the run
    parent_call: str = ""  # in a child run: the id of the parent's call that delegated to it
    children: tuple[RunState, ...] = ()  # the child runs of delegated calls that have not finished

    @property
    def pending(self) -> tuple[PendingCall, ...]:
        """Deprecated: this run's own open calls, now :attr:`open_calls` (the tree's open items: :meth:`items`)."""
        warnings.warn(
            "RunState.pending is deprecated: use RunState.open_calls (this run's own open calls) "
            "or RunState.items() (every open item of the run tree)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.open_calls

    def pending_call(self, call_id: str) -> PendingCall:
        for p in self.open_calls:
            if p.call.id == call_id:
                return p
        open_ids = [p.id for p in self.items()]
        raise StateError(f"call {call_id!r} is not waiting in run {self.run_id!r}; open calls: {open_ids}")

    def item(self, item_id: str) -> PendingCall:
        """The open item ``item_id`` addresses (a call id, or a path into a child run)."""
        for p in self.items():
            if p.id == item_id:
                return p
        open_ids = [p.id for p in self.items()]
        raise StateError(f"nothing waits as {item_id!r} in run {self.run_id!r}; open items: {open_ids}")

    def child(self, call_id: str) -> RunState:
        """The state of the child run that the call ``call_id`` delegated to."""
        for c in self.children:
            if c.parent_call == call_id:
                return c
        raise StateError(f"call {call_id!r} of run {self.run_id!r} has no child run waiting")

    def items(self) -> tuple[PendingCall, ...]:
        """Every open item of the run tree, each with its path from this run (delegated calls
        themselves are not items: what waits is inside their child runs)."""
        own = tuple(replace(p, where=(self.agent,) if self.agent and self.children else ()) for p in self.open_calls)
        found = [p for p in own if p.status != "delegated"]
        for c in self.children:
            for item in c.items():
                where = (self.agent or "agent", *(item.where or (c.agent or "agent",)))
                found.append(replace(item, path=(c.parent_call, *item.path), where=where))
        return tuple(found) if self.children else self.open_calls

    @property
    def total_usage(self) -> Usage:
        """Usage of this run and of the child runs still open under it."""
        total = self.usage
        for c in self.children:
            total = total + c.total_usage
        return total

    def decision(self, call_id: str) -> Decision | None:
        """The decision recorded for a call (or, with a path, for an item of a child run)."""
        head, *rest = item_path(call_id)
        if rest:
            return next((c.decision(item_id(tuple(rest))) for c in self.children if c.parent_call == head), None)
        for d in self.decisions:
            if d.call_id == head:
                return d
        return None

    # -- decisions ---------------------------------------------------------

    def decide(self, choice: Choice, *, by: str = "", key: bytes | None = None, ttl: float | None = None) -> RunState:
        """This state with one more decision: ``choice`` on the open item it names, by ``by``.

        The item may wait in a child run (its id is then a path: ``c1/c7``); the
        verdict must fit the item (:data:`~tether.pending.VERBS`), and when the
        choice names the ``args_hash`` the person was shown, it must still be the
        item's. With ``key`` the decision is signed; with ``ttl`` it expires after
        that many seconds. A decision already recorded for the item is replaced.

        >>> from tether import Choice, PendingCall, ToolCall
        >>> state = RunState("r1", (), open_calls=(PendingCall(ToolCall("c1", "refund", "{}"), "awaiting-approval"),))
        >>> state.decide(Choice("deny", "c1", message="not today"), by="ana").decision("c1").message
        'not today'
        """
        head, *rest = item_path(choice.item)
        if rest:  # an item of a child run: decide there, keep the tree
            child = self.child(head).decide(replace(choice, item=item_id(tuple(rest))), by=by, key=key, ttl=ttl)
            return replace(self, children=tuple(child if c.parent_call == head else c for c in self.children))
        p = self.pending_call(head)
        wanted = verdicts_for(p.status)
        if choice.verdict not in wanted:
            raise StateError(
                f"call {choice.item!r} is {p.status!r}: decide it with {' or '.join(wanted)}, not {choice.verdict!r}"
            )
        if choice.args_hash and not hmac.compare_digest(choice.args_hash, p.args_hash):
            raise StateError(f"call {choice.item!r} is not what the person was shown (its arguments' hash differs)")
        d = Decision(
            run_id=self.run_id,
            call_id=head,
            verdict=choice.verdict,
            args_hash=p.args_hash,
            state_seq=self.seq,
            args=choice.args,
            message=choice.message,
            by=by,
            expires_at=time.time() + ttl if ttl is not None else None,
            answer=choice.answer,
        )
        if key is not None:
            d = d.sign(key)
        kept = tuple(x for x in self.decisions if x.call_id != head)
        return replace(self, decisions=(*kept, d))

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
        return self.decide(Choice("approve", call_id, args=args), by=by, key=key, ttl=ttl)

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
        return self.decide(Choice("deny", call_id, message=message), by=by, key=key, ttl=ttl)

    def answer(
        self, call_id: str, answer: Any, *, by: str = "", key: bytes | None = None, ttl: float | None = None
    ) -> RunState:
        """Answer a question (text, or JSON that fits the question's answer schema); it becomes the result."""
        return self.decide(Choice("answer", call_id, answer=answer), by=by, key=key, ttl=ttl)

    def retry(self, call_id: str, *, by: str = "", key: bytes | None = None) -> RunState:
        """Run again a ``once`` call whose outcome is unknown after a crash."""
        return self.decide(Choice("retry", call_id), by=by, key=key)

    def skip(self, call_id: str, message: str = "", *, by: str = "", key: bytes | None = None) -> RunState:
        """Do not run again a call whose outcome is unknown; ``message`` goes to the model."""
        return self.decide(Choice("skip", call_id, message=message), by=by, key=key)

    # -- integrity ---------------------------------------------------------

    def _body(self) -> dict[str, Any]:
        data = self.to_dict()
        data.pop("signature")
        data.pop("decisions")  # decisions carry their own signatures, in child runs too
        if self.children:
            data["children"] = [c._body() for c in self.children]
        return data

    def sign(self, key: bytes) -> RunState:
        return replace(self, signature=mac(key, self._body()))

    def verify(self, key: bytes) -> None:
        """Raise :class:`StateTampered` unless the state and its decisions are signed by ``key``."""
        if not self.signature or not hmac.compare_digest(self.signature, mac(key, self._body())):
            raise StateTampered(f"run state {self.run_id!r} has a bad or missing signature")
        self.verify_decisions(key)

    def verify_decisions(self, key: bytes) -> None:
        """Raise unless every decision in the tree is signed by ``key`` (and not expired)."""
        for d in self.decisions:
            d.verify(key)
        for c in self.children:
            c.verify_decisions(key)

    def check_decisions(self) -> None:
        """Each decision must name an open call of its run, once, by its exact arguments."""
        for c in self.children:  # a delegated call that resumed its child is "started" again, child kept
            if c.parent_call not in {p.call.id for p in self.open_calls if p.status in ("delegated", "started")}:
                raise StateTampered(f"run state {self.run_id!r} has a child run for no delegated call")
            c.check_decisions()
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
            if d.verdict not in verdicts_for(p.status):
                raise StateTampered(
                    f"decision for call {d.call_id!r} says {d.verdict!r}, which does not fit a {p.status!r} call"
                )
            d.check_expiry()
            if d.state_seq < self.paused_at:
                raise StateError(
                    f"decision for call {d.call_id!r} was made for an older state "
                    f"(version {d.state_seq}; the run paused at {self.paused_at})"
                )

    # -- JSON --------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        data = {_KEYS.get(name, name): _encode(getattr(self, name)) for name in _STATE_FIELDS}
        for name in _OPTIONAL_STATE_KEYS:  # kept out when empty: only a tree of runs has them
            if not data[name]:
                del data[name]
        return data

    def to_json(self) -> str:
        return canonical_json(self.to_dict())

    @classmethod
    def from_json(cls, text: str | bytes, *, max_bytes: int = MAX_STATE_BYTES) -> RunState:
        """Parse a state; anything malformed, truncated, unknown or oversized raises StateError.

        The size is checked before parsing (``max_bytes``, 48 MiB by default),
        duplicate keys are refused at any depth and nesting is capped at
        :data:`MAX_DEPTH`, so what is verified is what every reader sees.
        """
        size = len(text) if isinstance(text, bytes) or len(text) * 4 <= max_bytes else utf8_size(text)
        if size > max_bytes:
            raise StateError(f"run state is {size} bytes, over the cap of {max_bytes} (max_bytes=)")
        try:
            data = strict_json(text, MAX_DEPTH)
        except ValueError as exc:
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
            return cls(
                run_id=typed(data, "run_id", str),
                messages=tuple(Message.from_dict(m) for m in typed(data, "messages", list)),
                open_calls=tuple(PendingCall.from_dict(p) for p in typed(data, "pending", list)),
                decisions=tuple(Decision.from_dict(d) for d in typed(data, "decisions", list)),
                steps=typed(data, "steps", int),
                tool_calls=typed(data, "tool_calls", int),
                usage=Usage.from_dict(typed(data, "usage", dict)),
                fingerprint=typed(data, "fingerprint", str),
                seq=typed(data, "seq", int),
                paused_at=typed(data, "paused_at", int),
                status=literal(data, "status", Status),
                signature=typed(data, "signature", str),
                agent=typed(data, "agent", str) if "agent" in data else "",
                parent_call=typed(data, "parent_call", str) if "parent_call" in data else "",
                children=tuple(cls.from_dict(c) for c in typed(data, "children", list)) if "children" in data else (),
            )
        except StateError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StateError(f"malformed run state: {exc!s}") from None


# Field lists come from the dataclasses, so a new field cannot be forgotten in one of them.
_STATE_FIELDS = ("schema_version", *(f.name for f in fields(RunState) if f.name != "schema_version"))
_KEYS = {"open_calls": "pending"}  # a field's JSON key, where the two differ (stored states keep loading)
_STATE_KEYS = frozenset(_KEYS.get(name, name) for name in _STATE_FIELDS)
_OPTIONAL_STATE_KEYS = ("parent_call", "children")


def _encode(value: Any) -> Any:
    if isinstance(value, tuple):
        return [v.to_dict() for v in value]
    if isinstance(value, Usage):
        return value.to_dict()
    return value
