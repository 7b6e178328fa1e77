"""A worker killed at every named crash point, for every kind of tool.

Each cell is one run on its own SQLite file: the worker is started with
``TETHER_CRASH_AT=<point>`` and SIGKILLs itself there; then workers are started
again (``--resume --approve-all``) until the run finishes, and when the run
stops at ``needs-decision`` the test records a human's ``retry`` or ``skip``
from outside, as another process would.

The plan puts the call under test first, so every tool-path point hits it:
``none`` / ``idempotent`` / ``once`` cells run ``[target, refund]`` in one turn
(the refund needs approval, so the approval points are on the path too), the
``approval`` cells run ``[refund]`` alone (so do the cells whose retried
attempt is killed again, so that the second kill can only hit the target). All
ten points are reached in every cell. Two more cells crash at the model points of the final turn
(``TETHER_CRASH_AT=<point>:2``), where the reply is the answer.

Worker processes are forked from a few fork servers (``zygote.py``) instead of
started afresh, which saves ~0.3 s of imports each; every incarnation is still
its own process, killed by the real hook. The cells are played three at a time
and then judged one test each.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tether import ApprovalDecided
from tether._loop.crash import POINTS

from .harness import Lab, Story, Verdict, Zygote, judge, kill_and_recover, play_matrix
from .worker import Plan, read_oracle

TARGETS: dict[str, list[Any]] = {
    "none": ["lookup", {"key": "color"}],
    "idempotent": ["put", {"key": "color", "value": "teal"}],
    "once": ["send", {"to": "ann", "text": "your order shipped"}],
    "approval": ["refund", {"order": "A1", "amount": 79}],
}
REFUND = ["refund", {"order": "B2", "amount": 12}]
THREADS = 3
WINDOW = ("after_started_commit", "mid_tool", "after_tool_return")  # started, not finished
EFFECT_DONE = ("mid_tool", "after_tool_return")  # the effect happened before the crash


@dataclass(frozen=True)
class Cell:
    """One crash point x one kind of tool; ``crashes=2`` also kills the retried attempt."""

    kind: str
    point: str
    verdict: str = "skip"
    crashes: int = 1
    nth: int = 1  # 2 with the model points: the final answer's turn

    @property
    def crash_at(self) -> str:
        return self.point if self.nth == 1 else f"{self.point}:{self.nth}"

    @property
    def id(self) -> str:
        more = "-twice" if self.crashes == 2 else ""
        return f"{self.kind}-{self.crash_at}-{self.verdict}{more}"

    @property
    def with_refund(self) -> bool:
        """The approval path rides along, except where a second kill must hit the target alone."""
        return self.kind == "approval" or self.crashes == 1

    @property
    def plan(self) -> Plan:
        target = TARGETS[self.kind]
        return [[target, REFUND]] if self.kind != "approval" and self.crashes == 1 else [[target]]

    @property
    def asks_human(self) -> bool:
        """A crash between start and finish of a ``once`` call must wait for a human."""
        return self.kind in ("once", "approval") and self.point in WINDOW

    @property
    def executions(self) -> int:
        """How many times the call under test must have run in the end."""
        if self.point not in WINDOW:
            return 1
        done = int(self.point in EFFECT_DONE) * self.crashes
        if not self.asks_human:
            return done + 1  # re-run automatically, with the same idempotency key
        return done + (1 if self.verdict == "retry" else 0)


CELLS = [Cell(kind, point) for kind in TARGETS for point in POINTS]
CELLS += [Cell(kind, point, "retry") for kind in ("once", "approval") for point in WINDOW]
CELLS += [Cell(kind, "mid_tool", "retry", crashes=2) for kind in ("once", "approval")]
CELLS += [Cell("none", point, nth=2) for point in ("after_model_response", "after_proposed_commit")]

# Cells that expose the bugs in docs/durability.md ("Known gaps"); strict, so a fix shows up.
KNOWN_BUGS: dict[str, str] = {}  # cell id -> reason, for a strict xfail while a bug is open


@dataclass
class Outcome:
    fired: list[bool]
    story: Story
    integrity: list[str]
    verdict: Verdict
    target_runs: int
    refund_runs: int
    approvals: int
    seconds: float


def play(cell: Cell, root: Path, expected: dict[str, Any], zygote: Zygote) -> Outcome:
    t0 = time.monotonic()
    lab = Lab(root, str(root / "runs.db"), {"m": cell.plan}, zygote=zygote)
    played = kill_and_recover(lab, cell.crash_at, cell.verdict, crashes=cell.crashes)
    rows = [r for r in read_oracle(lab.oracle) if r["ev"] == "tool"]
    return Outcome(
        fired=played.fired,
        story=played.story,
        integrity=played.integrity,
        verdict=judge(lab, {"m": played.story}, expected),
        target_runs=sum(r["tool"] == TARGETS[cell.kind][0] for r in rows),
        refund_runs=sum(r["tool"] == "refund" for r in rows),
        approvals=sum(isinstance(e, ApprovalDecided) and e.decision.verdict == "approve" for e in lab.events()["m"]),
        seconds=time.monotonic() - t0,
    )


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    return play_matrix(CELLS, tmp_path_factory.mktemp("matrix"), play, THREADS)


def params() -> list[Any]:
    out = []
    for c in CELLS:
        marks = [pytest.mark.xfail(reason=KNOWN_BUGS[c.id], strict=True)] if c.id in KNOWN_BUGS else []
        out.append(pytest.param(c, id=c.id, marks=marks))
    return out


@pytest.mark.parametrize("cell", params())
def test_cell_recovers_with_nothing_lost_and_no_once_effect_repeated(
    cell: Cell, outcomes: dict[str, Outcome]
) -> None:  # fmt: skip
    out = outcomes[cell.id]
    assert out.fired == [True] * cell.crashes, f"the crash point was not reached: {out.fired}"
    assert set(out.integrity) == {"ok"}
    assert out.verdict is not None
    assert out.verdict.problems == []
    # Exactly the executions the contract allows; the human was asked exactly when required.
    assert out.target_runs == cell.executions
    assert out.story.needs_decision == (cell.crashes if cell.asks_human else 0)
    # The approval path: one approval recorded, the approved refund ran exactly once.
    assert out.approvals == int(cell.with_refund)
    assert out.refund_runs == (cell.executions if cell.kind == "approval" else int(cell.with_refund))
    # One extra model request when the reply was lost, none otherwise.
    assert out.verdict.extra_model_calls == (1 if cell.point == "after_model_response" else 0)


def test_matrix_covers_every_named_point_and_kind() -> None:
    assert {c.point for c in CELLS} == set(POINTS) and len(POINTS) == 10
    assert {c.kind for c in CELLS} == {"none", "idempotent", "once", "approval"}
    assert len(CELLS) == 50


def test_matrix_summary(outcomes: dict[str, Outcome]) -> None:
    """Every cell was played and killed; prints the counts quoted in docs/durability.md."""
    assert set(outcomes) == {c.id for c in CELLS}
    kills = sum(o.story.kills for o in outcomes.values())
    assert kills >= sum(c.crashes for c in CELLS)
    pauses = sum(o.story.needs_decision for o in outcomes.values())
    extra = sum(o.verdict.extra_model_calls for o in outcomes.values() if o.verdict)
    print(
        f"crash matrix: {len(CELLS)} cells, {kills} SIGKILLs at named points, {pauses} needs-decision "
        f"pauses, {sum(o.target_runs for o in outcomes.values())} executions of the calls under test, "
        f"{extra} extra model requests, {sum(o.seconds for o in outcomes.values()):.1f}s of cell time"
    )
