"""A paused run with an output type resumes in another process (SQLite) and ends with the instance."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from tether import Action, state_of
from tether.stores.sqlite import SQLiteStore

from .output_worker import Refund, agent

WORKER = Path(__file__).with_name("output_worker.py")


def test_a_typed_run_paused_here_finishes_in_another_process_with_its_instance(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    paused = agent(db, [Action("issue_refund", {"order_id": "A1234", "amount": 79})]).run_sync("refund A1234")
    assert paused.status == "paused" and paused.output is None
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, str(WORKER), "finish", db, paused.run_id], capture_output=True, text=True, env=env,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    name, data = done.stdout.strip().split(" ", 1)
    assert name == "Refund"
    assert Refund.model_validate_json(data) == Refund(order_id="A1234", amount=79, outcome="refunded")
    # The store keeps the JSON; this process rebuilds the instance from it.
    events = asyncio.run(SQLiteStore(db).load(paused.run_id))
    assert state_of(events).status == "finished"
    assert json.loads(events[-1].output) == {"order_id": "A1234", "amount": 79, "outcome": "refunded"}
    assert agent(db, []).output_of(events) == Refund(order_id="A1234", amount=79, outcome="refunded")
