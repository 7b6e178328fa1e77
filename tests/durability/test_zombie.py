"""Two workers on one run; a zombie worker that wakes up after a takeover.

A worker holds a run's lease while it advances it (renewed while it is alive);
every commit names the lease and the length its writer last saw
(``expected_seq``), and the store refuses it if the lease changed hands or the
run moved on, with :class:`~tether.LeaseConflict`. Since a tool runs only after
its ``tool-started`` commit succeeded, a worker that lost the run cannot start
anything more.

* Races: ``TETHER_RACES`` runs (default 50) are left as a crash right after
  the model's reply would leave them (calls proposed, none started). Two worker
  processes resume all of them at once; a barrier in their store wrapper makes
  both reach each run's lease before either takes it, so every run is a real
  race. Exactly one worker advances each run; the other gets ``LeaseConflict``
  and the oracle shows it executed nothing.
* Zombie: a worker (lease of 3 s) is SIGSTOPped while its calls hang after
  their effect; once its lease has expired a second worker takes the runs over
  (the idempotent call is re-run with the same key, the ``once`` call waits for
  a human); the zombie is SIGCONTed and its late results are refused. While
  the lease is live, a second worker is refused at once.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from tether import ToolFinished
from tether.stores import RunStore
from tether.testing import CrashingStore, SimulatedCrash

from . import worker
from .conftest import pg_url
from .harness import Lab, Story, finish, judge, reference, wait_ready, with_store
from .worker import Ledger, Oracle, Plan, read_oracle

RACES = int(os.environ.get("TETHER_RACES", "50"))
BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def left_after_reply(lab: Lab) -> None:
    """Start every run and leave it just after its first reply is committed."""

    async def fn(store: RunStore) -> None:
        agent = worker.build_agent(CrashingStore(store, "model-replied", repeat=True), Oracle(lab.oracle), Ledger())
        for run_id, plan in lab.plans.items():
            with pytest.raises(SimulatedCrash):
                await agent.run(worker.task_text(run_id, plan), run_id=run_id)

    with_store(lab.store_url, fn)


def store_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return str(tmp_path / "runs.db")
    return pg_url(request.getfixturevalue("pg_schema"))


def race_plan(i: int) -> Plan:
    return [
        [["send", {"to": f"u{i}", "text": "hello"}], ["put", {"key": f"k{i}", "value": "v"}],
         ["lookup", {"key": f"k{i}"}]],
        [["send", {"to": f"u{i}", "text": "bye"}]],
    ]  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_workers_resume_one_run_exactly_one_advances_it(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:  # fmt: skip
    plans = {f"race{i}": race_plan(i) for i in range(RACES)}
    lab = Lab(tmp_path, store_url(backend, tmp_path, request), plans)
    left_after_reply(lab)
    (tmp_path / "barrier").mkdir()
    flags = ("--resume", "--barrier", str(tmp_path / "barrier"), "--parties", "2")
    procs = [lab.start(*flags), lab.start(*flags)]
    a, b = (finish(p) for p in procs)
    assert (a.returncode, b.returncode) == (0, 0), a.stderr[-2000:] + b.stderr[-2000:]
    pids = [p.pid for p in procs]
    winners: Counter[int] = Counter()
    tool_rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in read_oracle(lab.oracle):
        if row["ev"] == "tool":
            tool_rows[row["run"]].append(row)
    for run_id in plans:
        outcome = sorted([a.statuses[run_id][:14], b.statuses[run_id][:14]])
        assert outcome == ["finished", "lease-conflict"], (run_id, a.statuses[run_id], b.statuses[run_id])
        winner = pids[0] if a.statuses[run_id] == "finished" else pids[1]
        winners[winner] += 1
        # The loser executed nothing; the winner executed every call exactly once.
        assert {r["pid"] for r in tool_rows[run_id]} == {winner}
        assert sorted(Counter(r["call"] for r in tool_rows[run_id]).values()) == [1, 1, 1, 1]
    verdict = judge(lab, {}, reference(plans, tmp_path / "reference"))
    assert verdict.problems == []
    print(f"{backend}: {RACES} races, wins per worker {sorted(winners.values())}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_zombie_worker_cannot_commit_after_a_takeover(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:  # fmt: skip
    plans = {f"z{i}": [[["put", {"key": f"k{i}", "value": "v"}], ["send", {"to": f"u{i}", "text": "hi"}]]]
             for i in range(10)}  # fmt: skip
    lab = Lab(tmp_path, store_url(backend, tmp_path, request), plans)
    zombie = lab.start("--stall", "8", "--lease-ttl", "3")
    wait_ready(zombie)
    deadline = time.monotonic() + 30
    while sum(r["ev"] == "tool" for r in read_oracle(lab.oracle)) < 2 * len(plans):
        assert time.monotonic() < deadline and zombie.poll() is None, "the zombie never reached its tools"
        time.sleep(0.01)
    os.kill(zombie.pid, signal.SIGSTOP)
    try:
        early = lab.run("--resume")  # the stalled worker's leases are still live
        assert {s[:14] for s in early.statuses.values()} == {"lease-conflict"}
        time.sleep(3.5)  # past its lease
        takeover = lab.run("--resume")
    finally:
        os.kill(zombie.pid, signal.SIGCONT)
    late = finish(zombie)
    assert set(takeover.statuses.values()) == {"needs-decision"}
    assert {s[:14] for s in late.statuses.values()} == {"lease-conflict"}, late.stderr[-2000:]
    events = lab.events()
    rows = [r for r in read_oracle(lab.oracle) if r["ev"] == "tool"]
    for run_id in plans:
        by_tool = Counter(r["tool"] for r in rows if r["run"] == run_id)
        assert by_tool == {"put": 2, "send": 1}  # put re-run by the new worker; send never repeated
        finished = [e.result.name for e in events[run_id] if isinstance(e, ToolFinished)]
        assert finished == ["put"]  # the zombie's two late results were refused
    stories = {r: Story() for r in plans}
    for run_id in plans:
        stories[run_id].note_decisions(lab.decide(run_id, "skip"))
    lab.run("--resume")
    verdict = judge(lab, stories, reference(plans, tmp_path / "reference"))
    assert verdict.problems == []
    assert set(lab.statuses().values()) == {"finished"}
