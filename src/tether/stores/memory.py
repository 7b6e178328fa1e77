"""An in-memory run store: the reference implementation of the contract, for tests."""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..events import PERSISTED, Event
from ..exceptions import LeaseConflict, StoreError
from . import RunInfo, status_after


class MemoryStore:
    """Keeps runs in a dict; nothing survives the process.

    >>> store = MemoryStore()
    """

    def __init__(self) -> None:
        self._events: dict[str, list[Event]] = {}
        self._info: dict[str, RunInfo] = {}

    async def append(self, run_id: str, events: Sequence[Event], *, expected_seq: int) -> int:
        for ev in events:
            if ev.kind not in PERSISTED:
                raise StoreError(f"{ev.kind!r} events are not persisted")
        log = self._events.get(run_id, [])
        if len(log) != expected_seq:
            raise LeaseConflict(
                f"run {run_id!r} has {len(log)} events, the writer expected {expected_seq}: another worker advanced it"
            )
        if not events:
            return len(log)
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
        return len(log)

    async def load(self, run_id: str) -> list[Event]:
        return list(self._events.get(run_id, ()))

    async def get(self, run_id: str) -> RunInfo | None:
        return self._info.get(run_id)

    async def list_runs(self, status: str | None = None, limit: int = 100) -> list[RunInfo]:
        runs = [i for i in self._info.values() if status is None or i.status == status]
        return sorted(runs, key=lambda i: (i.updated_at, i.run_id), reverse=True)[:limit]

    async def delete(self, run_id: str) -> None:
        self._events.pop(run_id, None)
        self._info.pop(run_id, None)

    async def aclose(self) -> None:
        pass
