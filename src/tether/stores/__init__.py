"""Run stores: where a run's committed events live.

A :class:`RunStore` keeps each run's events in order and its status. The loop
appends with ``expected_seq`` (the number of events it has seen): a store refuses
an append whose ``expected_seq`` is not the run's current length, so two workers
can never both advance one run; the loser gets :class:`~tether.exceptions.LeaseConflict`
before it executes anything.

Implementations: :class:`~tether.stores.memory.MemoryStore` (tests),
:class:`~tether.stores.sqlite.SQLiteStore` (the embedded default) and
:class:`~tether.stores.postgres.PostgresStore` (``tether[postgres]``). Each
keeps the rules of :mod:`tether.stores.rules` (fencing, leases, sessions,
status), written once there.
"""

from __future__ import annotations

from ..store import ChangeFeed, RunInfo, RunStore, SessionInfo, StoreWrapper
from ._open import open_store
from .rules import status_after

__all__ = ["ChangeFeed", "RunInfo", "RunStore", "SessionInfo", "StoreWrapper", "open_store", "status_after"]
