"""An in-memory run store: the reference implementation of the contract, for tests."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Sequence

from ..events import Event
from ..store import Lease, RunInfo, SessionInfo
from .rules import (
    check_continues,
    check_free,
    check_latest,
    check_persisted,
    check_position,
    granted,
    held_by,
    holds,
    session_of,
    status_after,
)


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
        check_persisted(events)
        log = self._events.get(run_id, [])
        check_position(run_id, len(log), expected_seq)
        current = self._leases.get(run_id)
        if lease is not None and not holds(current, lease):
            raise held_by(run_id, current, time.time())
        if not events:
            return len(log)
        if log and run_id in self._session_of:  # an older run of a session does not advance past a newer one
            session = self._session_of[run_id]
            check_latest(run_id, session, self._last(session, after=run_id))
        if not log and (found := session_of(events)) is not None:
            self._start(run_id, *found)
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

    def _start(self, run_id: str, session: str, continues: str) -> None:
        """Place a new run last in its session, if it continues the session's last run, free."""
        last = self._last(session)
        check_continues(session, continues, last)
        check_free(session, self._leases.get(last) if last else None, time.time())
        self._sessions.setdefault(session, []).append(run_id)
        self._session_of[run_id] = session

    def _last(self, session: str, *, after: str | None = None) -> str | None:
        """The session's last run still kept (one later than ``after``, when given)."""
        runs = self._sessions.get(session, [])
        later = runs[runs.index(after) + 1 :] if after is not None else runs
        return next((r for r in reversed(later) if r in self._info), None)

    async def acquire(self, run_id: str, owner: str, ttl: float, *, take_over: str | None = None) -> Lease:
        lease = granted(run_id, self._leases.get(run_id), owner, ttl, time.time(), take_over=take_over)
        self._leases[run_id] = lease
        return lease

    async def release(self, lease: Lease) -> None:
        current = self._leases.get(lease.run_id)
        if current is not None and holds(current, lease):
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
