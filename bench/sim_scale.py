"""What one PostgreSQL carries, and how many shards a load needs: the arithmetic of docs/scale.md.

Inputs are measured here (``--measure``, against ``TETHER_PG_DSN``) or given:

* server CPU per event: appends of one event through ``PostgresStore.append``
  (with a lease, the hot path: one statement) from 4 connections; the CPU the
  server's backends spent (``/proc/<pid>/stat`` of each backend: PostgreSQL runs
  on this machine) over the number of appends;
* WAL bytes per event (``pg_current_wal_lsn`` before and after);
* server CPU per lease operation (take, renew, let go): the same way.

Then, for a run of S steps (each step: model-replied, tool-started,
tool-finished, plus a run-started and a finished per run, and a lease taken and
let go per run and renewed every ttl/3), the server CPU per run, and what a
PostgreSQL of N cores at a target utilisation carries: runs/s, steps/s,
events/s, WAL MB/s; and how many shards (databases, each its own store) a load
needs when runs are placed by a hash of their id.

Run: python bench/sim_scale.py [--measure] [--cores 16] [--util 0.6] [--steps 11]
(prints tables; nothing here is a test)
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import time
import uuid

PG_DSN = os.environ.get("TETHER_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
CLK = os.sysconf("SC_CLK_TCK")

# Measured on this machine (2 cores, shared, PostgreSQL 15 on the same host; see docs/scale.md): used
# when --measure is not given, so the arithmetic can be reproduced without a server.
MEASURED = {"cpu_us_per_event": 73.3, "wal_bytes_per_event": 557.0, "cpu_us_per_lease_op": 60.0}


def backend_cpu(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime + stime
    return total / CLK


async def measure(n: int = 3000, conns: int = 4) -> dict[str, float]:
    import psycopg

    from tether import Message, RunStarted, ToolCall, ToolStarted
    from tether.stores.postgres import PostgresStore

    schema = f"sim_{uuid.uuid4().hex[:8]}"
    store = await PostgresStore.connect(PG_DSN, schema=schema, connections=conns)
    try:

        async def pids() -> list[int]:
            out = []
            for _ in range(conns):  # one session per connection: each reports its backend
                async with store._session("pid") as conn:
                    out.append((await (await conn.execute("SELECT pg_backend_pid()")).fetchone())[0])
            return sorted(set(out))

        runs = [f"r{i}" for i in range(conns * 4)]
        leases = {}
        for r in runs:
            await store.append(r, [RunStarted(r, (Message.user("go"),))], expected_seq=0)
            leases[r] = await store.acquire(r, f"sim:{r}", 600)
        backends = await pids()
        async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as admin:

            async def lsn() -> int:
                row = await (await admin.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")).fetchone()
                return int(row[0])

            seqs = dict.fromkeys(runs, 1)

            async def writer(mine: list[str], count: int) -> None:
                for i in range(count):
                    r = mine[i % len(mine)]
                    ev = ToolStarted(ToolCall(f"c{i}", "look_up", '{"n": 1}'), 1)
                    seqs[r] = await store.append(r, [ev], expected_seq=seqs[r], lease=leases[r])

            cpu0, wal0, t0 = backend_cpu(backends), await lsn(), time.perf_counter()
            per = n // conns
            await asyncio.gather(*(writer(runs[i::conns], per) for i in range(conns)))
            cpu1, wal1, wall = backend_cpu(backends), await lsn(), time.perf_counter() - t0
            appends = per * conns

            cpu2 = backend_cpu(backends)

            async def renewer(mine: list[str], count: int) -> None:
                for i in range(count):
                    r = mine[i % len(mine)]
                    leases[r] = await store.acquire(r, f"sim:{r}", 600)

            await asyncio.gather(*(renewer(runs[i::conns], per) for i in range(conns)))
            cpu3 = backend_cpu(backends)
            await admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await store.aclose()
    return {
        "cpu_us_per_event": (cpu1 - cpu0) / appends * 1e6,
        "wal_bytes_per_event": (wal1 - wal0) / appends,
        "cpu_us_per_lease_op": (cpu3 - cpu2) / (per * conns) * 1e6,
        "client_appends_per_s": appends / wall,
    }


def per_run(m: dict[str, float], steps: int, seconds_per_run: float, ttl: float) -> dict[str, float]:
    events = 3 * steps + 2  # each step: model-replied, tool-started, tool-finished; run-started, finished
    lease_ops = 2 + seconds_per_run / (ttl / 3)  # take, let go, and a renewal every ttl/3
    return {
        "events": events,
        "cpu_s": (events * m["cpu_us_per_event"] + lease_ops * m["cpu_us_per_lease_op"]) / 1e6,
        "wal_bytes": events * m["wal_bytes_per_event"],
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--measure", action="store_true", help="measure the inputs against TETHER_PG_DSN")
    p.add_argument("--cores", type=int, nargs="*", default=[2, 16, 64], help="PostgreSQL server cores")
    p.add_argument("--util", type=float, default=0.6, help="target utilisation of the server's CPU")
    p.add_argument("--steps", type=int, default=11, help="model turns per run")
    p.add_argument("--run-seconds", type=float, default=60.0, help="seconds a run holds its lease")
    p.add_argument("--ttl", type=float, default=30.0, help="lease TTL (renewed every ttl/3)")
    args = p.parse_args()
    m = dict(MEASURED)
    source = "built-in measurement (see MEASURED)"
    if args.measure:
        m.update(asyncio.run(measure()))
        source = f"measured now at {PG_DSN.rpartition('@')[2]}"
    print(f"inputs ({source}):")
    for k, v in m.items():
        print(f"  {k:<24}{v:>10.1f}")
    r = per_run(m, args.steps, args.run_seconds, args.ttl)
    print(f"\none run: {args.steps} steps, {r['events']:.0f} events, {r['cpu_s'] * 1e3:.2f} ms of server CPU, "
          f"{r['wal_bytes'] / 1024:.1f} KB of WAL\n")  # fmt: skip
    print(f"{'cores':>6}{'runs/s':>10}{'steps/s':>10}{'events/s':>11}{'WAL MB/s':>10}{'runs/day':>14}")
    for cores in args.cores:
        runs = cores * args.util / r["cpu_s"]
        print(f"{cores:>6}{runs:>10.0f}{runs * args.steps:>10.0f}{runs * r['events']:>11.0f}"
              f"{runs * r['wal_bytes'] / 2**20:>10.1f}{runs * 86400:>14,.0f}")  # fmt: skip
    print("\nshards (one store each, a run placed by a hash of its id) on 16-core servers:")
    capacity = 16 * args.util / r["cpu_s"]
    for name, rate in [("support desk: 10,000 conversations, one run each per 10 min", 10_000 / 600),
                       ("evaluation: 50,000 tasks in one hour", 50_000 / 3600),
                       ("10 million runs a day", 1e7 / 86400), ("1 billion runs a day", 1e9 / 86400)]:  # fmt: skip
        print(f"  {name:<62}{rate:>10.0f} runs/s -> {max(1, math.ceil(rate / capacity)):>5} shard(s)")


if __name__ == "__main__":
    main()
