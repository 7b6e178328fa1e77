"""An in-memory run store: the reference implementation of the contract, for tests."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Sequence

from ..events import PERSISTED, Event
from ..exceptions import LeaseConflict, StoreError
from ..store import Lease, RunInfo, SessionInfo
from . import status_after
from ._blobs import being_advanced, moved_on, session_of, superseded
from ._codec import held_by


class MemoryStore:
    """Keeps runs in a dict; nothing survives the process.

    >>> import asyncio
    >>> store = MemoryStore()
    >>> lease = asyncio.run(store.acquire("r1", "worker-a", ttl=30))
    >>> lease.owner, lease.token
    ('worker-a', 1)
    """

    def __init__(self) -> None:
        self._events: dict[str, list[Event]] = {}
        self._info: dict[str, RunInfo] = {}
        self._leases: dict[str, Lease] = {}
        self._watchers: set[asyncio.Queue[str]] = set()
        self._sessions: dict[str, list[str]] = {}  # session -> its runs, in order (parts are shared, not copied)
        self._session_of: dict[str, str] = {}  # run -> its session

    async def append(
        self, run_id: str, events: Sequence[Event], *, expected_seq: int, lease: Lease | None = None
    ) -> int:
        for ev in events:
            if ev.kind not in PERSISTED:
                raise StoreError(f"{ev.kind!r} events are not persisted")
        log = self._events.get(run_id, [])
        if len(log) != expected_seq:
            raise LeaseConflict(
                f"run {run_id!r} has {len(log)} events, the writer expected {expected_seq}: another worker advanced it"
            )
        current = self._leases.get(run_id)
        if lease is not None and (current is None or (current.owner, current.token) != (lease.owner, lease.token)):
            raise held_by(run_id, current, time.time())
        if not events:
            return len(log)
        if log and run_id in self._session_of:  # an older run of a session does not advance past a newer one
            session = self._session_of[run_id]
            runs = self._sessions[session]
            newer = [r for r in runs[runs.index(run_id) + 1 :] if r in self._info]
            if newer:
                raise superseded(run_id, session, newer[-1])
        if not log and (found := session_of(events)) is not None:
            runs = self._sessions.setdefault(found[0], [])
            last = next((r for r in reversed(runs) if r in self._info), None)
            if (last or "") != found[1]:
                raise moved_on(found[0], found[1], last)
            held = self._leases.get(last) if last else None
            if held is not None and held.expires_at > time.time():
                raise being_advanced(found[0], held)
            runs.append(run_id)
            self._session_of[run_id] = found[0]
        now = time.time()
        old = self._info.get(run_id)
        log.extend(events)
        self._events[run_id] = log
        self._info[run_id] = RunInfo(
            run_id,
            status_after(old.status if old else "running", events),
            len(log),
            old.created_at if old else now,
            now,
        )
        for queue in self._watchers:
            queue.put_nowait(run_id)
        return len(log)

    async def acquire(self, run_id: str, owner: str, ttl: float, *, take_over: str | None = None) -> Lease:
        now, current = time.time(), self._leases.get(run_id)
        if current is not None and current.owner not in (owner, take_over) and current.expires_at > now:
            raise held_by(run_id, current, now)
        token = current.token + (current.owner != owner) if current else 1
        self._leases[run_id] = lease = Lease(run_id, owner, token, now + ttl)
        return lease

    async def release(self, lease: Lease) -> None:
        current = self._leases.get(lease.run_id)
        if current is not None and (current.owner, current.token) == (lease.owner, lease.token):
            self._leases[lease.run_id] = dataclasses.replace(current, expires_at=0.0)

    async def load(self, run_id: str) -> list[Event]:
        return list(self._events.get(run_id, ()))

    async def get(self, run_id: str) -> RunInfo | None:
        info = self._info.get(run_id)
        lease = self._leases.get(run_id)
        if info is None or lease is None:
            return info
        return dataclasses.replace(info, lease_owner=lease.owner, lease_expires_at=lease.expires_at)

    async def list_runs(self, status: str | None = None, limit: int = 100) -> list[RunInfo]:
        runs = [i for i in self._info.values() if status is None or i.status == status]
        ordered = sorted(runs, key=lambda i: (i.updated_at, i.run_id), reverse=True)[:limit]
        return [await self.get(i.run_id) or i for i in ordered]

    async def delete(self, run_id: str) -> None:
        self._events.pop(run_id, None)
        self._info.pop(run_id, None)
        self._leases.pop(run_id, None)

    async def sessions(self, name: str | None = None, limit: int = 100) -> list[SessionInfo]:
        """Sessions, most recently updated first (only ``name``'s, when given)."""
        found = []
        for session, runs in self._sessions.items():
            alive = [self._info[r] for r in runs if r in self._info and name in (None, session)]
            if alive:
                last = alive[-1]
                found.append(
                    SessionInfo(session, last.run_id, last.status, len(alive), alive[0].created_at, last.updated_at)
                )
        return sorted(found, key=lambda s: (s.updated_at, s.name), reverse=True)[:limit]

    async def changes(self, *, interval: float = 0.2) -> AsyncIterator[str]:
        """The id of each run as events are appended to it (``interval`` is unused: no polling).

        >>> async def first_change():
        ...     store = MemoryStore()
        ...     changes = store.changes()
        ...     waiting = asyncio.ensure_future(anext(changes))
        ...     await asyncio.sleep(0)
        ...     await store.append("r1", [RunStarted("r1")], expected_seq=0)
        ...     return await waiting
        >>> from tether.events import RunStarted
        >>> asyncio.run(first_change())
        'r1'
        """
        queue: asyncio.Queue[str] = asyncio.Queue()
        self._watchers.add(queue)
        try:
            while True:
                yield await queue.get()
        finally:
            self._watchers.discard(queue)

    async def aclose(self) -> None:
        pass
