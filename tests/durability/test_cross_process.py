"""Issue 3 item 8: pause in one process, approve in a second, finish in a third.

The three steps of ``examples/refund_durable.py`` run as three separate
processes, each from its own working directory (the third from yet another
one), sharing only the SQLite file. Repeated ``TETHER_E5_RUNS`` times (default
20; the plan asks 100 nightly) with fresh databases.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tether import ApprovalDecided, ToolFinished, ToolStarted, state_of
from tether.stores.sqlite import SQLiteStore

from .harness import with_store

EXAMPLE = Path(__file__).parents[2] / "examples" / "refund_durable.py"
RUNS = int(os.environ.get("TETHER_E5_RUNS", "20"))
TRANSCRIPT_END = """\
    ?? issue_refund waits for a human decision
  (paused: approval)
    !! supervisor said approve to call_5_0
    -> issue_refund returned: $79 refunded to the original card
  final answer: Good news, A1234 qualifies. I refunded $79 to your card; expect it in 3 to 5 days."""


def step(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "TETHER_CRASH_AT"}
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip


def three_processes(root: Path) -> dict[str, object]:
    db = str(root / "shared" / "runs.db")
    started = step(root / "a", "start", "--db", db)
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    paused = with_store(db, lambda s: s.load(run_id))
    approved = step(root / "b", "approve", run_id, "--db", db)
    assert approved.returncode == 0, approved.stderr
    finished = step(root / "c" / "elsewhere", "finish", run_id, "--db", db)
    assert finished.returncode == 0, finished.stderr
    events = with_store(db, lambda s: s.load(run_id))
    return {"run_id": run_id, "paused": paused, "events": events, "transcript": finished.stdout,
            "waiting": started.stderr, "integrity": SQLiteStore(db).integrity_check()}  # fmt: skip


def test_pause_approve_finish_in_three_processes(tmp_path: Path) -> None:
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(three_processes, [tmp_path / f"r{i}" for i in range(RUNS)]))
    assert len({r["run_id"] for r in results}) == RUNS
    for r in results:
        paused: list = r["paused"]  # type: ignore[assignment]
        events: list = r["events"]  # type: ignore[assignment]
        assert "waiting: call_5_0 issue_refund" in str(r["waiting"])
        assert state_of(paused).status == "paused"
        assert not any(isinstance(e, ToolStarted) and e.call.name == "issue_refund" for e in paused)
        refund_starts = [e for e in events if isinstance(e, ToolStarted) and e.call.name == "issue_refund"]
        refund_results = [e for e in events if isinstance(e, ToolFinished) and e.result.name == "issue_refund"]
        decisions = [e.decision.to_dict() for e in events if isinstance(e, ApprovalDecided)]
        assert [(e.attempt, e.call.arguments) for e in refund_starts] == [(1, '{"order_id": "A1234", "amount": 79}')]
        assert [e.result.content for e in refund_results] == ["$79 refunded to the original card"]
        assert [(d["verdict"], d["by"]) for d in decisions] == [("approve", "supervisor")]
        assert state_of(events).status == "finished"
        assert str(r["transcript"]).rstrip().endswith(TRANSCRIPT_END)
        assert r["integrity"] == "ok"
    assert len({r["transcript"] for r in results}) == 1  # the same story every time


def test_the_usage_in_the_example_docstring_works(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    run_id = step(tmp_path, "start", "--db", db).stdout.strip()
    approved = step(tmp_path, "approve", "--db", db, run_id)  # as the docstring shows it
    assert approved.returncode == 0, approved.stderr
