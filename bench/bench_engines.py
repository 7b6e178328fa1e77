"""Engine benchmark: worker processes on one PostgreSQL store, fed by Procrastinate or by Celery.

Both engines carry the same job ("advance run R"); the store and its leases are
the truth either way, and every worker runs the same sweeper. Measured:

* **throughput**: N runs (each: one tool round-trip, then an answer) started in
  the store and submitted at once; W worker processes of concurrency C; runs/s
  from the first submission to the last run finished, and events/s;
* **latency from decision to resume**: a run paused for approval; a decision is
  recorded from this process; the time until a worker commits the run's resume
  (the ``run-started`` event's own timestamp), median and p95 of 20;
* **worker kill**: one worker killed with SIGKILL with runs in flight: whether
  the engine delivers its jobs again, and the seconds until every run finished
  (the sweeper finds them once their leases expire: ``LEASE_TTL`` here).

Procrastinate workers are ``tether worker`` itself; the Celery worker is a
small adapter here (threads pool, one event loop per process), enough to
compare. Redis on 127.0.0.1:6379 is Celery's broker.

Run: python bench/bench_engines.py [--quick]   (prints tables; nothing here is a test)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

PG_DSN = os.environ.get("TETHER_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("TETHER_REDIS_URL", "redis://127.0.0.1:6379/0")
LEASE_TTL = 5.0
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


# -- the agent every worker serves -------------------------------------------------


def make_agent() -> Any:
    """One tool round-trip then an answer; a task saying "gate" asks for an approved call instead."""
    from tether import Action, Agent, FunctionPolicy, tool

    @tool(effect="idempotent")
    async def step(n: int) -> int:
        """Take a step."""
        await asyncio.sleep(0.005)  # a tool that waits a little (an API call)
        return n

    @tool(effect="once", approval=True)
    async def refund(n: int) -> int:
        """Refund (a person approves first)."""
        return n

    def brain(context, tools):  # type: ignore[no-untyped-def]
        if any(m.role == "tool" for m in context):
            return "done"
        return Action("refund" if "gate" in context[0].content else "step", {"n": 1})

    return Agent(FunctionPolicy(brain), [step, refund], name="bench", lease_ttl=LEASE_TTL)


# -- the Celery side (the adapter is small; it is not shipped) ----------------------


def celery_app(store_url: str) -> Any:
    from celery import Celery

    app = Celery("tether_bench", broker=REDIS)
    app.conf.update(task_acks_late=True, task_reject_on_worker_lost=True, worker_prefetch_multiplier=4,
                    broker_connection_retry_on_startup=True, worker_hijack_root_logger=False)  # fmt: skip
    return app


class CeleryDispatcher:
    """submit = send a task to Redis; the worker below runs it on its event loop."""

    def __init__(self, app: Any, queue: str) -> None:
        self.app, self.queue = app, queue

    async def submit(self, run_id: str, agent: str, *, delay: float = 0.0) -> None:
        await asyncio.to_thread(
            self.app.send_task, "tether.advance", args=(run_id, agent), queue=self.queue, countdown=delay or None
        )


def celery_worker(store_url: str, queue: str, concurrency: int) -> None:
    from tether import LeaseConflict, StateError
    from tether.dispatch import Sweeper, tune_gc
    from tether.stores import open_store

    tune_gc()
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    store = open_store(store_url)
    agent = make_agent()
    agent.store = store
    app = celery_app(store_url)
    dispatcher = CeleryDispatcher(app, queue)
    sweeper = Sweeper(store, dispatcher, every=1.0, agents=[agent.name])
    asyncio.run_coroutine_threadsafe(sweeper.run(), loop)

    @app.task(name="tether.advance")
    def advance(run_id: str, name: str) -> None:
        async def go() -> None:
            with contextlib.suppress(LeaseConflict, StateError):  # a duplicate: harmless
                await agent.run(run_id=run_id)

        asyncio.run_coroutine_threadsafe(go(), loop).result()

    print("ready", flush=True)
    app.worker_main(["worker", "-Q", queue, "-P", "threads", "-c", str(concurrency), "--loglevel", "WARNING",
                     "--without-gossip", "--without-mingle", "--without-heartbeat"])  # fmt: skip


# -- cells ---------------------------------------------------------------------------


class Cell:
    """One engine, a fresh store schema and queue, and W worker processes."""

    def __init__(self, engine: str, workers: int, concurrency: int) -> None:
        self.engine, self.n_workers, self.concurrency = engine, workers, concurrency
        tag = uuid.uuid4().hex[:8]
        self.schema, self.queue = f"bench_eng_{tag}", f"bench_q_{tag}"
        self.store_url = f"{PG_DSN}?schema={self.schema}"
        self.procs: list[subprocess.Popen[str]] = []

    def start_worker(self) -> subprocess.Popen[str]:
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{HERE}"}
        if self.engine == "procrastinate":
            cmd = [sys.executable, "-m", "tether", "worker", "bench_engines:make_agent", "--store", self.store_url,
                   "--concurrency", str(self.concurrency), "--queue-schema", self.queue,
                   "--sweep-every", "1"]  # fmt: skip
        else:
            cmd = [sys.executable, __file__, "--celery-worker", self.store_url, self.queue, str(self.concurrency)]
        proc = subprocess.Popen(cmd, env=env, cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert proc.stdout is not None
        proc.stdout.readline()  # "tether worker: ..." or "ready"
        return proc

    async def __aenter__(self) -> Cell:
        from tether.stores.postgres import PostgresStore

        self.store = await PostgresStore.connect(PG_DSN, schema=self.schema)
        if self.engine == "procrastinate":
            from tether.dispatch.procrastinate import ProcrastinateDispatcher

            self.dispatcher: Any = await ProcrastinateDispatcher(PG_DSN, schema=self.queue).open()
        else:
            self.dispatcher = CeleryDispatcher(celery_app(self.store_url), self.queue)
        self.procs = [self.start_worker() for _ in range(self.n_workers)]
        await asyncio.sleep(1.0)  # workers connected and listening
        return self

    async def __aexit__(self, *exc: object) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait()
            if p.stdout:
                p.stdout.close()
        if self.engine == "procrastinate":
            await self.dispatcher.aclose()
        await self.store.aclose()
        import psycopg

        async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as conn:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
            await conn.execute(f'DROP SCHEMA IF EXISTS "{self.queue}" CASCADE')

    async def start_runs(self, n: int, task: str = "go", prefix: str = "r") -> list[str]:
        from tether import Message, RunStarted

        agent = make_agent()
        ids = [f"{prefix}{i}" for i in range(n)]
        for run_id in ids:
            first = RunStarted(run_id, (Message.user(task),), False, agent.fingerprint, agent.name)
            await self.store.append(run_id, [first], expected_seq=0)
        for i in range(0, n, 8):  # 8 at a time: the queue's connection pool holds 8
            await asyncio.gather(*(self.dispatcher.submit(r, agent.name) for r in ids[i : i + 8]))
        return ids

    async def count(self, status: str) -> int:
        return len(await self.store.list_runs(status, limit=1_000_000))


async def throughput(engine: str, workers: int, runs: int, concurrency: int = 32) -> dict[str, float]:
    async with Cell(engine, workers, concurrency) as cell:
        t0 = time.perf_counter()
        await cell.start_runs(runs)
        while await cell.count("finished") < runs:
            await asyncio.sleep(0.2)
        wall = time.perf_counter() - t0
        events = sum(i.seq for i in await cell.store.list_runs(limit=1_000_000))
    return {"runs_per_s": runs / wall, "events_per_s": events / wall, "wall_s": wall}


async def latency(engine: str, samples: int = 20) -> dict[str, float]:
    from tether import record_decisions

    async with Cell(engine, 2, 16) as cell:
        ids = await cell.start_runs(samples, task="gate", prefix="g")
        while await cell.count("paused") < samples:
            await asyncio.sleep(0.1)
        await asyncio.sleep(LEASE_TTL)  # no lease is live now, whatever the workers' clocks
        out = []
        for run_id in ids:
            t0 = time.time()
            await record_decisions(cell.store, run_id, lambda s: s.approve(s.open_calls[0].id, by="bench"))
            while True:
                events = await cell.store.load(run_id)
                decided = max(i for i, e in enumerate(events) if e.kind == "approval-decided")
                resumed = [e for e in events[decided:] if e.kind == "run-started"]
                if resumed:
                    out.append(resumed[0].at - t0)
                    break
                await asyncio.sleep(0.002)
    out.sort()
    return {"median_ms": statistics.median(out) * 1000, "p95_ms": out[int(0.95 * (len(out) - 1))] * 1000}


async def kill(engine: str, runs: int = 200) -> dict[str, float]:
    async with Cell(engine, 2, 64) as cell:
        gate_ids = await cell.start_runs(runs)
        await asyncio.sleep(0.3)
        victim = cell.procs[0]
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait()
        t0 = time.perf_counter()
        while await cell.count("finished") < runs:
            await asyncio.sleep(0.2)
        recovered = time.perf_counter() - t0
        events = {r: await cell.store.load(r) for r in gate_ids}
        resumes = sum(sum(1 for e in ev if e.kind == "run-started") - 1 for ev in events.values())
    return {"seconds_to_finish_all": recovered, "resumes_per_run": resumes / runs}


def main(quick: bool) -> None:
    print(f"bench_engines: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, lease TTL {LEASE_TTL} s\n")
    sizes = [1000] if quick else [1000, 10_000]
    print(f"{'engine':<15}{'workers':>8}{'runs':>7}{'runs/s':>9}{'events/s':>10}{'wall s':>8}")
    for engine in ("procrastinate", "celery"):
        for runs in sizes:
            if engine == "celery" and runs > 1000:
                continue
            for w in (1, 2, 4):
                r = asyncio.run(throughput(engine, w, runs))
                print(f"{engine:<15}{w:>8}{runs:>7}{r['runs_per_s']:>9.0f}{r['events_per_s']:>10.0f}"
                      f"{r['wall_s']:>8.1f}", flush=True)  # fmt: skip
    print(f"\n{'engine':<15}{'decision→resume median ms':>27}{'p95 ms':>8}{'kill -9: all done s':>21}")
    for engine in ("procrastinate", "celery"):
        lat, k = asyncio.run(latency(engine)), asyncio.run(kill(engine))
        print(f"{engine:<15}{lat['median_ms']:>27.0f}{lat['p95_ms']:>8.0f}{k['seconds_to_finish_all']:>21.1f}",
              flush=True)  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1:2] == ["--celery-worker"]:
        sys.path[:0] = [str(ROOT / "src")]
        celery_worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1:2] == ["--one"]:
        what, engine, *rest = sys.argv[2:]
        fn = {"throughput": throughput, "latency": latency, "kill": kill}[what]
        print(json.dumps(asyncio.run(fn(engine, *map(int, rest)))))
    else:
        main("--quick" in sys.argv)
