"""Worker processes on the shared PostgreSQL, fed by the real queue, killed and stalled.

Four ``scale_worker.py`` processes (what ``tether worker`` runs) share one
store and one Procrastinate queue. 400 runs mix ``lookup`` (no effect), ``put``
(idempotent), ``send`` (once) and ``refund`` (once, approval-gated); the test
kills a random worker with SIGKILL at random moments and starts it again, and
acts as the people: from this process it approves each refund and answers each
``needs-decision`` (a ``once`` call a kill interrupted) with ``skip``. Pass:
every run finishes; the durability harness's judge finds no problem (no lost
run, no ``once`` effect twice, no effect without its own committed start, one
idempotency key per call, notebooks equal to un-killed reference runs); and the
journal shows no run advanced by two workers at once (each position written
once, under fencing tokens that never go back).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from durability.conftest import pg_url
from durability.harness import PG_DSN, Lab, Story, judge, reference
from durability.soak import in_turns, random_call
from durability.worker import Ledger, Oracle, Plan, build_agent, read_oracle, record_decisions, task_text
from tether import LeaseConflict, Message, RunStarted, StateError
from tether.dispatch.procrastinate import ProcrastinateDispatcher
from tether.stores.postgres import PostgresStore

pytestmark = [pytest.mark.postgres]
WORKER = Path(__file__).with_name("scale_worker.py")
SEED = int(os.environ.get("TETHER_SOAK_SEED", random.randrange(2**31)))


def scale_plan(rng: random.Random, tag: str) -> Plan:
    """2 to 5 calls of the three effects, and in two runs of five a refund a person approves."""
    calls = [random_call(rng, tag, i) for i in range(rng.randint(2, 5))]
    if rng.random() < 0.4:
        calls.insert(rng.randrange(len(calls) + 1), ["refund", {"order": f"o-{tag}", "amount": rng.randint(1, 99)}])
    return in_turns(rng, calls, most=3)


class Workers:
    """Worker processes, each started again after it is killed."""

    def __init__(
        self, root: Path, store_url: str, queue: str, n: int, *, env: dict[str, str] | None = None, **flags: Any
    ) -> None:
        self.root, self.store_url, self.queue = root, store_url, queue
        self.env = {**os.environ, **env} if env else None  # PGAPPNAME: a test can find their connections
        self.flags = [x for k, v in flags.items() for x in (f"--{k.replace('_', '-')}", str(v))]
        self.logs: dict[int, Path] = {}
        self.procs: list[subprocess.Popen[str]] = []
        self.kills = 0
        try:
            for _ in range(n):
                self.procs.append(self.start())
        except BaseException:  # never leave a worker behind
            self.stop()
            raise

    def start(self, *extra: str) -> subprocess.Popen[str]:
        cmd = [sys.executable, str(WORKER), "--store", self.store_url, "--queue-schema", self.queue,
               "--oracle", str(self.root / "oracle.jsonl"), *self.flags, *extra]  # fmt: skip
        log = self.root / f"worker-{time.monotonic_ns()}.err"
        with log.open("w") as err:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=self.env)
        self.logs[proc.pid] = log
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            proc.kill()
            proc.wait()
            proc.stdout.close()
            raise AssertionError(f"a worker did not start: {log.read_text()[-2000:]}")
        return proc

    def kill_one(self, rng: random.Random) -> None:
        i = rng.randrange(len(self.procs))
        os.kill(self.procs[i].pid, signal.SIGKILL)
        self.procs[i].wait()
        self.procs[i].stdout.close()  # type: ignore[union-attr]
        self.kills += 1
        self.procs[i] = self.start()

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait()
            assert p.stdout is not None
            p.stdout.close()


async def seed_and_submit(url: str, queue: str, plans: dict[str, Plan], root: Path) -> None:
    """Start every run in the store (its first event), and queue it for the workers."""
    agent = build_agent(None, Oracle(root / "unused.jsonl"), Ledger())
    store = PostgresStore(PG_DSN, schema=url.rpartition("schema=")[2])
    async with ProcrastinateDispatcher(PG_DSN, schema=queue) as dispatcher:
        for run_id, plan in plans.items():
            first = RunStarted(run_id, (Message.user(task_text(run_id, plan)),), False, agent.fingerprint, agent.name)
            await store.append(run_id, [first], expected_seq=0)
            await dispatcher.submit(run_id, agent.name)
    await store.aclose()


async def be_the_people(store: PostgresStore, stories: dict[str, Story]) -> int:
    """Approve every waiting refund and skip every interrupted ``once`` call; how many runs are left."""
    left = 0
    for info in await store.list_runs(limit=100_000):
        if info.status == "finished" or "/" in info.run_id:
            continue
        left += 1
        if info.status not in ("paused", "needs-decision"):
            continue
        try:
            state = await record_decisions(store, info.run_id, {"started": "skip", "awaiting-approval": "approve"})
        except (LeaseConflict, StateError):
            continue  # a worker is still letting go of it, or it moved on: look again
        before = sum(map(len, stories[info.run_id].decisions.values()))
        stories[info.run_id].note_decisions(state)
        if info.status == "needs-decision" and sum(map(len, stories[info.run_id].decisions.values())) > before:
            stories[info.run_id].needs_decision += 1
    return left


def advanced_twice_at_once(
    rows: list[dict[str, Any]], journals: dict[str, list[str]], kills: dict[str, int]
) -> list[str]:  # fmt: skip
    """From the journal (each run's event kinds) and the appends the workers noted: runs with a
    position written twice, or by nobody (beyond one per kill: a worker killed between its commit
    and its note), or whose fencing tokens go back along the journal, or with a token held by two
    owners. The people wrote the first event and the decisions."""
    by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row["ev"] == "append":
            by_run[row["run"]].append(row)
    problems = []
    for run_id, kinds in journals.items():
        appends = sorted(by_run.get(run_id, []), key=lambda r: r["first"])
        positions = [p for r in appends for p in range(r["first"], r["first"] + r["n"])]
        people = [i for i, k in enumerate(kinds, 1) if i == 1 or k == "approval-decided"]
        written = positions + people
        unnoted = set(range(1, len(kinds) + 1)) - set(written)
        if len(written) != len(set(written)) or set(written) - set(range(1, len(kinds) + 1)):
            problems.append(f"{run_id}: workers wrote positions {positions}, people {people}, journal {kinds}")
        if len(unnoted) > kills.get(run_id, 0):
            problems.append(f"{run_id}: positions {sorted(unnoted)} written by no worker, {kills.get(run_id)} kills")
        tokens = [r["token"] for r in appends]
        if tokens != sorted(tokens):
            problems.append(f"{run_id}: fencing tokens went back along the journal: {tokens}")
        owners: dict[int, set[str]] = defaultdict(set)
        for r in appends:
            owners[r["token"]].add(r["owner"])
        if any(len(o) > 1 for o in owners.values()):
            problems.append(f"{run_id}: one token, several owners: {dict(owners)}")
    return problems


async def journals_of(store: PostgresStore, run_ids: list[str]) -> dict[str, list[str]]:
    return {r: [ev.kind for ev in await store.load(r)] for r in run_ids}


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_four_workers_killed_at_random_lose_nothing_and_repeat_no_effect(
    tmp_path: Path, store_schema: str, queue_schema: str
) -> None:
    rng = random.Random(SEED)
    plans = {f"w{i}": scale_plan(rng, str(i)) for i in range(400)}
    expected = reference(plans, tmp_path / "reference")
    url = pg_url(store_schema)
    lab = Lab(tmp_path / "lab", url, plans)
    asyncio.run(seed_and_submit(url, queue_schema, plans, lab.root))
    stories = {r: Story() for r in plans}
    workers = Workers(lab.root, url, queue_schema, 4, concurrency=25, lease_ttl=3, model_delay=0.01,
                      tool_delay=0.01)  # fmt: skip

    async def play() -> dict[str, list[str]]:
        store = await PostgresStore.connect(PG_DSN, schema=store_schema)
        try:
            next_kill, deadline = time.monotonic() + rng.uniform(0.1, 0.8), time.monotonic() + 180
            t0 = time.monotonic()
            while left := await be_the_people(store, stories):
                if int(time.monotonic() - t0) % 5 == 0:
                    print(f"{time.monotonic() - t0:.1f}s: {left} runs left", flush=True)
                assert time.monotonic() < deadline, f"runs left: {await be_the_people(store, stories)}"
                if workers.kills < 6 and time.monotonic() > next_kill:
                    for info in await store.list_runs(limit=100_000):
                        stories[info.run_id].kills += info.status not in ("finished", "paused", "needs-decision")
                    workers.kill_one(rng)
                    next_kill = time.monotonic() + rng.uniform(0.1, 0.8)
                await asyncio.sleep(0.2)
            return await journals_of(store, list(plans))
        finally:
            await store.aclose()

    try:
        journals = asyncio.run(play())
    finally:
        workers.stop()
    verdict = judge(lab, stories, expected)
    rows = read_oracle(lab.oracle)
    print(f"seed {SEED}: {len(plans)} runs, {workers.kills} kill -9, {dict(verdict.executions)} calls, "
          f"{sum(s.needs_decision for s in stories.values())} needs-decision, {verdict.extra_model_calls} extra "
          f"model requests, {sum(r['ev'] == 'append' for r in rows)} appends")  # fmt: skip
    assert workers.kills >= 3  # up to 6, while runs were in flight
    assert verdict.runs == 400 and verdict.problems == [], f"seed {SEED}: {verdict.problems[:10]}"
    assert verdict.executions["once"] > 0 and verdict.executions["idempotent"] > 0
    assert any("refund" in json.dumps(p) for p in plans.values())
    assert advanced_twice_at_once(rows, journals, {r: s.kills for r, s in stories.items()}) == []


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_stalled_worker_is_taken_over_and_cannot_commit_when_it_wakes(
    tmp_path: Path, store_schema: str, queue_schema: str
) -> None:
    plans: dict[str, Plan] = {"st": [[["put", {"key": "k", "value": "v"}]], [["lookup", {"key": "k"}]]]}
    expected = reference(plans, tmp_path / "reference")
    url = pg_url(store_schema)
    lab = Lab(tmp_path / "lab", url, plans)
    asyncio.run(seed_and_submit(url, queue_schema, plans, lab.root))
    stalled = Workers(lab.root, url, queue_schema, 1, concurrency=2, lease_ttl=2, stall=6)
    a = stalled.procs[0]
    try:
        while not any(r["ev"] == "tool" and r["pid"] == a.pid for r in read_oracle(lab.oracle)):
            time.sleep(0.05)
        os.kill(a.pid, signal.SIGSTOP)  # stalled in the tool, past its lease
        rescuer = Workers(lab.root, url, queue_schema, 1, concurrency=2, lease_ttl=2)
        b = rescuer.procs[0]
        try:
            while lab.statuses()["st"] != "finished":
                time.sleep(0.1)
            os.kill(a.pid, signal.SIGCONT)  # it wakes, finishes its tool, and tries to commit
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not _refused(stalled.logs[a.pid]):
                time.sleep(0.2)
        finally:
            rescuer.stop()
    finally:
        os.kill(a.pid, signal.SIGCONT)
        stalled.stop()
    rows = read_oracle(lab.oracle)
    assert any(r["ev"] == "tool" and r["pid"] == b.pid for r in rows)  # the rescuer ran the idempotent call again
    taken_over_at = min(r["first"] for r in rows if r["ev"] == "append" and r["pid"] == b.pid)
    assert [r for r in rows if r["ev"] == "append" and r["pid"] == a.pid and r["first"] >= taken_over_at] == []
    assert _refused(stalled.logs[a.pid])  # it did try to commit, and was refused
    story = Story(kills=1)
    verdict = judge(lab, {"st": story}, expected)
    assert verdict.problems == []
    journals = asyncio.run(_journals(store_schema, ["st"]))
    assert advanced_twice_at_once(rows, journals, {}) == []


def _refused(log: Path) -> bool:
    """The worker's log says its commit to run ``st`` was refused (the lease, or the position, had moved on)."""
    return "run 'st' not advanced: run 'st'" in log.read_text()


async def _journals(schema: str, run_ids: list[str]) -> dict[str, list[str]]:
    store = await PostgresStore.connect(PG_DSN, schema=schema)
    try:
        return await journals_of(store, run_ids)
    finally:
        await store.aclose()
