"""kill -9 during an idempotent MCP call: the resumed run calls it again with the same key."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_support import HERE, Oracle, alive

pytest.importorskip("mcp", reason="needs tether[mcp]")

WORKER = HERE / "agent_worker.py"


def worker(tmp_path: Path, oracle: Oracle, *flags: str) -> subprocess.Popen[str]:
    hold = tmp_path / "hold"
    hold.mkdir(exist_ok=True)
    command = [sys.executable, str(WORKER), "--db", str(tmp_path / "runs.db"), "--oracle", str(oracle.path)]
    command += ["--hold", str(hold), *flags]
    env = {**os.environ, "PYTHONPATH": str(HERE.parents[1] / "src")}
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_a_worker_killed_mid_call_resumes_and_repeats_the_call_with_the_same_key(
    tmp_path: Path, oracle: Oracle
) -> None:
    first = worker(tmp_path, oracle)
    try:
        assert first.stdout is not None and first.stdout.readline().strip() == "ready"
        held = oracle.wait_for("remember")[0]  # the server is inside the call now, holding
        os.kill(first.pid, signal.SIGKILL)
        first.communicate(timeout=30)
        assert first.returncode == -signal.SIGKILL

        second = worker(tmp_path, oracle, "--resume")
        out, err = second.communicate(timeout=120)
        assert second.returncode == 0, err[-3000:]
    finally:
        first.kill()
        for row in oracle.rows():
            if alive(row["pid"]):  # the first server may still sit in its hold
                os.kill(row["pid"], signal.SIGKILL)
    assert json.loads(out.splitlines()[-1]) == {"status": "finished", "output": "done: remembered k"}
    calls = oracle.rows("remember")
    assert len(calls) == 2
    assert calls[0]["idem"] == calls[1]["idem"] == held["idem"]
    assert held["idem"].startswith("mem-1:")
    assert calls[0]["pid"] != calls[1]["pid"]  # the second ran on a server the new worker started
