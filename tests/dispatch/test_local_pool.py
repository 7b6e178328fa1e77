"""The in-process pool: bounded, duplicate-safe, and every run ends resumable on shutdown."""

from __future__ import annotations

import asyncio

import pytest

from tether import Action, Agent, Message, RunStarted, UserError, tool
from tether.dispatch import LocalPool
from tether.stores.memory import MemoryStore
from tether.testing import FunctionPolicy


def brain(context, tools):  # type: ignore[no-untyped-def]
    return "done" if any(m.role == "tool" for m in context) else Action("slow", {"n": 1})


async def seed(store: MemoryStore, agent: Agent, run_ids: list[str]) -> None:
    for run_id in run_ids:
        ev = RunStarted(run_id, (Message.user("go"),), False, agent.fingerprint, agent.name)
        await store.append(run_id, [ev], expected_seq=0)


async def test_the_pool_advances_every_submitted_run_once_at_bounded_concurrency() -> None:
    running, peak, ran = 0, 0, []

    @tool(effect="none")
    async def slow(n: int) -> int:
        """Wait a little."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        ran.append(n)
        return n

    store = MemoryStore()
    agent = Agent(FunctionPolicy(brain), [slow], store=store, name="a")
    ids = [f"r{i}" for i in range(20)]
    await seed(store, agent, ids)
    async with LocalPool({"a": agent}, concurrency=3) as pool:
        for run_id in ids + ids:  # every run delivered twice
            await pool.submit(run_id, "a")
        await pool.drain()
    assert peak <= 3 and len(ran) == 20
    assert {(await store.get(r)).status for r in ids} == {"finished"}  # type: ignore[union-attr]


async def test_closing_the_pool_leaves_every_run_resumable() -> None:
    gate = asyncio.Event()

    @tool(effect="none")
    async def slow(n: int) -> int:
        """Wait for the gate."""
        await gate.wait()
        return n

    store = MemoryStore()
    agent = Agent(FunctionPolicy(brain), [slow], store=store, name="a")
    await seed(store, agent, ["r1", "r2"])
    pool = LocalPool({"a": agent}, concurrency=2)
    pool.start()
    await pool.submit("r1", "a")
    await pool.submit("r2", "a")

    async def started() -> int:
        return sum([(await store.load(r))[-1].kind == "tool-started" for r in ("r1", "r2")])

    while await started() < 2:
        await asyncio.sleep(0.001)
    await pool.aclose()
    assert [(await store.get(r)).status for r in ("r1", "r2")] == ["cancelled", "cancelled"]  # type: ignore[union-attr]
    gate.set()
    assert (await agent.run(run_id="r1")).status == "finished"  # the interrupted run resumes


async def test_delayed_work_and_outcomes_are_reported() -> None:
    seen: list[tuple[str, str]] = []
    store = MemoryStore()
    agent = Agent(FunctionPolicy(lambda c, t: "hi"), store=store, name="a")
    await seed(store, agent, ["r1"])
    async with LocalPool({"a": agent}, on_done=lambda r, o: seen.append((r, type(o).__name__))) as pool:
        await pool.submit("r1", "a", delay=0.05)
        await pool.submit("missing", "a")
        await asyncio.sleep(0.1)
        await pool.drain()
    assert sorted(seen) == [("missing", "StateError"), ("r1", "RunResult")]


def test_a_pool_needs_agents_with_a_store_and_known_names() -> None:
    with pytest.raises(UserError, match="has no store"):
        LocalPool({"a": Agent(FunctionPolicy(lambda c, t: "hi"))})

    async def main() -> None:
        async with LocalPool({"a": Agent(FunctionPolicy(lambda c, t: "hi"), store=MemoryStore())}) as pool:
            with pytest.raises(UserError, match="no agent named 'b'"):
                await pool.submit("r1", "b")

    asyncio.run(main())


async def test_a_pool_closed_at_any_moment_leaves_each_run_finished_or_resumable() -> None:
    from tether.dispatch import Sweeper

    @tool(effect="idempotent")
    async def slow(n: int) -> int:
        """Wait a little."""
        await asyncio.sleep(0.002 * (n % 7))
        return n

    def steps(context, tools):  # type: ignore[no-untyped-def]
        done = sum(1 for m in context if m.role == "tool")
        return Action("slow", {"n": done}) if done < 3 else "done"

    store = MemoryStore()
    agent = Agent(FunctionPolicy(steps), [slow], store=store, name="a")
    ids = [f"r{i}" for i in range(200)]
    await seed(store, agent, ids)
    pool = LocalPool({"a": agent}, concurrency=20)
    pool.start()
    for run_id in ids:
        await pool.submit(run_id, "a")

    async def midway() -> bool:  # 50 finished, and some in a tool right now
        done = sum([(await store.get(r)).status == "finished" for r in ids])  # type: ignore[union-attr]
        return done >= 50 and any([(await store.load(r))[-1].kind == "tool-started" for r in ids])

    while not await midway():
        await asyncio.sleep(0.001)
    await pool.aclose()  # mid-flight: some finished, some in a tool, some never started
    infos = {r: await store.get(r) for r in ids}
    statuses = {i.status for i in infos.values() if i}
    assert statuses <= {"finished", "cancelled", "running"} and "cancelled" in statuses
    held = [r for r, i in infos.items() if i and i.lease_expires_at]
    assert {r: infos[r].status for r in held} == {}  # no lease left behind, even by runs that had just ended
    never_started = [r for r, i in infos.items() if i and i.status == "running"]
    assert [len(await store.load(r)) for r in never_started] == [1] * len(never_started)  # only their first event
    async with LocalPool({"a": agent}, concurrency=20) as again:
        for r, i in infos.items():
            if i and i.status == "cancelled":
                await again.submit(r, "a")  # an interrupted run is resumed when someone asks
        await Sweeper(store, again).sweep()  # the never-started ones are found in the store
        await again.drain()
    assert {(await store.get(r)).status for r in ids} == {"finished"}  # type: ignore[union-attr]
