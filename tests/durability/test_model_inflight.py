"""Kill -9 while the model request is in flight.

The brain "thinks" for a random while (``--model-delay``), as a provider request
would take. The oracle records each request when it is sent and its reply when
it comes back, so a request with no reply from the killed process was in flight
at the kill. The test kills the worker only while requests are in flight,
until ``TETHER_D36_TRIALS`` (default 100) run-kills hit a pending request.

Pass: each in-flight kill costs exactly one repeated request (the reply is
lost, nothing else is: the reply is committed before any tool runs); at most
one extra request per kill overall; no tool runs twice; every run finishes
with the same notebook as an un-killed run.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from pathlib import Path

from .harness import Lab, Story, finish, judge, kill9, reference, wait_ready
from .worker import read_oracle

TRIALS = int(os.environ.get("TETHER_D36_TRIALS", "100"))
RUNS = 60


def in_flight(lab: Lab, pid: int) -> set[str]:
    """Runs with a model request sent by ``pid`` and no reply yet."""
    sent: Counter[str] = Counter()
    for row in read_oracle(lab.oracle):
        if row["pid"] == pid and row["ev"] in ("model", "reply"):
            sent[row["run"]] += 1 if row["ev"] == "model" else -1
    return {run for run, n in sent.items() if n > 0}


def test_kill9_during_model_requests_costs_one_request_per_kill(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("TETHER_SOAK_SEED", "36")))
    plans = {f"m{i}": [[["send", {"to": f"u{i}", "text": f"step {t}"}]] for t in range(3)] for i in range(RUNS)}
    lab = Lab(tmp_path, str(tmp_path / "runs.db"), plans, model_delay=0.25)
    stories = {r: Story() for r in plans}
    inflight_kills: Counter[str] = Counter()
    for _ in range(40):
        proc = lab.start("--resume")
        wait_ready(proc)
        if sum(inflight_kills.values()) < TRIALS:
            time.sleep(rng.uniform(0, 0.25))
            hit: set[str] = set()
            while proc.poll() is None and not (hit := in_flight(lab, proc.pid)):
                time.sleep(0.002)
            if proc.poll() is None:
                kill9(proc)
                hit = in_flight(lab, proc.pid)  # what was really pending when it died
                inflight_kills.update(hit)
                for run_id, status in lab.statuses().items():
                    stories[run_id].kills += status != "finished"
        assert finish(proc).returncode in (0, -9)
        for run_id, status in lab.statuses().items():
            if status == "needs-decision":  # a kill that also caught a send mid-call
                stories[run_id].note_decisions(lab.decide(run_id, "skip"))
        if all(s == "finished" for s in lab.statuses().values()):
            break
    verdict = judge(lab, stories, reference(plans, tmp_path / "reference"))
    assert verdict.problems == []
    assert sum(inflight_kills.values()) >= TRIALS
    asked = Counter(r["run"] for r in read_oracle(lab.oracle) if r["ev"] == "model")
    for run_id in plans:
        extra = asked[run_id] - 4
        assert inflight_kills[run_id] <= extra <= stories[run_id].kills, run_id
    sends = Counter((r["run"], r["call"]) for r in read_oracle(lab.oracle) if r["ev"] == "tool")
    assert max(sends.values()) == 1  # no tool ran twice
    print(
        f"D.36: {sum(inflight_kills.values())} run-kills with a request in flight, "
        f"{sum(s.kills for s in stories.values())} run-kills in all, "
        f"{sum(asked.values()) - 4 * RUNS} extra requests, {len(sends)} sends, 0 repeated"
    )
