"""The two-worker kill -9 soak with the database's connections cut: shared by a slow test and a bench.

Two ``scale_worker.py`` processes (what ``tether worker`` runs: the Procrastinate
queue and the sweeper) advance runs of the durability suite's plans (``lookup``,
``put`` idempotent, ``send`` once, ``refund`` once and gated). Meanwhile:

* every so often every PostgreSQL backend of the workers is terminated
  (``pg_terminate_backend`` on their ``application_name``: the store's
  connections, the queue's pool, the ``LISTEN`` connections), which is what a
  database restart or a failover does to its clients;
* now and then a worker is killed with SIGKILL and started again;
* this process acts as the people: it approves each refund and answers each
  ``needs-decision`` (a ``once`` call a kill interrupted) with ``skip``.

A worker that exits by itself is counted (its log kept) and started again, so
the soak still ends and says how often that happened. The verdict is the
durability harness's judge (no lost run, no ``once`` effect twice, no effect
without its own committed start, notebooks equal to un-killed reference runs)
and the journal check that no run was advanced by two workers at once.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from dispatch.test_workers import (
    Workers,
    advanced_twice_at_once,
    be_the_people,
    journals_of,
    scale_plan,
    seed_and_submit,
)
from durability.conftest import pg_url
from durability.harness import PG_DSN, Lab, Story, judge, reference
from durability.worker import read_oracle
from tether.stores.postgres import PostgresStore

PARKED = ("finished", "paused", "needs-decision")


@dataclass
class ChaosReport:
    """What a soak did and what it found."""

    runs: int = 0
    kills: int = 0
    rounds: int = 0  # rounds of terminated backends
    backends: int = 0  # backends terminated, over all rounds
    exits: list[str] = field(default_factory=list)  # a worker that exited by itself: the end of its log
    lost: int = 0  # runs not finished when the soak ended
    problems: list[str] = field(default_factory=list)  # the judge's findings (doubled effects among them)
    twice: list[str] = field(default_factory=list)  # runs advanced by two workers at once
    executions: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def line(self) -> str:
        return (
            f"{self.runs} runs, {self.kills} kill -9, {self.rounds} rounds of terminated backends "
            f"({self.backends} backends), {len(self.exits)} worker exits, {self.lost} lost, "
            f"{len(self.problems)} problems, {len(self.twice)} advanced twice; calls {self.executions}; "
            f"{self.seconds:.1f} s"
        )


async def terminate(app: str) -> int:
    """Terminate every backend whose ``application_name`` is ``app``; how many there were."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = %s AND pid <> pg_backend_pid()",
            (app,),
        )
        row = await cur.fetchone()
    return int(row[0]) if row else 0


def chaos_soak(
    root: Path, store_schema: str, queue_schema: str, n: int, *, kills: int, rounds: int, seed: int,
    every: float = 0.6, budget: float = 240.0, concurrency: int = 10, delay: float = 0.02,
) -> ChaosReport:  # fmt: skip
    """Play ``n`` runs on two workers under ``kills`` kill -9 and ``rounds`` rounds of terminated backends."""
    rng = random.Random(seed)
    plans = {f"c{i}": scale_plan(rng, str(i)) for i in range(n)}
    expected = reference(plans, root / "reference")
    url = pg_url(store_schema)
    lab = Lab(root / "lab", url, plans)
    asyncio.run(seed_and_submit(url, queue_schema, plans, lab.root))
    stories = {r: Story() for r in plans}
    report = ChaosReport(runs=n)
    app = f"tether-chaos-{uuid.uuid4().hex[:8]}"
    workers = Workers(lab.root, url, queue_schema, 2, env={"PGAPPNAME": app}, concurrency=concurrency,
                      lease_ttl=3, model_delay=delay, tool_delay=delay)  # fmt: skip

    def hit(infos: list[object]) -> None:  # each run in flight may lose one commit's outcome or one reply
        for info in infos:
            stories[info.run_id].kills += info.status not in PARKED  # type: ignore[attr-defined]

    async def play() -> dict[str, list[str]]:
        store = await PostgresStore.connect(PG_DSN, schema=store_schema)
        try:
            start = time.monotonic()
            next_kill, next_cut = start + rng.uniform(0.5, 2.0), start + rng.uniform(0.2, every)
            while left := await be_the_people(store, stories):
                if time.monotonic() - start > budget:
                    report.lost = left
                    break
                for i, proc in enumerate(workers.procs):
                    if proc.poll() is not None:  # it exited by itself: the defect under test
                        report.exits.append(workers.logs[proc.pid].read_text()[-1500:])
                        assert proc.stdout is not None
                        proc.stdout.close()
                        workers.procs[i] = workers.start()
                now = time.monotonic()
                if report.rounds < rounds and now > next_cut:
                    hit(await store.list_runs(limit=100_000))
                    report.backends += await terminate(app)
                    report.rounds += 1
                    next_cut = now + rng.uniform(0.2, every)
                if workers.kills < kills and now > next_kill:
                    hit(await store.list_runs(limit=100_000))
                    workers.kill_one(rng)
                    next_kill = now + rng.uniform(1.0, 4.0)
                await asyncio.sleep(0.2)
            report.seconds = time.monotonic() - start
            return await journals_of(store, list(plans))
        finally:
            await store.aclose()

    try:
        journals = asyncio.run(play())
    finally:
        workers.stop()
    report.kills = workers.kills
    verdict = judge(lab, stories, expected)
    report.problems = verdict.problems
    report.executions = dict(verdict.executions)
    report.twice = advanced_twice_at_once(read_oracle(lab.oracle), journals, {r: s.kills for r, s in stories.items()})
    return report
