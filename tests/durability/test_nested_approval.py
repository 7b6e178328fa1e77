"""Issue 11: a run tree paused in one process, decided in a second, finished in a third.

``nested_desk.py`` is the seed's refund desk as a tree (``support`` delegates to
``billing``, whose ``issue_refund`` needs approval). Process A starts it: the
root pauses listing ``support › billing › issue_refund`` with the arguments.
Process B, where no agent runs, records the decision with ``record_decisions``
from the root's id, addressed by the item's id (its path), and the decision
lands in the child's journal. Process C, from another working directory,
resumes the root by id: the child resumes first, then the parent. Each step is
its own process; they share only the SQLite file. ``TETHER_NESTED_E5_RUNS``
trees per verdict (default 5).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tether import ApprovalDecided, ToolFinished, ToolStarted, state_of
from tether.stores.sqlite import SQLiteStore

from .harness import with_store
from .worker import read_oracle

DESK = Path(__file__).with_name("nested_desk.py")
RUNS = int(os.environ.get("TETHER_NESTED_E5_RUNS", "5"))
ARGS = {"order_id": "A1234", "amount": 79}
DENIAL = "refunds over $50 need a manager"


def step(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "TETHER_CRASH_AT"}
    done = subprocess.run(
        [sys.executable, str(DESK), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, f"{args[0]}: {done.stderr[-3000:]}"
    return done


def three_processes(root: Path, verdict: str) -> dict[str, Any]:
    db, oracle = str(root / "shared" / "runs.db"), str(root / "shared" / "refunds.jsonl")
    started = step(root / "a", "start", "--db", db, "--oracle", oracle)
    run_id = started.stdout.strip()
    waiting = [line.removeprefix("waiting: ").split(" | ") for line in started.stderr.splitlines()]
    paused = with_store(db, lambda s: load_all(s, run_id))
    [(item_id, _, _)] = waiting
    said = [DENIAL] if verdict == "deny" else []
    decided = step(root / "b", verdict, "--db", db, run_id, item_id, *said)
    after_decision = with_store(db, lambda s: load_all(s, run_id))
    finished = step(root / "c" / "elsewhere", "finish", "--db", db, "--oracle", oracle, run_id)
    return {
        "run_id": run_id, "waiting": waiting, "paused": paused, "decided": json.loads(decided.stdout),
        "after_decision": after_decision, "events": with_store(db, lambda s: load_all(s, run_id)),
        "result": json.loads(finished.stdout), "refunds": read_oracle(oracle),
        "integrity": SQLiteStore(db).integrity_check(),
    }  # fmt: skip


async def load_all(store: Any, run_id: str) -> dict[str, list[Any]]:
    """Every run of the tree, by id (the root and its child runs)."""
    runs = [i.run_id for i in await store.list_runs() if i.run_id.split("/")[0] == run_id]
    return {r: await store.load(r) for r in sorted(runs)}


def trees(tmp_path: Path, verdict: str) -> list[dict[str, Any]]:
    with ThreadPoolExecutor(max_workers=3) as pool:
        return list(pool.map(three_processes, [tmp_path / f"{verdict}{i}" for i in range(RUNS)], [verdict] * RUNS))


def child_of(tree: dict[str, Any], key: str = "events") -> list[Any]:
    [child] = [r for r in tree[key] if r != tree["run_id"]]
    return tree[key][child]


def assert_paused_and_decided_in_the_child(tree: dict[str, Any], verdict: str) -> None:
    run_id = tree["run_id"]
    [(item_id, label, arguments)] = tree["waiting"]
    assert label == "support › billing › issue_refund"
    assert json.loads(arguments) == ARGS
    assert len(tree["paused"]) == 2 and item_id.count("/") == 1  # the root and one child run
    child_id = f"{run_id}/{item_id.split('/')[0]}"
    assert sorted(tree["paused"]) == [run_id, child_id]
    assert [state_of(evs).status for evs in tree["paused"].values()] == ["paused", "paused"]
    assert not any(isinstance(e, ToolStarted) and e.call.name == "issue_refund" for e in tree["paused"][child_id])
    assert tree["decided"] == {"item": item_id, "verdict": verdict}
    decision = tree["after_decision"][child_id][-1]  # routed down to the child's own journal
    assert isinstance(decision, ApprovalDecided) and decision.decision.by == "supervisor"
    assert decision.decision.call_id == item_id.split("/")[1] and decision.decision.run_id == child_id
    assert tree["after_decision"][run_id] == tree["paused"][run_id]  # the root's journal is untouched


def assert_finished_once(tree: dict[str, Any]) -> None:
    assert tree["result"]["status"] == "finished"
    assert [state_of(evs).status for evs in tree["events"].values()] == ["finished", "finished"]
    assert sorted(tree["events"]) == sorted(tree["paused"])  # still one child run, never a second
    child_starts = [e for e in child_of(tree) if e.kind == "run-started"]
    assert [e.resumed for e in child_starts] == [False, True]  # type: ignore[attr-defined]
    assert tree["integrity"] == "ok"


def test_an_approval_from_another_process_reaches_the_child_and_the_refund_runs_once(tmp_path: Path) -> None:
    results = trees(tmp_path, "approve")
    assert len({r["run_id"] for r in results}) == RUNS
    for tree in results:
        assert_paused_and_decided_in_the_child(tree, "approve")
        assert_finished_once(tree)
        child = child_of(tree)
        starts = [e for e in child if isinstance(e, ToolStarted) and e.call.name == "issue_refund"]
        assert [(e.attempt, json.loads(e.call.arguments)) for e in starts] == [(1, ARGS)]
        assert [(r["order_id"], r["amount"]) for r in tree["refunds"]] == [("A1234", 79)]  # exactly once
        assert tree["refunds"][0]["run"] == child[0].run_id
        assert tree["result"]["output"] == "Support here. billing refunded A1234: $79 refunded to the original card"
    assert len({json.dumps(r["result"]) for r in results}) == 1  # the same story every time


def test_a_denial_from_another_process_is_read_by_billing_and_its_answer_by_support(tmp_path: Path) -> None:
    results = trees(tmp_path, "deny")
    for tree in results:
        assert_paused_and_decided_in_the_child(tree, "deny")
        assert_finished_once(tree)
        assert tree["refunds"] == []
        child = child_of(tree)
        assert not any(isinstance(e, ToolStarted) and e.call.name == "issue_refund" for e in child)
        [note] = [e.result for e in child if isinstance(e, ToolFinished) and e.result.name == "issue_refund"]
        assert note.is_error and note.content == f"a human denied this call: {DENIAL}"
        billing_answer = state_of(child).messages[-1].content
        assert billing_answer == f"billing could not refund A1234: a human denied this call: {DENIAL}"
        root = state_of(tree["events"][tree["run_id"]])
        assert [m.content for m in root.messages if m.name == "billing"] == [billing_answer]  # support read it
        assert tree["result"]["output"] == f"Support here. {billing_answer}"
