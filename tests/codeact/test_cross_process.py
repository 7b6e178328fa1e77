"""A code action across processes: it pauses on the refund, another process decides, a third resumes it.

Real parts: the sandbox, a SQLite file and PostgreSQL, worker subprocesses,
and an oracle file that counts what each tool really did.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tether import Choice, RunState, record_decisions
from tether.stores._open import open_store

from .desk import count, oracle_rows

pytestmark = pytest.mark.sandbox
WORKER = Path(__file__).with_name("worker.py")
TESTS = str(Path(__file__).parents[1])


def work(store: str, oracle: Path, ws: Path, program: str, run_id: str, mode: str, crash: str = "") -> dict[str, Any]:
    """One worker process (killed at ``crash`` when given): how the run stopped, or None if killed."""
    # No empty entry: it would put the worker's working directory ("/") on its import path, where the
    # sandbox refuses any workspace (a command could plant code the host would import).
    paths = [TESTS, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    env.pop("TETHER_CRASH_AT", None)
    if crash:
        env["TETHER_CRASH_AT"] = crash
    args = [sys.executable, str(WORKER), store, str(oracle), str(ws), program, run_id, mode]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=240, cwd="/")
    if done.returncode != 0:
        return {"killed": done.returncode, "stderr": done.stderr[-2000:]}
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def decide(store_url: str, run_id: str, choose: Any) -> RunState:
    """Decide on the stored run from this process, as the inbox or the CLI does."""

    async def go() -> RunState:
        store = open_store(store_url)
        try:
            return await record_decisions(store, run_id, choose, by="ana")
        finally:
            await store.aclose()

    return asyncio.run(go())


def items(store_url: str, run_id: str) -> list[Any]:
    from tether import state_of

    async def go() -> list[Any]:
        store = open_store(store_url)
        try:
            return list(state_of(await store.load(run_id)).items())
        finally:
            await store.aclose()

    return asyncio.run(go())


def test_the_refund_pauses_another_process_approves_and_it_runs_once(
    store_url: str, oracle: Path, workspace: Path
) -> None:
    first = work(store_url, oracle, workspace, "refund", "r1", "start")
    assert first["status"] == "paused", first
    assert [r["tool"] for r in oracle_rows(oracle)] == ["lookup", "tag"]
    [item] = items(store_url, "r1")
    assert item.call.name == "refund" and json.loads(item.call.arguments) == {"order": "A1", "amount": 79.0}
    decide(store_url, "r1", Choice("approve", item.id))
    second = work(store_url, oracle, workspace, "refund", "r1", "resume")
    assert second["status"] == "finished", second
    assert second["output"] == "refunded 79 on A1"
    # The replay answered lookup and tag from the journal: their functions ran once, the refund once.
    assert [r["tool"] for r in oracle_rows(oracle)] == ["lookup", "tag", "refund"]


def test_a_denied_refund_is_the_programs_tool_error_and_it_goes_on(
    store_url: str, oracle: Path, workspace: Path
) -> None:
    assert work(store_url, oracle, workspace, "refund", "r2", "start")["status"] == "paused"
    [item] = items(store_url, "r2")
    decide(store_url, "r2", Choice("deny", item.id, message="not without a receipt"))
    second = work(store_url, oracle, workspace, "refund", "r2", "resume")
    assert second["status"] == "finished", second
    assert second["output"].startswith("denied: ") and "not without a receipt" in second["output"]
    assert count(oracle, "refund") == 0 and count(oracle, "lookup") == 1 and count(oracle, "tag") == 1


def test_a_program_that_chooses_by_random_is_stopped_on_replay_naming_both_calls(
    store_url: str, oracle: Path, workspace: Path
) -> None:
    assert work(store_url, oracle, workspace, "random", "r3", "start")["status"] == "paused"
    [item] = items(store_url, "r3")
    decide(store_url, "r3", Choice("approve", item.id))
    second = work(store_url, oracle, workspace, "random", "r3", "resume")
    assert second["status"] == "failed", second
    error = second["error"]
    assert "replay diverged" in error and error.count("lookup(") == 2, error  # both calls named
    # The approved refund is the journal's call: it ran once, before the program ran again. The first
    # lookup ran once and the diverging one never; resuming again runs nothing more.
    assert count(oracle, "lookup") == 1 and count(oracle, "refund") == 1
    again = work(store_url, oracle, workspace, "random", "r3", "resume")
    assert again["status"] == "failed" and "replay diverged" in again["error"], again
    assert count(oracle, "lookup") == 1 and count(oracle, "refund") == 1
