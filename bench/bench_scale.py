"""Scale benchmark: many concurrent runs in one process (issue 14, part 1).

Each run has a scripted brain (a :class:`~tether.FunctionPolicy` that asks for
the ``wait`` tool K times, then answers) and an async tool that waits. Every
configuration runs in a fresh process, so its RSS is its own.

* **RSS per parked run**: N runs are started and each parks in ``wait`` on a
  shared gate (an ``asyncio.Event``), either at once (0 round-trips done) or
  after 10 round-trips whose tool returned at once. Current RSS (``/proc``) with
  all N parked, minus the RSS before any run, over N; after ``gc.collect()``.
  Targets: <= 20 KB with no store, <= 30 KB after 10 round-trips.
* **steps/s and CPU per step**: N runs of K = 10 round-trips each (the tool
  yields to the loop once: ``await asyncio.sleep(0)``), all started together;
  steps = model turns (11 per run). Target: steps/s at 10,000 runs within 20 %
  of the rate at 100.
* ``+gc``: with :func:`tether.dispatch.tune_gc`, as ``tether worker`` and
  ``tether serve`` run; ``memstore`` is the in-memory store.
* With a store: the same on SQLite (one connection) and on PostgreSQL (8
  connections, as ``tether worker`` opens, so calls of different runs overlap):
  SQLite in a temporary directory, PostgreSQL at ``TETHER_PG_DSN`` in a schema
  of its own, dropped afterwards.

Run: python bench/bench_scale.py [--quick] [--stores memory,sqlite,postgres]
(prints tables; nothing here is a test). ``--one KIND N STORE`` runs one cell.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

K = 10
PG_DSN = os.environ.get("TETHER_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")


def rss_kb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1024


PARKED = [0]  # runs waiting at the gate now


def build(store: Any, gate: asyncio.Event, park_after: int, rounds: int) -> Any:
    from tether import Action, Agent, FunctionPolicy, tool

    @tool(effect="none")
    async def wait(n: int) -> int:
        """Wait for the gate (from round ``park_after`` on); otherwise yield once."""
        if n >= park_after:
            PARKED[0] += 1
            await gate.wait()
        else:
            await asyncio.sleep(0)
        return n

    def brain(context, tools):  # type: ignore[no-untyped-def]
        done = sum(1 for m in context if m.role == "tool")
        return Action("wait", {"n": done}) if done < rounds else "done"

    return Agent(FunctionPolicy(brain), [wait], store=store, max_steps=rounds + 5)


async def open_store(kind: str, tmp: str) -> tuple[Any, Any]:
    if kind == "memory":
        return None, None
    if kind == "none":
        return None, None
    if kind == "memstore":
        from tether.stores.memory import MemoryStore

        return MemoryStore(), None
    if kind == "sqlite":
        from tether.stores.sqlite import SQLiteStore

        return SQLiteStore(os.path.join(tmp, "runs.db")), None
    from tether.stores.postgres import PostgresStore

    schema = f"bench_scale_{uuid.uuid4().hex[:8]}"
    return await PostgresStore.connect(PG_DSN, schema=schema, connections=8), schema


async def drop(schema: str | None) -> None:
    if schema:
        import psycopg

        async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as conn:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def parked(n: int, kind: str, rounds_before: int) -> dict[str, float]:
    """RSS per run with ``n`` runs parked in the tool after ``rounds_before`` round-trips."""
    with tempfile.TemporaryDirectory() as tmp:
        store, schema = await open_store(kind, tmp)
        gate = asyncio.Event()
        agent = build(store, gate, rounds_before, rounds_before + 1)
        warm = asyncio.Event()
        warm.set()
        await build(store, warm, 0, rounds_before + 1).run("warm up")  # imports, caches, the store's tables
        PARKED[0] = 0
        gc.collect()
        base = rss_kb()
        tasks = [asyncio.create_task(agent.run("go")) for _ in range(n)]
        t0 = time.perf_counter()
        while True:  # every run parked: its tool-started is written and the gate awaited
            await asyncio.sleep(0.05)
            if any(t.done() for t in tasks) or PARKED[0] >= n:
                break
        elapsed = time.perf_counter() - t0
        gc.collect()
        per_run = (rss_kb() - base) / n
        gate.set()
        results = await asyncio.gather(*tasks)
        assert all(r.status == "finished" for r in results)
        if store is not None:
            await store.aclose()
        await drop(schema)
    return {"kb_per_parked_run": per_run, "seconds_to_park": elapsed}


async def throughput(n: int, kind: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        store, schema = await open_store(kind, tmp)
        gate = asyncio.Event()
        gate.set()
        agent = build(store, gate, K + 1, K)  # never parks: each tool yields once
        await agent.run("warm up")
        gc.collect()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        results = await asyncio.gather(*(agent.run("go") for _ in range(n)))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        assert all(r.status == "finished" for r in results), {r.status for r in results}
        steps = n * (K + 1)
        if store is not None:
            await store.aclose()
        await drop(schema)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"steps_per_s": steps / wall, "cpu_us_per_step": cpu / steps * 1e6, "peak_rss_mb": peak, "wall_s": wall}


def one(what: str, n: int, kind: str) -> dict[str, float]:
    if kind.endswith("+gc"):  # what tether worker and tether serve do: tether.dispatch.tune_gc()
        from tether.dispatch import tune_gc

        tune_gc()
        kind = kind[:-3]
    if what == "park0":
        return asyncio.run(parked(n, kind, 0))
    if what == "park10":
        return asyncio.run(parked(n, kind, 10))
    return asyncio.run(throughput(n, kind))


def measure(what: str, n: int, kind: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--one", what, str(n), kind], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(quick: bool, stores: list[str]) -> None:
    print(f"bench_scale: K={K} round-trips per run, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}\n")
    print(f"{'store':<12}{'runs':>7}{'KB/parked run (0 rt)':>22}{'KB/parked run (10 rt)':>23}")
    for kind in stores:
        for n in [1000, 10_000]:
            if not kind.startswith("memory") and n > 1000:
                continue  # a store's own throughput bounds it there: see the steps/s table
            a, b = measure("park0", n, kind), measure("park10", n, kind)
            print(f"{kind:<12}{n:>7}{a['kb_per_parked_run']:>22.1f}{b['kb_per_parked_run']:>23.1f}")
    print(f"\n{'store':<12}{'runs':>7}{'steps/s':>10}{'CPU µs/step':>13}{'peak RSS MB':>13}{'wall s':>9}")
    for kind in stores:
        rates = {}
        for n in [100, 1000, 10_000] if kind.startswith("memory") else [100, 1000]:
            if quick and n > 1000:
                continue
            r = measure("rate", n, kind)
            rates[n] = r["steps_per_s"]
            print(f"{kind:<12}{n:>7}{r['steps_per_s']:>10.0f}{r['cpu_us_per_step']:>13.0f}"
                  f"{r['peak_rss_mb']:>13.1f}{r['wall_s']:>9.1f}")  # fmt: skip
        if 10_000 in rates:
            print(f"{'':<12}steps/s at 10,000 / at 100: {rates[10_000] / rates[100]:.2f} (target >= 0.8)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        print(json.dumps(one(sys.argv[2], int(sys.argv[3]), sys.argv[4])))
    else:
        stores = ["memory", "memory+gc", "memstore+gc", "sqlite+gc", "postgres+gc"]
        if "--stores" in sys.argv:
            stores = sys.argv[sys.argv.index("--stores") + 1].split(",")
        main("--quick" in sys.argv, stores)
