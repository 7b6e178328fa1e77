"""Training data from recorded runs: every decision a brain made, with what it saw.

A store's runs hold each model reply (``model-replied``) after the events
that led to it, so replaying the events before a reply rebuilds the notebook
the brain was looking at. :func:`examples_from_store` does that for every run
of a store (finished runs by default; grade records of evaluations skipped).

>>> examples = await examples_from_store(store)   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ..events import Event, ModelReplied
from ..journal import replay
from .policy import Example

if TYPE_CHECKING:
    from ..store import RunStore

GRADE_SUFFIX = "#grade"  # tether.evals keeps grades as runs with this suffix


def examples_from_events(events: Sequence[Event]) -> list[Example]:
    """One :class:`Example` per model reply of one run."""
    return [Example(replay(events[:i]), ev.message) for i, ev in enumerate(events) if isinstance(ev, ModelReplied)]


async def examples_from_store(
    store: RunStore,
    *,
    run_ids: Iterable[str] | None = None,
    statuses: Iterable[str] | None = ("finished",),
    limit: int = 100_000,
) -> list[Example]:
    """Every decision of the store's runs (or of ``run_ids``), from runs with one of ``statuses``.

    ``statuses=None`` takes runs whatever their status (paused runs included).
    """
    wanted = None if statuses is None else set(statuses)
    if run_ids is None:
        infos = await store.list_runs(limit=limit)
        ids = sorted(i.run_id for i in infos if wanted is None or i.status in wanted)
    else:
        ids = list(run_ids)
    out: list[Example] = []
    for rid in ids:
        if rid.endswith(GRADE_SUFFIX):
            continue
        out += examples_from_events(await store.load(rid))
    return out
