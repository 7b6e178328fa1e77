"""Test-side helpers for the durability suite: start and kill workers, decide like a human, judge.

A :class:`Lab` is one store, one oracle file and a set of plans. It starts the
worker (``worker.py``) as a real subprocess, optionally with
``TETHER_CRASH_AT``; it reads the store back through a fresh store object, as
another process would; and :func:`judge` compares what happened (store events,
oracle rows) with what tether promises:

* every run finished (after a human resolved ``needs-decision`` pauses);
* no side effect without its own committed ``tool-started`` (each oracle row's
  attempt names one, and no attempt ran twice);
* a ``once`` call ran at most once, plus once per ``retry`` a human chose;
* an ``idempotent`` call used one idempotency key on every execution;
* at most one extra model request per kill;
* the final notebook equals an un-killed reference run of the same plan, except
  for the results of calls a human skipped.

A plan that delegates (see ``worker.py``) is judged as a tree: every child run
by the same rules as its root, and each delegating call has exactly one child
run, started once (never a second one), and the store holds no other run.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tether import ModelReplied, RunStarted, RunState, ToolStarted, state_of
from tether.stores import RunStore
from tether.stores._open import open_store
from tether.stores.memory import MemoryStore
from tether.stores.sqlite import SQLiteStore

from . import worker
from .worker import EFFECTS, Ledger, Oracle, Plan, child_plans, read_oracle

WORKER = Path(__file__).with_name("worker.py")
PG_DSN = os.environ.get("TETHER_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
DONE = ("finished", "needs-decision", "paused")
T = TypeVar("T")


def with_store(url: str, fn: Callable[[RunStore], Awaitable[T]]) -> T:
    """Run ``fn(store)`` on a fresh store object (its own event loop and connection)."""

    async def go() -> T:
        store = open_store(url)
        try:
            return await fn(store)
        finally:
            await store.aclose()

    return asyncio.run(go())


@dataclass
class Incarnation:
    """One worker process that ran to its end (or was killed)."""

    returncode: int
    statuses: dict[str, str]
    stderr: str

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL


@dataclass
class Lab:
    """One store, one oracle, some plans, and the worker processes that drive them."""

    root: Path
    store_url: str
    plans: dict[str, Plan]
    model_delay: float = 0.0
    tool_delay: float = 0.0
    zygote: Zygote | None = None  # fork workers from it instead of starting Python afresh
    oracle: Path = field(init=False)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.oracle = self.root / "oracle.jsonl"
        (self.root / "plans.json").write_text(json.dumps(self.plans))

    def command(self, *flags: str) -> list[str]:
        return [
            sys.executable, str(WORKER), "--store", self.store_url, "--oracle", str(self.oracle),
            "--plans", str(self.root / "plans.json"), "--model-delay", str(self.model_delay),
            "--tool-delay", str(self.tool_delay), *flags,
        ]  # fmt: skip

    def start(self, *flags: str, crash_at: str | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.command(*flags), env=_env(crash_at), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def run(self, *flags: str, crash_at: str | None = None, timeout: float = 120) -> Incarnation:
        """Start a worker and wait for it to end."""
        if self.zygote is not None:
            return self.zygote.run(self.command(*flags)[2:], crash_at, self.root)
        return finish(self.start(*flags, crash_at=crash_at), timeout)

    def statuses(self, *, tree: bool = False) -> dict[str, str]:
        """The status of each planned run (with ``tree``, of every run in the store, children too)."""

        async def fn(store: RunStore) -> dict[str, str]:
            return {i.run_id: i.status for i in await store.list_runs(limit=1_000_000)}

        found = with_store(self.store_url, fn)
        planned = {r: found.get(r, "missing") for r in self.plans}
        children = {r: s for r, s in found.items() if "/" in r and r.split("/")[0] in self.plans}
        return {**children, **planned} if tree else planned

    def events(self) -> dict[str, list[Any]]:
        """The events of each planned run and of every other run in the store (child runs)."""

        async def fn(store: RunStore) -> dict[str, list[Any]]:
            found = [i.run_id for i in await store.list_runs(limit=1_000_000)]
            ids = [*self.plans, *(r for r in found if r.split("/")[0] in self.plans)]  # not other labs' runs
            return {r: await store.load(r) for r in dict.fromkeys(ids)}

        return with_store(self.store_url, fn)

    def decide(self, run_id: str, verdict: str) -> RunState:
        """A human in another process: ``verdict`` for interrupted calls, approve the rest (in the whole tree)."""
        rules = {"started": verdict, "awaiting-approval": "approve"}
        return with_store(self.store_url, lambda s: worker.record_decisions(s, run_id, rules))


class Zygote:
    """A running ``zygote.py`` fork server (see there); one request at a time."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER.with_name("zygote.py"))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env(None),
        )  # fmt: skip

    def run(self, argv: list[str], crash_at: str | None, root: Path) -> Incarnation:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        out, err = root / "worker.out", root / "worker.err"
        request = {"argv": argv, "crash_at": crash_at, "out": str(out), "err": str(err)}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline()
        if not reply:
            raise AssertionError(f"the fork server died (exit {self.proc.wait()})")
        return Incarnation(json.loads(reply)["returncode"], _statuses(out.read_text()), err.read_text())

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(30)
        self.proc.stdout.close()


def _env(crash_at: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("TETHER_CRASH_AT", None)
    if crash_at:
        env["TETHER_CRASH_AT"] = crash_at
    return env


def _statuses(out: str) -> dict[str, str]:
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {row["run"]: row["status"] for row in rows}


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> Incarnation:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"worker did not end within {timeout}s:\n{err[-3000:]}") from None
    return Incarnation(proc.returncode, _statuses(out), err)


def kill9(proc: subprocess.Popen[str]) -> Incarnation:
    """``kill -9`` from outside, then collect what the worker said."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    return finish(proc, 30)


def wait_ready(proc: subprocess.Popen[str], timeout: float = 30) -> None:
    """Block until the worker printed ``ready`` (its store is open)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    line = proc.stdout.readline()
    if line.strip() != "ready" or time.monotonic() > deadline:
        raise AssertionError(f"worker did not become ready: {line!r} {proc.poll()!r}")


# -- reference runs ---------------------------------------------------------------


def reference(plans: dict[str, Plan], root: Path) -> dict[str, list[dict[str, Any]]]:
    """The final notebook of each plan run in-process, un-killed, everything approved
    (and of each child run the plan delegates to, by its run id)."""

    async def go() -> dict[str, list[dict[str, Any]]]:
        oracle = Oracle(root / "reference-oracle.jsonl")
        out = {}
        for run_id, plan in plans.items():
            store = MemoryStore()
            agent = worker.build_agent(store, oracle, Ledger())
            status = await worker.drive(agent, store, run_id, plan, approve=True)
            assert status == "finished", (run_id, status)
            for info in await store.list_runs(limit=1_000_000):
                out[info.run_id] = messages_of(await store.load(info.run_id))
        return out

    root.mkdir(parents=True, exist_ok=True)
    return asyncio.run(go())


def messages_of(events: list[Any], skipped: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """The run's final notebook as dicts; results of ``skipped`` calls blanked out."""
    out = []
    for m in state_of(events).messages:
        d = m.to_dict()
        if d.get("tool_call_id") in skipped:
            d["content"], d["is_error"] = "<skipped by a human>", None
        out.append(d)
    return out


# -- judging ----------------------------------------------------------------------


@dataclass
class Story:
    """What the test did to one run: kills that hit it and the decisions it made."""

    kills: int = 0
    decisions: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    needs_decision: int = 0

    def note_decisions(self, state: RunState, prefix: str = "") -> None:
        """Remember the retry/skip decisions the test just recorded (made at ``state.seq``), in child
        runs too: those are keyed by their path from the root (``call_1_0/call_2_0``)."""
        for d in state.decisions:
            if d.by == "test" and d.state_seq == state.seq and d.verdict in ("retry", "skip"):
                self.decisions[prefix + d.call_id].append(d.verdict)
        for child in state.children:
            self.note_decisions(child, f"{prefix}{child.parent_call}/")

    def skipped(self) -> frozenset[str]:
        return frozenset(c for c, vs in self.decisions.items() if vs and vs[-1] == "skip")

    def view(self, prefix: str) -> Story:
        """The story of the child run at path ``prefix`` (``call_1_0/``): its own decisions, the root's kills."""
        mine = {k[len(prefix) :]: vs for k, vs in self.decisions.items() if k.startswith(prefix)}
        out = Story(self.kills, needs_decision=self.needs_decision)
        out.decisions.update({k: vs for k, vs in mine.items() if "/" not in k})
        return out


@dataclass
class Verdict:
    """Counts over all judged runs, and every broken promise found."""

    problems: list[str] = field(default_factory=list)
    executions: Counter[str] = field(default_factory=Counter)
    extra_model_calls: int = 0
    reordered_turns: int = 0
    repeated_answers: int = 0
    kills: int = 0
    runs: int = 0
    children: int = 0  # child runs judged (at any depth)
    second_children: int = 0  # delegating calls that started a child run more than once, or stray runs


def judge(
    lab: Lab, stories: dict[str, Story], expected: dict[str, list[dict[str, Any]]]
) -> Verdict:  # fmt: skip
    v = Verdict()
    rows = read_oracle(lab.oracle)
    by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_run[row["run"]].append(row)
    events = lab.events()
    statuses = lab.statuses(tree=True)
    planned: set[str] = set()
    for root_id, root_plan in lab.plans.items():
        story = stories.get(root_id, Story())
        v.runs += 1
        v.kills += story.kills
        tree = {root_id: root_plan, **child_plans(root_plan, root_id)}
        planned.update(tree)
        for run_id, plan in tree.items():
            sub = story.view(run_id[len(root_id) + 1 :] + "/") if run_id != root_id else story
            problems = judge_run(run_id, plan, events.get(run_id, []), statuses.get(run_id, "missing"),
                                 by_run[run_id], sub, v)  # fmt: skip
            problems += compare(run_id, events.get(run_id, []), expected[run_id], sub.skipped())
            if run_id != root_id:
                v.children += 1
                problems += judge_child(events.get(run_id, []), v)
            v.reordered_turns += reordered_turns(events.get(run_id, []))
            v.repeated_answers += repeated_answers(events.get(run_id, []))
            v.problems += [f"{run_id}: {p}" for p in problems]
    stray = sorted(set(events) - planned)
    v.second_children += len(stray)
    v.problems += [f"{r}: a run in the store that no plan delegated to" for r in stray]
    return v


def judge_child(events: list[Any], v: Verdict) -> list[str]:
    """A delegating call's child run was started once, and every later start resumed it."""
    fresh = [i for i, ev in enumerate(events) if isinstance(ev, RunStarted) and not ev.resumed]
    if fresh == [0]:
        return []
    v.second_children += 1
    return [f"the child run was started afresh at positions {fresh} (a second child)"]


def judge_run(
    run_id: str, plan: Plan, events: list[Any], status: str, rows: list[dict[str, Any]],
    story: Story, v: Verdict,
) -> list[str]:  # fmt: skip
    problems = [] if status == "finished" else [f"status is {status!r}, not finished"]
    started: dict[str, list[int]] = defaultdict(list)
    for ev in events:
        if isinstance(ev, ToolStarted):
            started[ev.call.id].append(ev.attempt)
    calls = [c for ev in events if isinstance(ev, ModelReplied) for c in ev.message.tool_calls]
    execs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row["ev"] == "tool":
            execs[row["call"]].append(row)
    for call in calls:
        if call.name == "delegate":  # its child run is judged on its own (judge_child)
            v.executions["delegate"] += 1
            continue
        problems += judge_call(run_id, call.id, call.name, execs.pop(call.id, []), started[call.id], story)
        v.executions[EFFECTS[call.name]] += 1
    problems += [f"executions of unknown call {c!r}" for c in execs]
    asked = sum(1 for row in rows if row["ev"] == "model")
    extra = asked - (len(plan) + 1)
    v.extra_model_calls += max(extra, 0)
    if extra > story.kills:
        problems.append(f"{asked} model requests for {len(plan) + 1} turns with {story.kills} kills")
    return problems


def judge_call(
    run_id: str, call_id: str, name: str, execs: list[dict[str, Any]], started: list[int], story: Story
) -> list[str]:  # fmt: skip
    problems = []
    attempts = [e["attempt"] for e in execs]
    if any(a not in started for a in attempts) or len(set(attempts)) != len(attempts):
        problems.append(f"{call_id} ({name}) ran as attempts {attempts}; committed starts {started}")
    if {e["key"] for e in execs} - {f"{run_id}:{call_id}"}:
        problems.append(f"{call_id} ({name}) saw idempotency keys {sorted({e['key'] for e in execs})}")
    verdicts = story.decisions.get(call_id, [])
    if EFFECTS[name] == "once" and len(execs) > 1 + verdicts.count("retry"):
        problems.append(f"once call {call_id} ({name}) ran {len(execs)} times; human retries: {verdicts}")
    if not execs and "skip" not in verdicts:
        problems.append(f"{call_id} ({name}) never ran and was not skipped")
    return problems


def compare(
    run_id: str, events: list[Any], expected: list[dict[str, Any]], skipped: frozenset[str]
) -> list[str]:  # fmt: skip
    """Problems if the notebook differs from the reference (within a turn, in any order).

    Two differences are set aside here and counted instead: the order of one
    turn's results (the notebook is append-only, so results committed before a
    crash come before those of calls re-run after it: :func:`reordered_turns`,
    by design), and a final answer asked for again after a crash that followed
    its commit (:func:`repeated_answers`, a known bug held by a strict xfail in
    test_resume_after_a_commit.py).
    """
    got = call_ordered(without_repeated_answer(messages_of(events, skipped)))
    want = call_ordered([
        {**m, "content": "<skipped by a human>", "is_error": None} if m.get("tool_call_id") in skipped else m
        for m in expected
    ])  # fmt: skip
    if got == want:
        return []
    first = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), min(len(got), len(want)))
    return [
        f"notebook differs from the reference at message {first}: "
        f"got {got[first : first + 1]!r}, want {want[first : first + 1]!r} ({len(got)} vs {len(want)} messages)"
    ]


def without_repeated_answer(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop a final answer that was asked for again after a crash (a known gap)."""
    out = list(messages)
    while len(out) >= 2 and all(m["role"] == "assistant" and not m.get("tool_calls") for m in out[-2:]):
        del out[-2]
    return out


def repeated_answers(events: list[Any]) -> int:
    return len(messages_of(events)) - len(without_repeated_answer(messages_of(events)))


def call_ordered(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The notebook with each turn's tool results put in the order of the calls."""
    out: list[dict[str, Any]] = []
    order: dict[str, int] = {}
    for m in messages:
        if m["role"] == "assistant":
            order = {c["id"]: i for i, c in enumerate(m.get("tool_calls", []))}
        out.append(m)
        i = len(out) - 1
        while (
            m["role"] == "tool"
            and i > 0
            and out[i - 1]["role"] == "tool"
            and _rank(out[i - 1], order) > _rank(m, order)
        ):
            out[i - 1], out[i] = out[i], out[i - 1]
            i -= 1
    return out


def _rank(m: dict[str, Any], order: dict[str, int]) -> int:
    return order.get(m.get("tool_call_id") or "", len(order))


def reordered_turns(events: list[Any]) -> int:
    """How many turns of the run have their results out of call order in the notebook."""
    count, order, last, bad = 0, {}, -1, False
    for m in messages_of(events):
        if m["role"] == "assistant":
            count += bad
            order, last, bad = {c["id"]: i for i, c in enumerate(m.get("tool_calls", []))}, -1, False
        elif m["role"] == "tool":
            rank = _rank(m, order)
            bad, last = bad or rank < last, rank
    return count + bad


# -- crash-matrix cells --------------------------------------------------------------


class MatrixCell(Protocol):
    """A crash-matrix cell: one run named ``m`` following ``plan``, judged as ``id``."""

    @property
    def id(self) -> str: ...

    @property
    def plan(self) -> Plan: ...


C = TypeVar("C", bound=MatrixCell)
Out = TypeVar("Out")


def play_matrix(
    cells: Sequence[C], root: Path, play: Callable[[C, Path, dict[str, Any], Zygote], Out], threads: int
) -> dict[str, Out]:  # fmt: skip
    """``play(cell, folder, expected notebooks, fork server)`` for every cell, ``threads`` at a time,
    each on a fork server of its own; the reference of each distinct plan is run once."""
    plans = {json.dumps(c.plan, sort_keys=True): c.plan for c in cells}
    refs = {key: reference({"m": plan}, root / f"ref-{i}") for i, (key, plan) in enumerate(plans.items())}
    zygotes: queue.Queue[Zygote] = queue.Queue()
    for _ in range(threads):
        zygotes.put(Zygote())

    def one(cell: C) -> Out:
        zygote = zygotes.get()
        try:
            return play(cell, root / cell.id, refs[json.dumps(cell.plan, sort_keys=True)], zygote)
        finally:
            zygotes.put(zygote)

    try:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            futures = {c.id: pool.submit(one, c) for c in cells}
            return {cid: f.result() for cid, f in futures.items()}
    finally:
        while not zygotes.empty():
            zygotes.get().close()


@dataclass
class Recovery:
    """One cell played: whether each planned kill fired, what the human did, the store after each worker."""

    fired: list[bool] = field(default_factory=list)
    story: Story = field(default_factory=Story)
    integrity: list[str] = field(default_factory=list)


def kill_and_recover(
    lab: Lab, crash_at: str | None, verdict: str, *, crashes: int = 1, flags: Sequence[str] = ()
) -> Recovery:  # fmt: skip
    """Start the worker to be killed (``crash_at``, or ``flags`` such as ``--kill-after``), then resume
    (``--resume --approve-all``) until run ``m`` finishes, answering ``needs-decision`` with ``verdict``
    from another process; with ``crashes=2`` the worker after the first answer is killed the same way.
    The SQLite store's ``PRAGMA integrity_check`` is taken after every worker."""
    out = Recovery()
    crashes_left = crashes - 1
    inc = lab.run("--approve-all", *flags, crash_at=crash_at)
    out.fired.append(inc.killed)
    out.story.kills += inc.killed
    out.integrity.append(SQLiteStore(lab.store_url).integrity_check())
    for _ in range(8):
        status = lab.statuses()["m"]
        if status == "finished":
            break
        if status == "needs-decision":
            out.story.needs_decision += 1
            out.story.note_decisions(lab.decide("m", verdict))
        again = bool(crashes_left and out.story.needs_decision)
        inc = lab.run("--resume", "--approve-all", *(flags if again else ()), crash_at=crash_at if again else None)
        if again:
            crashes_left -= 1
            out.fired.append(inc.killed)
        out.story.kills += inc.killed
        out.integrity.append(SQLiteStore(lab.store_url).integrity_check())
    return out
