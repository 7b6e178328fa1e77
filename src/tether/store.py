"""The run store contract: where a run's committed events live.

A :class:`RunStore` keeps each run's events in order and its status. The loop
appends with ``expected_seq`` (the number of events it has seen): a store refuses
an append whose ``expected_seq`` is not the run's current length, so two workers
can never both advance one run; the loser gets :class:`~tether.exceptions.LeaseConflict`
before it executes anything.

A worker advancing a run holds its **lease** (:class:`Lease`): an owner, a
fencing ``token`` that grows each time the lease changes hands, and an expiry
the worker renews while it is alive. A second worker never takes over a live
lease (it gets :class:`~tether.exceptions.LeaseConflict` naming the holder); an
expired one is taken over. An append that names a lease is refused unless that
lease is still the run's current one, so a stalled worker whose lease was
taken over cannot commit; fencing by position stays the last line of defence.

A store that can also say which runs change, whoever wrote them, is a
:class:`ChangeFeed` (all three shipped stores are): ``tether serve`` and the
dispatch sweeper listen to it and act on a decision at once; without it they
sweep every few seconds. :class:`StoreWrapper` hands every call to another
store, for wrappers that change one or two of them.

The Protocols live in the core so that the loop depends on no implementation;
:mod:`tether.stores` has them (memory, SQLite, PostgreSQL), the rules they
share (:mod:`tether.stores.rules`) and re-exports these names.
:func:`record_decisions` is how a person's decision reaches a stored run from
any process, without running the agent.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .events import ApprovalDecided, Event
from .exceptions import LeaseConflict, StateError
from .journal import state_of
from .leases import Lease, gone
from .pending import child_run_id, item_id
from .state import Choice, Decision, RunState

__all__ = [
    "ChangeFeed",
    "Lease",
    "RunInfo",
    "RunStore",
    "SessionInfo",
    "StoreWrapper",
    "load_tree",
    "record_decisions",
]


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One run as a store lists it (with its lease, if one was ever taken)."""

    run_id: str
    status: str
    seq: int
    created_at: float
    updated_at: float
    lease_owner: str | None = None
    lease_expires_at: float | None = None


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A named conversation (a session) as a store lists it: its last run, and how many runs it has had.

    >>> SessionInfo("customer-42", "r7", "finished", 7, 1_700_000_000.0, 1_700_000_900.0).last_run
    'r7'
    """

    name: str
    last_run: str
    status: str  # the last run's
    runs: int
    created_at: float  # when its first run started
    updated_at: float  # when its last run last changed


class RunStore(Protocol):
    """Where runs are journaled; see the module docstring for the contract.

    The rules every backend keeps (fencing, leases, sessions, status) are
    written once in :mod:`tether.stores.rules`; ``tests/stores`` holds a
    backend to all of them.
    """

    async def append(
        self, run_id: str, events: Sequence[Event], *, expected_seq: int, lease: Lease | None = None
    ) -> int:
        """Append events atomically after ``expected_seq``; return the new length.

        With ``lease``, the append is refused (``LeaseConflict``) unless that
        lease is the run's current one (same owner and token).
        """
        ...

    async def acquire(self, run_id: str, owner: str, ttl: float, *, take_over: str | None = None) -> Lease:
        """Take the run's lease for ``ttl`` seconds, or renew it when ``owner`` holds it.

        A live lease of another owner raises ``LeaseConflict`` naming it (its
        ``holder``); an expired one is taken over with a higher token, and so
        is a live one whose owner is ``take_over`` (a worker known to be gone).
        """
        ...

    async def release(self, lease: Lease) -> None:
        """Give the lease up now (a no-op when it is no longer this lease)."""
        ...

    async def load(self, run_id: str) -> list[Event]:
        """Every committed event of the run, in order ([] if unknown).

        A part (image, file) that many events name comes back as one bytes
        object: a store that decodes stored JSON does so under
        :func:`tether.parts.shared`.
        """
        ...

    async def get(self, run_id: str) -> RunInfo | None: ...

    async def list_runs(self, status: str | None = None, limit: int = 100) -> list[RunInfo]:
        """Runs, most recently updated first, optionally with one status."""
        ...

    async def delete(self, run_id: str) -> None: ...

    async def sessions(self, name: str | None = None, limit: int = 100) -> list[SessionInfo]:
        """Sessions, most recently updated first (only ``name``'s, when given: [] if it has no run).

        A run belongs to the session its ``run-started`` labels name (``meta["session"]``);
        its ``meta["continues"]`` names the session's run it continues ("" for the first), and
        an append that starts a run continuing anything but the session's last run is refused
        (``LeaseConflict``): two processes cannot both continue one conversation.
        """
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class ChangeFeed(Protocol):
    """A store that reports which runs change: the optional part of the contract.

    Test for it with ``isinstance(store, ChangeFeed)``; a store without it
    still works everywhere, its changes are found by sweeping.

    >>> from tether.stores.memory import MemoryStore
    >>> isinstance(MemoryStore(), ChangeFeed)
    True
    """

    def changes(self, *, interval: float = 0.2) -> AsyncIterator[str]:
        """The id of each run as its appends commit, made through any store object or process.

        A run may be reported more than once, never missed while the iterator
        runs (a store that polls looks every ``interval`` seconds). The feed
        may end, or miss changes across a broken connection: a consumer also
        looks at the runs now and then.
        """
        ...


class StoreWrapper:
    """A store that hands every call to ``inner``: subclass it and override what you change.

    >>> import asyncio
    >>> from tether.stores.memory import MemoryStore
    >>> from tether.events import RunStarted
    >>> class Counting(StoreWrapper):
    ...     appends = 0
    ...     async def append(self, run_id, events, *, expected_seq, lease=None):
    ...         self.appends += 1
    ...         return await super().append(run_id, events, expected_seq=expected_seq, lease=lease)
    >>> store = Counting(MemoryStore())
    >>> asyncio.run(store.append("r1", [RunStarted("r1")], expected_seq=0)), store.appends
    (1, 1)
    """

    def __init__(self, inner: RunStore) -> None:
        self.inner = inner

    async def append(
        self, run_id: str, events: Sequence[Event], *, expected_seq: int, lease: Lease | None = None
    ) -> int:
        return await self.inner.append(run_id, events, expected_seq=expected_seq, lease=lease)

    async def acquire(self, run_id: str, owner: str, ttl: float, *, take_over: str | None = None) -> Lease:
        return await self.inner.acquire(run_id, owner, ttl, take_over=take_over)

    async def release(self, lease: Lease) -> None:
        await self.inner.release(lease)

    async def load(self, run_id: str) -> list[Event]:
        return await self.inner.load(run_id)

    async def get(self, run_id: str) -> RunInfo | None:
        return await self.inner.get(run_id)

    async def list_runs(self, status: str | None = None, limit: int = 100) -> list[RunInfo]:
        return await self.inner.list_runs(status, limit)

    async def delete(self, run_id: str) -> None:
        await self.inner.delete(run_id)

    async def sessions(self, name: str | None = None, limit: int = 100) -> list[SessionInfo]:
        return await self.inner.sessions(name, limit)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def changes(self, *, interval: float = 0.2) -> AsyncIterator[str]:
        """The inner store's :class:`ChangeFeed`; a feed that ends at once when it has none."""
        if isinstance(self.inner, ChangeFeed):
            return self.inner.changes(interval=interval)
        return _no_changes()


async def _no_changes() -> AsyncIterator[str]:
    return
    yield  # an async generator that ends at once


async def record_decisions(
    store: RunStore,
    run_id: str,
    decide: Choice | Sequence[Choice] | Callable[[RunState], RunState],
    *,
    by: str = "",
    key: bytes | None = None,
    replace: bool = False,
) -> RunState:
    """Decide on a stored run without running it: the approval inbox's one operation.

    Rebuilds the run's state from its journal, applies ``decide`` (one
    :class:`~tether.Choice` or several, made ``by`` a person and signed with
    ``key``; or a function of the state, for example ``lambda s: s.approve(call_id)``),
    and appends one ``approval-decided`` event per new decision at the state's
    position, so a decision made while another process advanced the run is
    refused (``LeaseConflict``) instead of landing on a state nobody saw. A
    recorded decision is final until it is spent: changing it raises
    :class:`~tether.StateError` unless ``replace=True``. Resume the run by id to act on it.

    >>> import asyncio
    >>> from tether import Action, Agent, Choice, tool
    >>> from tether.stores.memory import MemoryStore
    >>> from tether.testing import ScriptedModel
    >>> @tool(approval=True)
    ... def refund(order: str) -> str:
    ...     return f"refunded {order}"
    >>> store = MemoryStore()
    >>> paused = Agent(ScriptedModel([Action("refund", {"order": "A1"})]), [refund], store=store).run_sync(
    ...     "Refund A1", run_id="r1")
    >>> decided = asyncio.run(record_decisions(store, "r1", Choice("approve", paused.items[0].id), by="ana"))
    >>> Agent(ScriptedModel(["Done."]), [refund], store=store).run_sync(run_id="r1").output
    'Done.'
    """
    state = await load_tree(store, run_id)
    decided = decide(state) if callable(decide) else _chosen(state, decide, by, key)
    writes = list(_new_decisions(state, decided, replace))
    for run, _ in writes:  # nothing is recorded on a run a worker is advancing: its open calls may be running
        await _check_waiting(store, run)
    now = time.time()  # a decision's time is part of the audit trail (who, when, on what)
    for run, new in writes:  # each run's decisions go to its own journal, at the position it was seen
        await store.append(run.run_id, [ApprovalDecided(d, at=now) for d in new], expected_seq=run.seq)
    return decided


def _chosen(state: RunState, choices: Choice | Sequence[Choice], by: str, key: bytes | None) -> RunState:
    for choice in (choices,) if isinstance(choices, Choice) else choices:
        state = state.decide(choice, by=by, key=key)
    return state


async def _check_waiting(store: RunStore, run: RunState) -> None:
    """Refuse a decision on a run that is not waiting for one, or that a live worker holds."""
    if run.status not in ("paused", "needs-decision"):
        raise StateError(f"run {run.run_id!r} is {run.status!r}, not waiting for a decision")
    info = await store.get(run.run_id)
    live = info is not None and info.lease_expires_at is not None and info.lease_expires_at > time.time()
    if live and info is not None and not gone(info.lease_owner or ""):  # a killed worker holds nothing
        raise LeaseConflict(
            f"run {run.run_id!r} is being advanced by {info.lease_owner!r}: decide once it has paused",
            holder=info.lease_owner,
        )


async def load_tree(store: RunStore, run_id: str) -> RunState:
    """The state of a stored run with the current state of every child run still open under it.

    A delegated call's child run lives in the same store as ``<run id>/<call id>``;
    its own journal (not the snapshot its parent kept) is the truth.
    """
    events = await store.load(run_id)
    if not events:
        raise StateError(f"no run {run_id!r} in the store")
    state = state_of(events)
    children = []
    for kept in state.children:
        child_id = child_run_id(run_id, kept.parent_call)
        if await store.get(child_id) is None:
            children.append(kept)  # journaled with its parent only
            continue
        child = await load_tree(store, child_id)
        children.append(dataclasses.replace(child, parent_call=kept.parent_call, agent=kept.agent))
    return dataclasses.replace(state, children=tuple(children))


def _new_decisions(before: RunState, after: RunState, replace: bool) -> Iterator[tuple[RunState, list[Decision]]]:
    """Per run of the tree, the decisions ``after`` adds to ``before`` (refusing silent changes)."""
    # A decision's call_id is a call id of its own run, never a path: look it up as one.
    new = [d for d in after.decisions if before.decision(item_id((d.call_id,))) != d]
    for d in new:
        old = before.decision(item_id((d.call_id,)))
        if old is not None and not replace:
            by = f" by {old.by}" if old.by else ""
            raise StateError(
                f"call {d.call_id!r} already has a recorded decision ({old.verdict}{by}); "
                f"it stands until the run resumes, unless you replace it (replace=True)"
            )
    if new:
        yield before, new
    for child in after.children:
        yield from _new_decisions(before.child(child.parent_call), child, replace)
