"""Run stores: where a run's committed events live.

A :class:`RunStore` keeps each run's events in order and its status. The loop
appends with ``expected_seq`` (the number of events it has seen): a store refuses
an append whose ``expected_seq`` is not the run's current length, so two workers
can never both advance one run; the loser gets :class:`~tether.exceptions.LeaseConflict`
before it executes anything.

Implementations: :class:`~tether.stores.memory.MemoryStore` (tests),
:class:`~tether.stores.sqlite.SQLiteStore` (the embedded default) and
:class:`~tether.stores.postgres.PostgresStore` (``tether[postgres]``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ._open import open_store

if TYPE_CHECKING:
    from ..events import Event

__all__ = ["RunInfo", "RunStore", "open_store", "status_after"]


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One run as a store lists it."""

    run_id: str
    status: str
    seq: int
    created_at: float
    updated_at: float


class RunStore(Protocol):
    """Where runs are journaled; see the module docstring for the contract."""

    async def append(self, run_id: str, events: Sequence[Event], *, expected_seq: int) -> int:
        """Append events atomically after ``expected_seq``; return the new length."""
        ...

    async def load(self, run_id: str) -> list[Event]:
        """Every committed event of the run, in order ([] if unknown)."""
        ...

    async def get(self, run_id: str) -> RunInfo | None: ...

    async def list_runs(self, status: str | None = None, limit: int = 100) -> list[RunInfo]:
        """Runs, most recently updated first, optionally with one status."""
        ...

    async def delete(self, run_id: str) -> None: ...

    async def aclose(self) -> None: ...


def status_after(current: str, events: Sequence[Event]) -> str:
    """The run status once ``events`` are appended (a shared rule for every store)."""
    for ev in events:
        kind = ev.kind
        if kind == "run-started":
            current = "running"
        elif kind == "paused":
            current = "needs-decision" if ev.reason == "outcome-unknown" else "paused"  # type: ignore[union-attr]
        elif kind in ("finished", "failed", "cancelled", "limit-reached"):
            current = kind
    return current
