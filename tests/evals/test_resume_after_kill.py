"""An evaluation killed with SIGKILL half way resumes: graded trials are read back, never run again."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from tether.stores.sqlite import SQLiteStore

WORKER = Path(__file__).with_name("eval_worker.py")
SRC = str(Path(__file__).resolve().parents[2] / "src")


def _start(db: Path, log: Path, mode: str, tag: str) -> subprocess.Popen[bytes]:
    """The worker, its stdout and stderr going to ``<tag>.out`` / ``<tag>.err`` beside the database."""
    env = {**os.environ, "PYTHONPATH": SRC}
    with open(db.parent / f"{tag}.out", "wb") as out, open(db.parent / f"{tag}.err", "wb") as err:
        return subprocess.Popen([sys.executable, str(WORKER), str(db), str(log), mode], stdout=out, stderr=err, env=env)


async def _graded(db: Path) -> tuple[set[str], dict[str, str]]:
    store = SQLiteStore(db)
    try:
        runs = await store.list_runs(limit=1000)
    finally:
        await store.aclose()
    graded = {r.run_id.removesuffix("#grade") for r in runs if r.run_id.endswith("#grade")}
    return graded, {r.run_id: r.status for r in runs if not r.run_id.endswith("#grade")}


def _kill_after(proc: subprocess.Popen[bytes], db: Path, graded: int) -> tuple[set[str], dict[str, str]]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if db.exists():
            done, _ = asyncio.run(_graded(db))
            if len(done) >= graded:
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
                return asyncio.run(_graded(db))
        assert proc.poll() is None, (db.parent / "first.err").read_text()
        time.sleep(0.05)
    proc.kill()
    pytest.fail("the worker never graded enough trials")


def _decisions(log: Path) -> dict[str, set[str]]:
    pids: dict[str, set[str]] = defaultdict(set)
    for line in log.read_text().splitlines():
        case, pid = line.split()
        pids[case].add(pid)
    return pids


@pytest.mark.parametrize("mode", ["restart", "resume"])
def test_a_killed_evaluation_resumes_where_it_stopped(tmp_path: Path, mode: str) -> None:
    db, log = tmp_path / "evals.db", tmp_path / "decisions.log"
    first = _start(db, log, mode, "first")
    graded, runs = _kill_after(first, db, graded=4)
    assert first.returncode == -signal.SIGKILL
    assert 4 <= len(graded) < 12
    unfinished = {rid for rid, status in runs.items() if status == "running"}
    assert unfinished, "the kill should land while some trial is mid-run"

    second = _start(db, log, mode, "second")
    assert second.wait(120) == 0, (tmp_path / "second.err").read_text()
    report = json.loads((tmp_path / "second.out").read_text())
    assert report["summary"]["trials"] == 12 and report["summary"]["accuracy"] == 1.0
    assert report["summary"]["read_back"] == len(graded)

    pids = _decisions(log)
    for rid in graded:  # graded before the kill: no decision in the second process
        assert pids[rid.split(":")[2]] == {str(first.pid)}
    for rid in unfinished:  # interrupted: finished by the second process
        assert str(second.pid) in pids[rid.split(":")[2]]
    _, runs = asyncio.run(_graded(db))
    assert set(runs.values()) == {"finished"} and len(runs) == 12
