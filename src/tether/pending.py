"""An open call, a person's choice on it, and the recorded answer: the values a pause is made of.

A :class:`PendingCall` is a call of the current turn with no result yet (in a
run tree, an open item of a child run, addressed by its path). A
:class:`Choice` is what a person chose for one item: a verdict and its one
payload. :data:`VERBS` is the one table of verdicts: the items each fits, the
payload each takes. A :class:`Decision` is a choice as recorded, bound to the
run, the call id, a hash of the exact arguments the person was shown and the
state version; signed with the run's key when it has one.

>>> verdicts_for("started"), verdicts_for("awaiting-answer")
(('retry', 'skip'), ('answer',))
>>> VERBS["deny"].takes
'message'
"""

from __future__ import annotations

import hmac
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from types import MappingProxyType
from typing import Any, Literal, get_args

from ._schema.strictjson import args_hash, expiry, literal, mac, strings, typed
from .exceptions import StateError, StateTampered
from .messages import ToolCall, check_keys

__all__ = [
    "VERBS",
    "child_run_id",
    "item_id",
    "item_path",
    "CallStatus",
    "Choice",
    "Decision",
    "Payload",
    "PendingCall",
    "Verb",
    "Verdict",
    "verdicts_for",
]

CallStatus = Literal["proposed", "awaiting-approval", "awaiting-answer", "started", "delegated"]
Verdict = Literal["approve", "deny", "retry", "skip", "answer"]
Payload = Literal["args", "message", "answer", "nothing"]


@dataclass(frozen=True, slots=True)
class Verb:
    """What one verdict fits and takes: the table :data:`VERBS` holds one per verdict.

    ``fits`` are the statuses of the items it decides; ``takes`` its one payload:
    edited ``args`` (optional), a ``message`` for the model (optional), an
    ``answer`` (required) or ``nothing``. ``done`` and ``says`` are its words
    for people: how it reads once given, and what it does.

    >>> VERBS["skip"].fits, VERBS["skip"].done
    (('started',), 'skipped')
    """

    fits: tuple[CallStatus, ...]
    takes: Payload
    done: str
    says: str


_ASKED: tuple[CallStatus, ...] = ("proposed", "awaiting-approval", "delegated")
VERBS: Mapping[Verdict, Verb] = MappingProxyType(
    {
        "approve": Verb(_ASKED, "args", "approved", "Approve a call, optionally with edited arguments."),
        "deny": Verb(_ASKED, "message", "denied", "Deny a call; the model reads your message and carries on."),
        "retry": Verb(("started",), "nothing", "set to run again", "Run again a call whose outcome is unknown."),
        "skip": Verb(("started",), "message", "skipped", "Do not run again a call whose outcome is unknown."),
        "answer": Verb(("awaiting-answer",), "answer", "answered", "Answer a question a run asks."),
    }
)
"""Every verdict a person can give, in the order they are offered (a test keeps it equal to :data:`Verdict`)."""

_FITTING = {s: tuple(v for v, verb in VERBS.items() if s in verb.fits) for s in get_args(CallStatus)}


def verdicts_for(status: CallStatus) -> tuple[Verdict, ...]:
    """The verdicts that fit a call: retry/skip once it started, answer a question, approve/deny the rest."""
    return _FITTING[status]


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A call of the current turn that has no result yet.

    In a tree of runs (an agent used as a tool), an open item of a child run is
    listed by the root with ``path``, the ids of the calls that delegated down to
    it, and ``where``, the names of the agents along the way; ``id`` addresses
    the item from the root and ``label`` shows it to a person.

    >>> item = PendingCall(ToolCall("c7", "issue_refund", "{}"), path=("c1",), where=("support", "billing"))
    >>> item.id, item.label
    ('c1/c7', 'support › billing › issue_refund')
    """

    call: ToolCall
    status: CallStatus = "proposed"
    attempts: int = 0
    note: str = ""  # why a human is asked, when it is not the plain case (e.g. the gate raised)
    path: tuple[str, ...] = ()
    where: tuple[str, ...] = ()

    @property
    def args_hash(self) -> str:
        return args_hash(self.call.arguments)

    @property
    def id(self) -> str:
        """The item's address from the root run: delegating call ids, then this call's id."""
        return item_id((*self.path, self.call.id))

    @property
    def label(self) -> str:
        """Where the item waits, for a person: ``support › billing › issue_refund``."""
        return " › ".join((*self.where, self.call.name))

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"call": self.call.to_dict(), "status": self.status, "attempts": self.attempts}
        for name in ("note", "path", "where"):
            if value := getattr(self, name):
                data[name] = list(value) if isinstance(value, tuple) else value
        return data

    @classmethod
    def from_dict(cls, data: Any) -> PendingCall:
        check_keys(data, _PENDING_KEYS, "pending call")
        call = ToolCall.from_dict(data["call"])
        note = typed(data, "note", str) if "note" in data else ""
        path, where = (strings(data, name) for name in ("path", "where"))
        return cls(call, literal(data, "status", CallStatus), typed(data, "attempts", int), note, path, where)


@dataclass(frozen=True, slots=True)
class Choice:
    """What a person chose for one open item: a verdict, the item's id, and the one payload the verdict takes.

    ``item`` is a call id, or a path into a child run (``c1/c7``). The payload
    is checked here, once, against :data:`VERBS`: ``args`` (edited arguments)
    only with ``approve``, ``message`` only with ``deny`` and ``skip``, and an
    ``answer`` (never None) only with ``answer``. ``args_hash`` is the hash of
    the arguments the person was shown; when given, deciding refuses an item
    whose arguments differ. Record it with :meth:`RunState.decide` or
    :func:`~tether.record_decisions`.

    >>> Choice("deny", "c1", message="too much").message
    'too much'
    >>> Choice("retry", "c1", message="why")
    Traceback (most recent call last):
    tether.exceptions.StateError: verdict 'retry' takes no message
    """

    verdict: Verdict
    item: str
    args: dict[str, Any] | None = None
    message: str = ""
    answer: Any = None
    args_hash: str = ""

    def __post_init__(self) -> None:
        verb = VERBS.get(self.verdict)
        if verb is None:
            raise StateError(f"unknown verdict {self.verdict!r}; one of {', '.join(VERBS)}")
        given = {"args": self.args is not None, "message": bool(self.message), "answer": self.answer is not None}
        if extra := [name for name, there in given.items() if there and name != verb.takes]:
            raise StateError(f"verdict {self.verdict!r} takes no {extra[0]}")
        if verb.takes == "answer" and self.answer is None:
            raise StateError("an answer cannot be None")


@dataclass(frozen=True, slots=True)
class Decision:
    """A human's answer to one paused call.

    ``approve`` (optionally with edited ``args``), ``deny`` (``message`` is what
    the model reads), and for a ``once`` call whose outcome is unknown after a
    crash, ``retry`` or ``skip``. ``args_hash`` is the hash of the arguments the
    human saw; ``state_seq`` the state version it was made for.

    >>> Decision("run-1", "c1", "deny", "0" * 32, 3, message="too much").verdict
    'deny'
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
    answer: Any = None  # a question's answer: text or JSON

    def _payload(self) -> dict[str, Any]:
        data = self.to_dict()
        data.pop("signature")
        return data

    def sign(self, key: bytes) -> Decision:
        return replace(self, signature=mac(key, self._payload()))

    def verify(self, key: bytes) -> None:
        if not self.signature or not hmac.compare_digest(self.signature, mac(key, self._payload())):
            raise StateTampered(f"decision for call {self.call_id!r} has a bad or missing signature")
        self.check_expiry()

    def check_expiry(self) -> None:
        if self.expires_at is not None and time.time() > self.expires_at:
            raise StateError(f"decision for call {self.call_id!r} has expired")

    def to_dict(self) -> dict[str, Any]:
        data = {f: getattr(self, f) for f in _DECISION_KEYS_ORDERED}
        if self.answer is None:  # kept out of decisions that are not answers (older readers know none)
            del data["answer"]
        return data

    @classmethod
    def from_dict(cls, data: Any) -> Decision:
        try:
            check_keys(data, _DECISION_KEYS, "decision")
            if missing := _DECISION_KEYS - set(data) - {"answer"}:
                raise ValueError(f"missing field(s) {sorted(missing)}")
            args = data["args"]
            if args is not None and not isinstance(args, dict):
                raise ValueError("edited args must be an object")
            return cls(
                run_id=typed(data, "run_id", str),
                call_id=typed(data, "call_id", str),
                verdict=literal(data, "verdict", Verdict),
                args_hash=typed(data, "args_hash", str),
                state_seq=typed(data, "state_seq", int),
                args=args,
                message=typed(data, "message", str),
                by=typed(data, "by", str),
                expires_at=expiry(data["expires_at"]),
                signature=typed(data, "signature", str),
                answer=data.get("answer"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise StateError(f"malformed decision: {exc}") from None


_ESCAPED = re.compile("~[01]")


def item_id(path: tuple[str, ...]) -> str:
    """The address of an item from the root run: its call ids joined by "/".

    Call ids come from the model's endpoint verbatim, so one may hold a "/":
    each id has its "~" and "/" escaped first (``~0``, ``~1``, as in a JSON
    pointer), so two different items never share an address (a parent's call
    ``c1/X`` is not the call ``X`` of the child run under ``c1``). The escapes
    are characters a URL keeps as they are, so an address put in a URL raw or
    encoded names the same item. Plain ids, the ones providers send, are unchanged.

    >>> item_id(("c1", "X")), item_id(("c1/X",))
    ('c1/X', 'c1~1X')
    """
    return "/".join(i.replace("~", "~0").replace("/", "~1") for i in path)


def item_path(item: str) -> tuple[str, ...]:
    """The call ids an item address names, from the root run down (the inverse of :func:`item_id`).

    >>> item_path("c1~1X"), item_path("c1/X")
    (('c1/X',), ('c1', 'X'))
    """
    return tuple(_ESCAPED.sub(lambda m: "/" if m[0] == "~1" else "~", i) for i in item.split("/"))


def child_run_id(run_id: str, call_id: str) -> str:
    """The id of the child run the call ``call_id`` of run ``run_id`` delegated to.

    >>> child_run_id("r1", "c1"), child_run_id("r1", "c1/X")
    ('r1/c1', 'r1/c1~1X')
    """
    return f"{run_id}/{item_id((call_id,))}"


# Field lists come from the dataclasses, so a new field cannot be forgotten in one of them.
_DECISION_KEYS_ORDERED = tuple(f.name for f in fields(Decision))
_DECISION_KEYS = frozenset(_DECISION_KEYS_ORDERED)
_PENDING_KEYS = frozenset(f.name for f in fields(PendingCall))
