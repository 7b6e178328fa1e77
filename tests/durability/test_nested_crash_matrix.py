"""Issue 11: the crash matrix across two levels of a run tree (a parent delegating to a child run).

The parent's plan is one delegating call, ``["delegate", {"plan": CHILD}]``; the
child run (``m/call_1_0``, the next agent down used as a tool, see
``worker.py``) plays ``CHILD``: ``[target, refund]`` in one turn, where the
target is ``none`` / ``idempotent`` / ``once`` and the refund is an
approval-gated ``once`` call, or the gated refund alone (the ``approval``
cells). The crash points of ``tether._loop.crash`` fire around the commits of
*every* run of the tree, so ``TETHER_CRASH_AT=<point>:<nth>`` picks one commit
of the parent or of the child: an un-killed reference run, traced in-process,
lists every pass of every named point with the run and the call it belongs to,
and each pass is one cell. Cells named ``after-<kind>:<nth>`` kill the worker
right after the store took the nth ``<kind>`` event (``--kill-after``), for the
commits no named point follows (``run-started``, ``approval-requested``,
``paused``, ``child-stopped``: between the child's pause and its parent's
``child-stopped`` for example).

Each cell is played as in ``test_crash_matrix.py``: the worker is killed, then
started again (``--resume --approve-all``) until the tree finishes, a human
answering ``needs-decision`` from another process with ``record_decisions``
(routed down to the child by the item's path). Every cell must end finished,
with the executions the contract allows, the human asked exactly when a
``once`` call was interrupted, one child run per delegating call (never started
afresh twice), ``PRAGMA integrity_check`` ok, and every notebook of the tree
equal to the reference.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import tether._loop.crash
from tether import ApprovalDecided, Event, RunStarted, ToolFinished, ToolStarted
from tether._loop.crash import AROUND, POINTS
from tether.stores.memory import MemoryStore

from . import worker
from .harness import Lab, Story, Verdict, Zygote, judge, kill_and_recover, play_matrix
from .test_crash_matrix import EFFECT_DONE, REFUND, TARGETS, THREADS, WINDOW  # the flat matrix's targets
from .worker import EFFECTS, Ledger, Oracle, Plan, read_oracle

UNNAMED = ("run-started", "approval-requested", "paused", "child-stopped")  # commits no named point follows


def child_plan(kind: str, alone: bool = False) -> Plan:
    target = TARGETS[kind]
    return [[target]] if kind == "approval" or alone else [[target, REFUND]]


def tree_plan(kind: str, alone: bool = False) -> Plan:
    return [[["delegate", {"plan": child_plan(kind, alone)}]]]


@dataclass(frozen=True)
class Pass:
    """One pass of a crash point in the reference run: where it fired."""

    point: str  # a name of tether._loop.crash, or "after-<kind>" for a kill right after a commit
    nth: int
    run_id: str
    tool: str  # the tool of the call the commit is about ("" for the model, pauses, endings)

    @property
    def level(self) -> str:
        return "child" if "/" in self.run_id else "parent"


def trace_passes(plan: Plan) -> list[Pass]:
    """Every crash-point pass (and every commit) of an un-killed run of ``plan``, in order.

    ``tether._loop.crash.crash_around`` is called around every commit of every run of the
    tree; the tools call ``worker.crash_point("mid_tool")``. Both are wrapped here
    to note which run and call each pass belongs to.
    """
    seen: list[tuple[str, str, str]] = []  # (point, run id, tool)
    around, point, armed = tether._loop.crash.crash_around, worker.crash_point, tether._loop.crash.armed

    def on_commit(when: str, kind: str) -> None:
        frame = sys._getframe(1)  # Run.commit
        run, ev = frame.f_locals["self"], frame.f_locals["ev"]
        run_id = ev.run_id if isinstance(ev, RunStarted) else run.journal.run_id
        name = AROUND.get((when, kind))
        if name is not None:
            seen.append((name, run_id, _tool_of(ev, run)))
        if when == "after" and kind in UNNAMED:
            seen.append((f"after-{kind}", run_id, ""))

    def on_point(name: str) -> None:
        call = sys._getframe(1).f_locals["call"]  # the tool's Invocation
        seen.append((name, call.run_id, call.tool_name))

    tether._loop.crash.crash_around, worker.crash_point = on_commit, on_point  # type: ignore[assignment]
    tether._loop.crash.armed = True  # the loop calls in only when a crash point is armed
    try:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(_drive_reference(plan, Path(tmp) / "oracle.jsonl"))
    finally:
        tether._loop.crash.crash_around, worker.crash_point = around, point  # type: ignore[assignment]
        tether._loop.crash.armed = armed
    counts: Counter[str] = Counter()
    out = []
    for name, run_id, tool in seen:
        counts[name] += 1
        out.append(Pass(name, counts[name], run_id, tool))
    return out


def _tool_of(ev: Event, run: Any) -> str:
    if isinstance(ev, ToolStarted):
        return ev.call.name
    if isinstance(ev, ToolFinished):
        return ev.result.name or run.journal.pending[ev.call_id].call.name
    return ""


async def _drive_reference(plan: Plan, oracle: Path) -> None:
    store = MemoryStore()
    agent = worker.build_agent(store, Oracle(oracle), Ledger())
    assert await worker.drive(agent, store, "m", plan, approve=True) == "finished"


@dataclass(frozen=True)
class Cell:
    """One pass of one crash point, for one kind of target; ``crashes=2`` also kills the retried attempt."""

    kind: str
    at: Pass
    verdict: str = "skip"
    crashes: int = 1

    @property
    def alone(self) -> bool:
        return self.crashes == 2  # so that the second kill can only hit the target

    @property
    def plan(self) -> Plan:
        return tree_plan(self.kind, self.alone)

    @property
    def spec(self) -> str:
        return f"{self.at.point}:{self.at.nth}"

    @property
    def id(self) -> str:
        more = "-twice" if self.crashes == 2 else ""
        return f"{self.kind}-{self.at.level}-{self.spec}-{self.at.tool or 'run'}-{self.verdict}{more}"

    @property
    def interrupted(self) -> bool:
        """The kill fell between a leaf call's start and its result (the delegating call is not one)."""
        return self.at.point in WINDOW and self.at.tool not in ("", "delegate")

    @property
    def asks_human(self) -> bool:
        return self.interrupted and EFFECTS[self.at.tool] == "once"

    def executions(self, tool: str) -> int:
        """How many times ``tool`` must have run in the end."""
        if not self.interrupted or tool != self.at.tool:
            return 1
        done = int(self.at.point in EFFECT_DONE) * self.crashes
        if not self.asks_human:
            return done + 1  # re-run automatically, with the same idempotency key
        return done + (1 if self.verdict == "retry" else 0)

    def worker_flags(self) -> tuple[tuple[str, ...], str | None]:
        """Extra worker flags and the TETHER_CRASH_AT value that make this cell's kill."""
        if self.at.point.startswith("after-"):
            return ("--kill-after", f"{self.at.point.removeprefix('after-')}:{self.at.nth}"), None
        return (), self.spec


def build_cells() -> list[Cell]:
    cells = []
    for kind in TARGETS:
        for p in trace_passes(tree_plan(kind)):
            cells.append(Cell(kind, p))
            if kind in ("once", "approval") and p.point in WINDOW and p.tool == TARGETS[kind][0]:
                cells.append(Cell(kind, p, "retry"))
    for kind in ("once", "approval"):
        first = next(p for p in trace_passes(tree_plan(kind, alone=True)) if p.point == "mid_tool")
        cells.append(Cell(kind, first, "retry", crashes=2))
    return cells


CELLS = build_cells()


@dataclass
class Outcome:
    fired: list[bool]
    story: Story
    integrity: list[str]
    verdict: Verdict
    runs: Counter[str]  # executions per tool, the whole tree
    approvals: int
    stored_runs: list[str]
    seconds: float


def play(cell: Cell, root: Path, expected: dict[str, Any], zygote: Zygote) -> Outcome:
    t0 = time.monotonic()
    lab = Lab(root, str(root / "runs.db"), {"m": cell.plan}, zygote=zygote)
    flags, crash_at = cell.worker_flags()
    played = kill_and_recover(lab, crash_at, cell.verdict, crashes=cell.crashes, flags=flags)
    events = lab.events()
    decisions = [e.decision for evs in events.values() for e in evs if isinstance(e, ApprovalDecided)]
    return Outcome(
        fired=played.fired,
        story=played.story,
        integrity=played.integrity,
        verdict=judge(lab, {"m": played.story}, expected),
        runs=Counter(r["tool"] for r in read_oracle(lab.oracle) if r["ev"] == "tool"),
        approvals=sum(d.verdict == "approve" for d in decisions),
        stored_runs=sorted(events),
        seconds=time.monotonic() - t0,
    )


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    return play_matrix(CELLS, tmp_path_factory.mktemp("nested-matrix"), play, THREADS)


@pytest.mark.parametrize("cell", [pytest.param(c, id=c.id) for c in CELLS])
def test_nested_cell_recovers_with_nothing_lost_no_once_effect_repeated_and_one_child(
    cell: Cell, outcomes: dict[str, Outcome]
) -> None:  # fmt: skip
    out = outcomes[cell.id]
    assert out.fired == [True] * cell.crashes, f"the crash point was not reached: {out.fired}"
    assert set(out.integrity) == {"ok"}
    assert out.verdict.problems == []
    # One child run for the one delegating call, started once, and no other run.
    assert out.stored_runs == ["m", "m/call_1_0"]
    assert (out.verdict.children, out.verdict.second_children) == (1, 0)
    # Exactly the executions the contract allows; the human was asked exactly when required.
    for tool in {c[0] for turn in child_plan(cell.kind, cell.alone) for c in turn}:
        assert out.runs[tool] == cell.executions(tool), tool
    assert out.story.needs_decision == (cell.crashes if cell.asks_human else 0)
    # The approval path: the refund was approved once, in the child's journal.
    assert out.approvals == int(not cell.alone or cell.kind == "approval")
    # One extra model request when a reply was lost (in the parent or the child), none otherwise.
    assert out.verdict.extra_model_calls == (1 if cell.at.point == "after_model_response" else 0)


def test_nested_matrix_covers_every_named_point_in_both_levels_and_every_kind() -> None:
    named = {(c.at.point, c.at.level) for c in CELLS if c.at.point in POINTS}
    assert {p for p, _ in named} == set(POINTS)
    # The child passes every point; the parent every one but the tool's own (mid_tool) and an approval.
    assert {p for p, lvl in named if lvl == "child"} == set(POINTS)
    assert {p for p, lvl in named if lvl == "parent"} == set(POINTS) - {"mid_tool", "after_approval_commit"}
    assert {c.kind for c in CELLS} == set(TARGETS)
    assert {c.at.point for c in CELLS} - set(POINTS) == {f"after-{k}" for k in UNNAMED}


def test_nested_matrix_summary(outcomes: dict[str, Outcome]) -> None:
    """Every cell was played and killed; prints the counts quoted in docs/durability.md."""
    assert set(outcomes) == {c.id for c in CELLS}
    kills = sum(o.story.kills for o in outcomes.values())
    assert kills >= sum(c.crashes for c in CELLS)
    levels = Counter(c.at.level for c in CELLS)
    pauses = sum(o.story.needs_decision for o in outcomes.values())
    once = sum(o.runs["send"] + o.runs["refund"] for o in outcomes.values())
    print(
        f"nested crash matrix: {len(CELLS)} cells ({levels['parent']} kills in the parent's commits, "
        f"{levels['child']} in the child's), {kills} SIGKILLs, {pauses} needs-decision pauses, {once} executions "
        f"of once calls, 0 second children, {sum(o.seconds for o in outcomes.values()):.1f}s of cell time"
    )
