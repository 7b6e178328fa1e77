"""Grade records: a trial's result kept in the run store next to its run.

A RunStore holds only runs, so a graded trial is kept as a tiny run of its
own, ``<run id>#grade``: a ``run-started`` note saying what it is, then a
``finished`` event whose output is the trial result as JSON, appended in one
atomic write. A trial is done exactly when its record exists, so an
evaluation killed between a run's end and its grading grades it again, and
one killed after never repeats the run (nor an LLM judge's verdict).

This is the one place that knows the encoding: if stores grow a way to
attach metadata to a run, only this module changes.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..events import Finished, RunStarted, ToolStarted
from ..messages import Message
from ..pending import child_run_id

if TYPE_CHECKING:
    from ..events import Event
    from ..store import RunStore

SUFFIX = "#grade"
NOTE = "tether eval grade record: the finished output is the trial result as JSON"
FINGERPRINT = "tether-eval-record"


def record_id(run_id: str) -> str:
    """The id of the grade record of ``run_id``."""
    return run_id + SUFFIX


async def save(store: RunStore, run_id: str, result: dict[str, Any]) -> None:
    """Keep ``result`` as the grade of ``run_id`` (replacing an older one)."""
    rid = record_id(run_id)
    await store.delete(rid)
    started = RunStarted(rid, (Message.system(NOTE),), False, FINGERPRINT)
    await store.append(rid, [started, Finished(json.dumps(result, sort_keys=True))], expected_seq=0)


async def load(store: RunStore, run_id: str) -> dict[str, Any] | None:
    """The saved result of ``run_id``, or None."""
    for ev in await store.load(record_id(run_id)):
        if isinstance(ev, Finished):
            try:
                data = json.loads(ev.output)
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


async def forget(store: RunStore, run_id: str) -> None:
    """Delete a run, every child run under it and its grade record (to run the trial again).

    A child run left behind would be resumed by the new run's delegating call of
    the same id (its tools not run again, its decisions counted as the new
    run's). Children go first, so a forget cut short leaves the root to find them.
    """
    await _delete_tree(store, run_id)
    await store.delete(record_id(run_id))


async def child_runs(store: RunStore, run_id: str, events: list[Event] | None = None) -> list[str]:
    """The ids of the child runs kept under ``run_id``: ``<run id>/<call id>`` of its started calls."""
    events = await store.load(run_id) if events is None else events
    ids = dict.fromkeys(child_run_id(run_id, ev.call.id) for ev in events if isinstance(ev, ToolStarted))
    return [child for child in ids if await store.get(child) is not None]


async def _delete_tree(store: RunStore, run_id: str) -> None:
    for child in await child_runs(store, run_id):
        await _delete_tree(store, child)
    await store.delete(run_id)
