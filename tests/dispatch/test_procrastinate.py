"""The Procrastinate adapter against the real queue on this machine's PostgreSQL (no mock)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from durability.harness import PG_DSN
from tether import Action, Agent, Message, ProviderError, RunStarted, record_decisions, tool
from tether.dispatch.procrastinate import ProcrastinateDispatcher
from tether.stores.postgres import PostgresStore
from tether.testing import FunctionPolicy

pytestmark = pytest.mark.postgres


def brain(context, tools):  # type: ignore[no-untyped-def]
    return "done" if any(m.role == "tool" for m in context) else Action("step", {"n": 1})


ran: list[int] = []


@tool(effect="once")
async def step(n: int) -> int:
    """Take a step (once)."""
    ran.append(n)
    return n


# Not support.refund: a once step of the queue's runs, recorded with the other steps in one list.
@tool(effect="once", approval=True)
async def refund(n: int) -> int:
    """Refund (a person approves first)."""
    ran.append(n)
    return n


@pytest.fixture
async def store(store_schema: str) -> AsyncIterator[PostgresStore]:
    s = await PostgresStore.connect(PG_DSN, schema=store_schema)
    yield s
    await s.aclose()


async def seed(store: PostgresStore, agent: Agent, run_id: str) -> None:
    ev = RunStarted(run_id, (Message.user("go"),), False, agent.fingerprint, agent.name)
    await store.append(run_id, [ev], expected_seq=0)


async def until(store: PostgresStore, run_id: str, status: str, seconds: float = 30) -> None:
    for _ in range(int(seconds / 0.02)):
        info = await store.get(run_id)
        if info is not None and info.status == status:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"run {run_id!r} is {info and info.status!r}, never {status!r}")


async def jobs(dispatcher: ProcrastinateDispatcher) -> list[tuple[str, str]]:
    import psycopg

    async with await psycopg.AsyncConnection.connect(PG_DSN) as conn:
        cur = await conn.execute(f'SELECT status::text, args::text FROM "{dispatcher.schema}".procrastinate_jobs')
        return [(r[0], r[1]) for r in await cur.fetchall()]


async def test_runs_submitted_twice_are_advanced_once_by_a_worker_on_the_real_queue(
    store: PostgresStore, queue_schema: str
) -> None:
    ran.clear()
    agent = Agent(FunctionPolicy(brain), [step], store=store, name="a")
    async with ProcrastinateDispatcher(PG_DSN, {"a": agent}, schema=queue_schema) as dispatcher:
        for i in range(5):
            await seed(store, agent, f"r{i}")
            await dispatcher.submit(f"r{i}", "a")
            await dispatcher.submit(f"r{i}", "a")  # a duplicate delivery
        assert len(await jobs(dispatcher)) == 5  # the queueing lock kept one waiting job per run
        worker = asyncio.create_task(dispatcher.work(concurrency=3, sweep_every=60))
        for i in range(5):
            await until(store, f"r{i}", "finished")
        worker.cancel()
        with pytest.raises(asyncio.CancelledError):
            await worker
    assert ran == [1] * 5


async def test_a_decision_recorded_elsewhere_wakes_the_paused_run(store: PostgresStore, queue_schema: str) -> None:
    ran.clear()
    policy = FunctionPolicy(lambda c, t: "done" if any(m.role == "tool" for m in c) else Action("refund", {"n": 7}))
    agent = Agent(policy, [refund], store=store, name="a")
    async with ProcrastinateDispatcher(PG_DSN, {"a": agent}, schema=queue_schema) as dispatcher:
        await seed(store, agent, "r1")
        await dispatcher.submit("r1", "a")
        worker = asyncio.create_task(dispatcher.work(concurrency=2, sweep_every=60))  # no sweep: LISTEN wakes it
        await until(store, "r1", "paused")
        other = await PostgresStore.connect(PG_DSN, schema=store.schema)  # a person, through another connection
        await record_decisions(other, "r1", lambda s: s.approve(s.open_calls[0].id, by="ana"))
        await other.aclose()
        await until(store, "r1", "finished")
        worker.cancel()
        with pytest.raises(asyncio.CancelledError):
            await worker
    assert ran == [7]


async def test_a_run_that_failed_on_its_provider_is_tried_again_later_through_the_queue(
    store: PostgresStore, queue_schema: str
) -> None:
    asked = []

    def flaky(context, tools):  # type: ignore[no-untyped-def]
        asked.append(len(asked))
        if len(asked) == 1:
            raise ProviderError("overloaded, try again in a while", status_code=529, retryable=True)
        return "done"

    agent = Agent(FunctionPolicy(flaky), store=store, name="a")
    async with ProcrastinateDispatcher(PG_DSN, {"a": agent}, schema=queue_schema, retry_after=0.5) as dispatcher:
        await seed(store, agent, "r1")
        await dispatcher.submit("r1", "a")
        worker = asyncio.create_task(dispatcher.work(concurrency=1, sweep_every=60))
        await until(store, "r1", "finished")
        worker.cancel()
        with pytest.raises(asyncio.CancelledError):
            await worker
    kinds = [ev.kind for ev in await store.load("r1")]
    assert kinds.count("failed") == 1 and kinds[-1] == "finished"


async def test_a_worker_shut_down_mid_run_leaves_it_resumable_and_queued_for_another(
    store: PostgresStore, queue_schema: str
) -> None:
    gate = asyncio.Event()

    @tool(effect="idempotent")
    async def wait(n: int) -> int:
        """Wait for the gate."""
        await gate.wait()
        return n

    agent = Agent(FunctionPolicy(lambda c, t: "done" if any(m.role == "tool" for m in c) else Action("wait", {"n": 1})),
                  [wait], store=store, name="a")  # fmt: skip
    async with ProcrastinateDispatcher(PG_DSN, {"a": agent}, schema=queue_schema) as first:
        await seed(store, agent, "r1")
        await first.submit("r1", "a")
        worker = asyncio.create_task(first.work(concurrency=1, sweep_every=60))
        while not first.in_flight or (await store.load("r1"))[-1].kind != "tool-started":
            await asyncio.sleep(0.01)
        worker.cancel()
        with pytest.raises(asyncio.CancelledError):
            await worker
    assert (await store.get("r1")).status == "cancelled"  # type: ignore[union-attr]
    assert sorted(s for s, _ in await jobs(first)) == ["aborted", "todo"]  # handed on before the worker exited
    gate.set()
    async with ProcrastinateDispatcher(PG_DSN, {"a": agent}, schema=queue_schema) as second:
        worker = asyncio.create_task(second.work(concurrency=1, sweep_every=60))
        await until(store, "r1", "finished")
        worker.cancel()
        with pytest.raises(asyncio.CancelledError):
            await worker
