"""Ctrl-C in ``tether run`` on the real offline model: "stopping…" at once, the process ends, the run resumes.

The model is stopped between tokens (its streaming callback says stop), so the
command does not wait for the rest of a long reply. The test asserts that it
returns (within a liveness bound); how many seconds it takes is measured by
``bench/bench_ctrl_c.py``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pexpect
import pytest

from support import require_local_model

pytestmark = [pytest.mark.local_model, pytest.mark.slow]
TASK = "Write a long story, at least 400 words, about a lighthouse keeper. Do not use any tool."


def _cache() -> str:
    from tether.providers._weights import cache_dir

    require_local_model("qwen2.5-coder-1.5b")
    return str(cache_dir().parent)


def _spawn(cli_env, ws: Path, tether_script: str, *args: str) -> pexpect.spawn:
    env = cli_env(TERM="xterm", COLUMNS="200", LINES="40", TETHER_CACHE=_cache())
    return pexpect.spawn(tether_script, list(args), cwd=str(ws), env=env, encoding="utf-8", timeout=120)


def _runs(cli_env, ws: Path, tether_script: str) -> list[dict[str, object]]:
    done = subprocess.run(
        [tether_script, "runs", "--json"], cwd=ws, env=cli_env(), capture_output=True, text=True, timeout=60
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_ctrl_c_stops_the_local_model_and_the_run_can_be_resumed(cli_env, ws: Path, tether_script: str) -> None:
    run = _spawn(cli_env, ws, tether_script, "run", TASK)
    run.expect_exact("is thinking", timeout=240)  # the model was loaded before the run: it is generating now
    run.sendintr()
    run.expect_exact("stopping…", timeout=5)  # said at once
    run.expect(pexpect.EOF, timeout=60)  # a liveness bound, not a speed claim
    run.close()
    assert run.exitstatus == 130
    [info] = _runs(cli_env, ws, tether_script)
    assert info["status"] == "cancelled"  # interrupted, not closed: `tether resume` continues it


def test_a_second_ctrl_c_quits_at_once(cli_env, ws: Path, tether_script: str) -> None:
    run = _spawn(cli_env, ws, tether_script, "run", TASK)
    run.expect_exact("is thinking", timeout=240)
    run.sendintr()
    run.expect_exact("stopping…", timeout=5)
    run.sendintr()
    run.expect(pexpect.EOF, timeout=10)
    run.close()
    assert run.exitstatus == 130 or run.signalstatus is not None
    [info] = _runs(cli_env, ws, tether_script)
    assert info["status"] in ("cancelled", "running")  # cancelled, or left for `tether resume` to take over
