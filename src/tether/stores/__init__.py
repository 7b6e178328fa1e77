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

from ..journal import status_of as status_after
from ..store import RunInfo, RunStore, SessionInfo
from ._open import open_store

__all__ = ["RunInfo", "RunStore", "SessionInfo", "open_store", "status_after"]
