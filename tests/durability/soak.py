"""The random kill -9 soak, shared by the SQLite and PostgreSQL tests.

Runs are played in batches; one worker process drives a whole batch at once,
with random model and tool latencies so the runs drift apart. The test kills
the worker with SIGKILL at a uniformly random point of the work left (measured
in oracle rows, the worker's progress clock), up to ``KILLS`` times per batch,
and starts it again each time; after every kill it
checks the store (SQLite: ``PRAGMA integrity_check``) and answers every
``needs-decision`` pause with ``skip``, as an operator would. A kill counts for
each run that was neither finished nor parked at that moment.

Sizes come from the environment so a nightly job can run bigger soaks:
``TETHER_SOAK_RUNS`` (default 200), ``TETHER_SOAK_BATCH`` (runs per worker,
default 50), ``TETHER_SOAK_SEED`` (default: random, printed).

The nested soak plays run trees (:func:`random_tree_plan`: a parent delegating
to one or two child runs, some of which delegate to a grandchild, every level
mixing the three effects, delegations side by side with other calls of a turn):
``TETHER_NESTED_SOAK_RUNS`` (default 100) and ``TETHER_NESTED_SOAK_BATCH``
(default 25).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .harness import DONE, Lab, Story, Verdict, finish, judge, kill9, reference, wait_ready
from .worker import Plan, read_oracle

RUNS = int(os.environ.get("TETHER_SOAK_RUNS", "200"))
BATCH = int(os.environ.get("TETHER_SOAK_BATCH", "50"))
NESTED_RUNS = int(os.environ.get("TETHER_NESTED_SOAK_RUNS", "100"))
NESTED_BATCH = int(os.environ.get("TETHER_NESTED_SOAK_BATCH", "25"))
KILLS = 3
MODEL_DELAY = 0.04  # mean seconds per model request (uniform in [0, 2x])
TOOL_DELAY = 0.03  # mean seconds per tool call
TOOLS = ("lookup", "put", "send")


def random_plan(rng: random.Random, tag: str) -> Plan:
    """3 to 8 calls of the three effect kinds, spread over 1 to 4 turns."""
    return in_turns(rng, [random_call(rng, tag, i) for i in range(rng.randint(3, 8))])


def random_call(rng: random.Random, tag: str, i: int) -> list[Any]:
    name = rng.choice(TOOLS)
    if name == "lookup":
        return [name, {"key": f"{tag}-k{i}"}]
    if name == "put":
        return [name, {"key": f"{tag}-k{i}", "value": f"v{rng.randrange(1000)}"}]
    return [name, {"to": f"user{rng.randrange(100)}", "text": f"note {tag}/{i}"}]


def in_turns(rng: random.Random, calls: list[list[Any]], most: int = 4) -> Plan:
    """``calls`` cut into 1 to ``most`` turns, in order."""
    n = len(calls)
    cuts = sorted(rng.sample(range(1, n), rng.randint(0, min(most - 1, n - 1))))
    return [calls[a:b] for a, b in zip([0, *cuts], [*cuts, n], strict=True)]


def random_tree_plan(rng: random.Random, tag: str, depth: int = 0) -> Plan:
    """A run tree: the parent has 1 to 4 calls and 1 or 2 delegations (in 1 to 3 turns); a child
    1 to 4 calls and, one time in three, a delegation to a grandchild of 1 to 3 calls."""
    sizes = ((1, 4), (1, 4), (1, 3))[depth]
    calls = [random_call(rng, f"{tag}.{depth}", i) for i in range(rng.randint(*sizes))]
    delegations = rng.randint(1, 2) if depth == 0 else int(depth == 1 and rng.random() < 1 / 3)
    for d in range(delegations):
        sub = random_tree_plan(rng, f"{tag}.{d}", depth + 1)
        calls.insert(rng.randrange(len(calls) + 1), ["delegate", {"plan": sub}])
    return in_turns(rng, calls, most=3)


@dataclass
class SoakReport:
    """What one soak did and found."""

    verdict: Verdict = field(default_factory=Verdict)
    kills: int = 0
    kills_per_run: dict[int, int] = field(default_factory=dict)
    skipped_calls: int = 0
    lost: list[str] = field(default_factory=list)
    store_checks: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, v: Verdict, stories: dict[str, Story]) -> None:
        total = self.verdict
        total.problems += v.problems
        total.executions += v.executions
        total.extra_model_calls += v.extra_model_calls
        total.reordered_turns += v.reordered_turns
        total.repeated_answers += v.repeated_answers
        total.runs += v.runs
        total.kills += v.kills
        total.children += v.children
        total.second_children += v.second_children
        for s in stories.values():
            self.kills_per_run[s.kills] = self.kills_per_run.get(s.kills, 0) + 1
            self.skipped_calls += len(s.skipped())

    def line(self, name: str, seed: int) -> str:
        v = self.verdict
        tree = f" ({v.children} child runs, {v.second_children} second children)" if v.children else ""
        return (
            f"{name} soak (seed {seed}): {v.runs} runs{tree}, {self.kills} kill -9, kills per run "
            f"{dict(sorted(self.kills_per_run.items()))}, {sum(v.executions.values())} calls "
            f"{dict(v.executions)}, {self.skipped_calls} skipped after needs-decision, "
            f"{v.extra_model_calls} extra model requests, {v.reordered_turns} turns with results "
            f"out of call order, {v.repeated_answers} final answers asked twice, {len(self.lost)} lost, "
            f"{len(v.problems)} problems; {self.seconds:.1f}s"
        )


def soak(
    root: Path, store_url: Callable[[int], str], check_store: Callable[[Lab], str], seed: int,
    runs: int = RUNS, batch: int = BATCH, plan: Callable[[random.Random, str], Plan] = random_plan,
) -> SoakReport:  # fmt: skip
    """Play ``runs`` runs in batches; ``check_store`` returns "ok" or a problem."""
    t0 = time.monotonic()
    rng = random.Random(seed)
    report = SoakReport()
    for b, start in enumerate(range(0, runs, batch)):
        plans = {f"s{b}-{i}": plan(rng, f"{b}-{i}") for i in range(start, min(runs, start + batch))}
        expected = reference(plans, root / f"reference{b}")
        work = len(read_oracle(root / f"reference{b}" / "reference-oracle.jsonl"))
        lab = Lab(root / f"batch{b}", store_url(b), plans, MODEL_DELAY, TOOL_DELAY)
        stories = play_batch(lab, rng, check_store, report, work)
        report.add(judge(lab, stories, expected), stories)
    report.seconds = time.monotonic() - t0
    return report


def play_batch(
    lab: Lab, rng: random.Random, check_store: Callable[[Lab], str], report: SoakReport, work: int
) -> dict[str, Story]:  # fmt: skip
    """Kill the batch's worker up to KILLS times, each at a uniformly random point of the work left.

    ``work`` is the number of oracle rows (model requests, replies, tool
    effects) an un-killed run of the batch writes; the oracle is the progress
    clock, so kills spread over the whole run instead of bunching at its start.
    """
    stories = {r: Story() for r in lab.plans}
    kills = 0
    clock = Progress(lab.oracle)
    for _ in range(KILLS + 10):
        proc = lab.start("--resume")
        wait_ready(proc)
        if kills < KILLS:
            now = clock.rows()
            target = now + rng.randint(1, max(1, work - now))
            while proc.poll() is None and clock.rows() < target:
                time.sleep(0.001)
            if proc.poll() is None:
                kill9(proc)
                kills += 1
                report.kills += 1
                for run_id, status in lab.statuses().items():
                    stories[run_id].kills += status not in DONE
                report.store_checks.append(check_store(lab))
        inc = finish(proc)
        assert inc.returncode in (0, -9), inc.stderr[-3000:]
        for run_id, status in lab.statuses().items():
            if status == "needs-decision":
                stories[run_id].needs_decision += 1
                stories[run_id].note_decisions(lab.decide(run_id, "skip"))
        if all(s == "finished" for s in lab.statuses().values()):
            break
    report.lost += [r for r, s in lab.statuses().items() if s != "finished"]
    return stories


class Progress:
    """Counts the lines of a growing file without reading it again from the start."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.count = path, 0, 0

    def rows(self) -> int:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
            return 0
        self.offset += len(chunk)
        self.count += chunk.count(b"\n")
        return self.count
