"""Store benchmarks: what durability costs per step, and how big a paused state gets.

Run: python bench/bench_store.py  (prints tables; nothing here is a test)

* Per-step overhead: the same scripted run (each step = one model reply and one
  tool call, so three commits: model-replied, tool-started, tool-finished)
  without a store, then journaled to each store. Wall-clock time, median of
  several runs; "extra" is the difference from the run without a store.
* One commit: the latency of a single one-event ``append``.
* A paused RunState after 10 and 1,000 steps: its JSON size, the time to
  serialise and parse it, and the time to rebuild it from the SQLite journal
  (what ``resume --run-id`` does).

PostgreSQL is measured when ``TETHER_PG_DSN`` (default: local ``test``
database) answers; it gets a schema of its own, dropped at the end.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from tether import Agent, Message, RunState, ToolCall, ToolStarted, state_of, tool
from tether.stores import RunStore
from tether.stores.memory import MemoryStore
from tether.stores.sqlite import SQLiteStore
from tether.testing import ScriptedModel

PG_DSN = os.environ.get("TETHER_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
STEPS = 20
THOUGHT = "I will look this up before answering; the customer asked about the order status. " * 2


@tool(effect="none")
async def look_up(n: int) -> str:
    """Look something up."""
    return f"record {n}: status shipped, 2 items, carrier DHL, tracking 00340434161234567890"


@tool(approval=True)
async def send(text: str) -> str:
    """Send a message (needs approval)."""
    return "sent"


def replies(steps: int, *, pause: bool = False) -> list[Any]:
    calls = [Message.assistant(THOUGHT, [ToolCall(f"c{i}", "look_up", f'{{"n": {i}}}')]) for i in range(steps - 1)]
    last = Message.assistant("asking to send", [ToolCall("c_send", "send", '{"text": "done"}')])
    return [*calls, last if pause else "done"]


StoreFactory = Callable[[], Awaitable[RunStore | None]]


async def per_step_us(make: StoreFactory, runs: int) -> tuple[float, float]:
    """Median (wall, CPU) microseconds per step."""
    wall, cpu = [], []
    for _ in range(runs):
        store = await make()
        agent = Agent(ScriptedModel(replies(STEPS)), [look_up], store=store)
        t0, c0 = time.perf_counter(), time.process_time()
        result = await agent.run("go")
        wall.append((time.perf_counter() - t0) / STEPS * 1e6)
        cpu.append((time.process_time() - c0) / STEPS * 1e6)
        assert result.status == "finished"
    return statistics.median(wall), statistics.median(cpu)


async def commit_us(store: RunStore, n: int) -> float:
    call = ToolCall("c1", "look_up", '{"n": 1}')
    run_id = uuid.uuid4().hex
    samples = []
    for seq in range(n):
        t0 = time.perf_counter()
        await store.append(run_id, [ToolStarted(call)], expected_seq=seq)
        samples.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(samples)


async def pg_factory() -> tuple[StoreFactory, Callable[[], Awaitable[None]]] | None:
    try:
        import psycopg
        from psycopg import sql

        from tether.stores.postgres import PostgresStore

        schema = f"bench_{os.getpid()}"
        shared = await PostgresStore.connect(PG_DSN, schema=schema)
    except Exception as exc:  # no server, no psycopg: report and move on
        print(f"(PostgreSQL skipped: {exc})")
        return None

    async def make() -> RunStore:
        return shared

    async def cleanup() -> None:
        await shared.aclose()
        async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as conn:
            await conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))

    return make, cleanup


async def overhead(tmp: Path) -> list[tuple[str, str]]:
    normal = SQLiteStore(tmp / "normal.db")
    full = SQLiteStore(tmp / "full.db", durability="full")

    async def none() -> None:
        return None

    async def memory() -> RunStore:
        return MemoryStore()

    async def sqlite_normal() -> RunStore:
        return normal

    async def sqlite_full() -> RunStore:
        return full

    await per_step_us(sqlite_normal, 5)  # warm up
    base, base_cpu = await per_step_us(none, 200)
    rows = [(f"no store: per step, wall / CPU (µs, {STEPS}-step run, median)", f"{base:.0f} / {base_cpu:.0f}")]
    cases: list[tuple[str, StoreFactory, int]] = [
        ("MemoryStore", memory, 200),
        ("SQLite, durability=normal", sqlite_normal, 200),
        ("SQLite, durability=full", sqlite_full, 10),
    ]
    pg = await pg_factory()
    if pg:
        cases.append(("PostgreSQL (loopback)", pg[0], 20))
    for name, make, runs in cases:
        t, c = await per_step_us(make, runs)
        rows.append(
            (f"{name}: extra per step, wall / CPU (µs; target <= 300)", f"{t - base:+.0f} / {c - base_cpu:+.0f}")
        )
    rows.append(("one-event append, SQLite normal (µs, median of 2000)", f"{await commit_us(normal, 2000):.0f}"))
    rows.append(("one-event append, SQLite full (µs, median of 200)", f"{await commit_us(full, 200):.0f}"))
    if pg:
        store = await pg[0]()
        assert store is not None
        rows.append(("one-event append, PostgreSQL (µs, median of 500)", f"{await commit_us(store, 500):.0f}"))
        await pg[1]()
    normal.close()
    full.close()
    return rows


async def paused_state(tmp: Path, steps: int) -> list[tuple[str, str]]:
    store = SQLiteStore(tmp / f"state-{steps}.db")
    agent = Agent(ScriptedModel(replies(steps, pause=True)), [look_up, send], store=store, max_steps=steps + 1)
    result = await agent.run("go")
    assert result.status == "paused"
    state = result.state
    text = state.to_json()
    n = max(3, 2000 // steps)
    dump = _median_us(lambda: state.to_json(), n)
    parse = _median_us(lambda: RunState.from_json(text), n)
    t0 = time.perf_counter()
    for _ in range(max(3, n // 10)):
        rebuilt = state_of(await store.load(result.run_id))
    rebuild = (time.perf_counter() - t0) / max(3, n // 10) * 1e6
    assert rebuilt.to_json() == text
    store.close()
    return [
        (f"paused RunState after {steps} steps: JSON size (KiB)", f"{len(text.encode()) / 1024:.1f}"),
        ("  serialise to_json (µs)", f"{dump:.0f}"),
        ("  parse from_json (µs)", f"{parse:.0f}"),
        ("  rebuild from the SQLite journal: load + from_events (µs)", f"{rebuild:.0f}"),
    ]


def _median_us(fn: Callable[[], object], n: int) -> float:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(samples)


async def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        rows = await overhead(tmp)
        rows += await paused_state(tmp, 10)
        rows += await paused_state(tmp, 1000)
    rows.append(
        ("load average (1 min) at the end: timings are wall clock on a shared machine", f"{os.getloadavg()[0]:.1f}")
    )
    width = max(len(k) for k, _ in rows)
    print(f"{'measure'.ljust(width)}  value")
    print(f"{'-' * width}  -----")
    for k, v in rows:
        print(f"{k.ljust(width)}  {v}")


if __name__ == "__main__":
    asyncio.run(main())
