"""Change notification: a store tells a watcher which runs changed, whoever wrote them.

A watcher (``store.changes()``) on one store object hears of appends made
through another object on the same database (another process would use one),
through its own object, and through ``record_decisions``; an append that was
refused is never reported. Timeouts here are liveness bounds, not speed
claims: latency is measured in ``bench/bench_serve.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from support import refund
from tether import Action, Agent, LeaseConflict, Message, RunStarted, record_decisions
from tether.stores import ChangeFeed, RunStore
from tether.testing import ScriptedModel

from .conftest import Backend

LIVENESS = 20.0  # seconds: far above any real delay, so a failure means "never"


@contextlib.asynccontextmanager
async def watching(store: RunStore) -> AsyncIterator[asyncio.Queue[str]]:
    """A queue of the run ids ``store.changes()`` yields, once the watcher is known to listen."""
    if not isinstance(store, ChangeFeed):
        pytest.skip(f"{type(store).__name__} has no change feed (an optional part of the contract)")
    feed: ChangeFeed = store
    seen: asyncio.Queue[str] = asyncio.Queue()

    async def pump() -> None:
        async for run_id in feed.changes(interval=0.05):
            seen.put_nowait(run_id)

    task = asyncio.create_task(pump())
    try:
        await _until_listening(store, seen)
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _until_listening(store: RunStore, seen: asyncio.Queue[str]) -> None:
    """Append to a probe run until the watcher reports it (a LISTEN is set up asynchronously)."""
    for n in range(200):
        await store.append("probe", [RunStarted("probe", (), n > 0)], expected_seq=n)
        try:
            while await asyncio.wait_for(seen.get(), 0.1) != "probe":
                pass
            break
        except TimeoutError:
            continue
    else:
        raise AssertionError("the watcher never reported the probe run")
    while not seen.empty():
        seen.get_nowait()


async def next_other_than_probe(seen: asyncio.Queue[str]) -> str:
    while (run_id := await asyncio.wait_for(seen.get(), LIVENESS)) == "probe":
        pass
    return run_id


def started(run_id: str) -> RunStarted:
    return RunStarted(run_id, (Message.user("hello"),))


async def test_an_append_through_another_store_object_is_reported(backend: Backend) -> None:
    watcher, writer = await backend.open(), await backend.open()
    async with watching(watcher) as seen:
        await writer.append("r1", [started("r1")], expected_seq=0)
        assert await next_other_than_probe(seen) == "r1"


async def test_an_append_through_the_watching_store_object_is_reported(backend: Backend) -> None:
    store = await backend.open()
    async with watching(store) as seen:
        await store.append("r2", [started("r2")], expected_seq=0)
        assert await next_other_than_probe(seen) == "r2"


async def test_a_refused_append_is_not_reported(backend: Backend) -> None:
    watcher, writer = await backend.open(), await backend.open()
    await writer.append("r3", [started("r3")], expected_seq=0)
    async with watching(watcher) as seen:
        with pytest.raises(LeaseConflict):
            await writer.append("r3", [started("r3")], expected_seq=0)
        await writer.append("r4", [started("r4")], expected_seq=0)
        assert await next_other_than_probe(seen) == "r4"


async def test_a_recorded_decision_is_reported(backend: Backend) -> None:
    worker_store, reviewer_store = await backend.open(), await backend.open()
    agent = Agent(ScriptedModel([Action("refund", {"order": "A1"})]), [refund], store=worker_store)
    paused = await agent.run("Refund A1", run_id="r5")
    async with watching(worker_store) as seen:
        await record_decisions(reviewer_store, "r5", lambda s: s.approve(paused.items[0].call.id, by="ana"))
        assert await next_other_than_probe(seen) == "r5"
