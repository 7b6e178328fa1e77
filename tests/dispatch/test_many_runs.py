"""10,000 runs at once in one process: every one parks, resumes and finishes, nothing is lost or repeated.

Correctness only; the timings of the same shape live in bench/bench_scale.py.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from tether import Action, Agent, Message, RunStarted, tool
from tether.dispatch import LocalPool
from tether.stores.memory import MemoryStore
from tether.testing import FunctionPolicy

N = 10_000


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_ten_thousand_concurrent_runs_all_park_at_once_then_finish_exactly_once() -> None:
    gate = asyncio.Event()
    waiting = 0
    calls: Counter[tuple[str, int]] = Counter()

    @tool(effect="once")
    async def wait(run: str, n: int) -> int:
        """Wait for the gate on the first round-trip."""
        nonlocal waiting
        calls[(run, n)] += 1
        if n == 0:
            waiting += 1
            await gate.wait()
        return n

    def brain(context, tools):  # type: ignore[no-untyped-def]
        done = sum(1 for m in context if m.role == "tool")
        run = context[0].content
        return Action("wait", {"run": run, "n": done}) if done < 2 else f"{run} done"

    store = MemoryStore()
    agent = Agent(FunctionPolicy(brain), [wait], store=store, name="a")
    ids = [f"r{i}" for i in range(N)]
    for run_id in ids:
        first = RunStarted(run_id, (Message.user(run_id),), False, agent.fingerprint, agent.name)
        await store.append(run_id, [first], expected_seq=0)
    async with LocalPool({"a": agent}, concurrency=N) as pool:
        for run_id in ids:
            await pool.submit(run_id, "a")
        while waiting < N:  # all 10,000 are parked in their tool at the same moment
            await asyncio.sleep(0.05)
        gate.set()
        await pool.drain()
    infos = {r: await store.get(r) for r in ids}
    assert Counter(i.status for i in infos.values() if i) == {"finished": N}
    assert set(calls.values()) == {1} and len(calls) == 2 * N  # every call ran once, none twice
    assert all(i is not None and i.lease_expires_at == 0 for i in infos.values())  # every lease let go
    last = {r: (await store.load(r))[-1] for r in ids[:: N // 50]}
    assert all(ev.kind == "finished" and ev.output == f"{r} done" for r, ev in last.items())  # type: ignore[attr-defined]
