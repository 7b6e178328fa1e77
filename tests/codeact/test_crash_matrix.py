"""The crash matrix over a code action: kill -9 at every commit point of the action, then resume by id.

The program (``desk.REFUND``) reads, tags (idempotent) and refunds (``once``,
approval-gated). Each cell is a crash point of ``tether._loop.crash`` and its
nth pass, in the process that starts the run or in the one that resumes it
after a person approved the refund from this process; the crash points fire
around the commits of the parent run and of the action's child run alike. The
worker is killed there and resumed by id (without a crash) until the run ends;
a person answers every pause from this process: approve a refund, skip a
refund whose outcome is unknown. Every cell ends finished, the refund ran at
most once (exactly once unless a person skipped it), and the idempotent tag
used one key on every execution (an oracle file outside the store counts).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tether import Choice, record_decisions, state_of
from tether._loop.crash import POINTS
from tether.stores._open import open_store

from .desk import oracle_rows
from .test_cross_process import work

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]
MAX_NTH = 12


def settle(url: str, run_id: str) -> tuple[str, bool]:
    """Decide every open item of the stored run from this process; its status, and whether a refund was skipped."""

    async def go() -> tuple[str, bool]:
        store = open_store(url)
        try:
            state = state_of(await store.load(run_id))
            choices, skipped = [], False
            for item in state.items() if state.status in ("paused", "needs-decision") else ():
                if item.status == "awaiting-approval":
                    choices.append(Choice("approve", item.id))
                else:  # a once call interrupted mid-way: its outcome is unknown
                    choices.append(Choice("skip", item.id, message="the refund's outcome is unknown; skipped"))
                    skipped = True
            if choices:
                await record_decisions(store, run_id, choices, by="ana")
            return state.status, skipped
        finally:
            await store.aclose()

    return asyncio.run(go())


def play(url: str, oracle: Path, ws: Path, run_id: str, phase: str, crash: str) -> dict[str, Any]:
    """One cell: crash in the phase's first process, then resume until the run is done."""
    killed, skipped = 0, False
    first = work(url, oracle, ws, "refund", run_id, "start", crash if phase == "start" else "")
    killed += "killed" in first
    crash_next = crash if phase == "resume" else ""
    for _ in range(10):
        status, skip = settle(url, run_id)
        skipped |= skip
        if status == "finished":
            return {"killed": killed, "skipped": skipped}
        step = work(url, oracle, ws, "refund", run_id, "resume", crash_next)
        killed += "killed" in step
        crash_next = ""
    raise AssertionError(f"run {run_id} did not finish: {status}")


@pytest.mark.parametrize("phase", ["start", "resume"])
@pytest.mark.parametrize("point", POINTS)
def test_kill_at_every_commit_of_a_code_action(point: str, phase: str, tmp_path: Path, workspace: Path) -> None:
    cells = 0
    for nth in range(1, MAX_NTH + 1):
        url, oracle = f"sqlite:///{tmp_path / f'{nth}.db'}", tmp_path / f"oracle-{nth}.jsonl"
        cell = play(url, oracle, workspace, f"r{nth}", phase, f"{point}:{nth}")
        rows = oracle_rows(oracle)
        refunds = [r for r in rows if r["tool"] == "refund"]
        assert len(refunds) == (0 if cell["skipped"] and not refunds else 1), (point, nth, rows)
        assert len({r["key"] for r in rows if r["tool"] == "tag"}) == 1, (point, nth, rows)
        if not cell["killed"]:
            break  # this point passes fewer than nth times: every pass has been a cell
        cells += 1
    else:
        raise AssertionError(f"{point} passed more than {MAX_NTH} times; raise MAX_NTH")
    # Until the pause: the parent's reply (the program) and the child's three calls are proposed;
    # lookup and tag finish (the refund waits). So the child's commits are cells, not only the parent's.
    expected = {("after_proposed_commit", "start"): 4, ("after_result_commit", "start"): 2}
    if (point, phase) in expected:
        assert cells == expected[point, phase]
