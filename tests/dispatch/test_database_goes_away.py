"""Workers ride out a database that drops them: terminated backends, kill -9, and no run lost or doubled.

The attack of the review (issue 25, item 6): rounds of ``pg_terminate_backend``
on every connection of two Procrastinate workers. Before, both workers exited
(``ConnectorException``) and runs stayed ``running`` until someone restarted
them. Now each worker reconnects with backoff; the soak (see ``chaos.py``) adds
kill -9 and asks for 0 worker exits, 0 lost runs, 0 doubled effects.
"""

from __future__ import annotations

import asyncio
import os
import random
import uuid
from pathlib import Path

import pytest

from dispatch.chaos import chaos_soak, terminate
from durability.harness import PG_DSN
from tether import Agent, Message, RunStarted
from tether.dispatch import LocalPool, Sweeper
from tether.stores.memory import MemoryStore
from tether.stores.postgres import PostgresStore
from tether.testing import ScriptedModel

pytestmark = [pytest.mark.postgres]
SEED = int(os.environ.get("TETHER_SOAK_SEED", random.randrange(2**31)))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_two_workers_survive_terminated_backends_and_kill_9(tmp_path: Path, store_schema: str, queue_schema: str):
    report = chaos_soak(tmp_path, store_schema, queue_schema, 40, kills=2, rounds=14, seed=SEED,
                        concurrency=4, delay=0.15, every=0.5)  # fmt: skip
    print(f"seed {SEED}: {report.line()}")
    print("\n---\n".join(report.exits[:1]))
    assert report.rounds == 14 and report.backends >= 14  # every round found connections to cut
    assert report.exits == [], f"seed {SEED}: a worker exited:\n" + "\n---\n".join(report.exits[:2])
    assert report.lost == 0, f"seed {SEED}: {report.line()}"
    assert report.problems == [], f"seed {SEED}: {report.problems[:10]}"
    assert report.twice == [], f"seed {SEED}: {report.twice[:10]}"
    assert report.executions.get("once", 0) > 0


async def test_a_store_reconnects_after_its_backend_was_terminated(
    store_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:  # fmt: skip
    app = f"tether-cut-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("PGAPPNAME", app)  # libpq names the store's connections so
    store = await PostgresStore.connect(PG_DSN, schema=store_schema)
    try:
        await store.append("r1", [RunStarted("r1", (Message.user("hi"),), False, "fp", "a")], expected_seq=0)
        assert await terminate(app) == 1
        await asyncio.sleep(0.2)  # the server's FATAL reaches the idle socket
        assert (await store.get("r1")).seq == 1  # type: ignore[union-attr]  # a new connection, no error
    finally:
        await store.aclose()


class Down:
    """A dispatcher whose queue is down for its first ``failures`` submissions."""

    def __init__(self, failures: int) -> None:
        self.failures, self.submitted = failures, []

    async def submit(self, run_id: str, agent: str, *, delay: float = 0.0) -> None:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("the queue's database went away")
        self.submitted.append(run_id)


async def test_a_sweeper_outlives_a_queue_that_fails() -> None:
    store = MemoryStore()
    await store.append("r1", [RunStarted("r1", (Message.user("hi"),), False, "fp", "a")], expected_seq=0)
    down = Down(3)
    sweeper = Sweeper(store, down, every=0.01)
    task = asyncio.create_task(sweeper.run())
    try:
        async with asyncio.timeout(10):
            while not down.submitted:
                await asyncio.sleep(0.01)
        assert not task.done()  # before, the first failure ended the sweeper (and the worker with it)
    finally:
        task.cancel()
    assert down.submitted[0] == "r1" and down.failures == 0


async def test_a_pool_worker_outlives_an_on_done_that_fails() -> None:
    store = MemoryStore()
    agent = Agent(ScriptedModel(["one", "two"]), store=store, name="a")
    for run_id in ("r1", "r2"):
        await store.append(run_id, [RunStarted(run_id, (Message.user("hi"),), False, agent.fingerprint, "a")],
                           expected_seq=0)  # fmt: skip
    seen: list[str] = []

    def on_done(run_id: str, outcome: object) -> None:
        seen.append(run_id)
        raise ConnectionError("the store went away")  # serve's callback reads the store

    async with LocalPool({"a": agent}, concurrency=1, on_done=on_done) as pool:
        await pool.submit("r1", "a")
        await pool.submit("r2", "a")
        async with asyncio.timeout(10):
            while len(seen) < 2:  # before, the one worker died with the first callback
                await asyncio.sleep(0.01)
    assert seen == ["r1", "r2"] and (await store.get("r2")).status == "finished"  # type: ignore[union-attr]
