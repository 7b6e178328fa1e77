"""A worker stalled inside a ``once`` call, a takeover, a person's retry, and the stalled worker waking up.

The attack of the review (issue 25, item 7): worker A is SIGSTOPped inside a slow
``once`` call (its effect comes at the end) and stays stopped past its lease;
worker B takes the run over and stops it ``needs-decision``; a person answers
``retry``; worker C runs the call again (its effect: the first); then A is
SIGCONTed. Before, the item said nothing of A, and A finished its call: the
effect happened twice (its late result was refused, but too late to matter).
Now the item says that attempt 1 was started by A (host, pid, when) and may
still complete; and A, waking up, finds its lease expired, cancels the call
before its effect, and commits nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tether import record_decisions
from tether.store import load_tree

from .harness import with_store
from .test_zombie import BACKENDS, store_url
from .worker import read_oracle

SCRIPT = Path(__file__).with_name("slow_send.py")


def command(url: str, oracle: Path, *flags: str) -> list[str]:
    return [sys.executable, str(SCRIPT), "--store", url, "--oracle", str(oracle), "--run-id", "s1", *flags]


def outcome(proc: subprocess.Popen[str], timeout: float) -> dict[str, str]:
    out, err = proc.communicate(timeout=timeout)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    assert lines, f"no outcome: {out[-1000:]} {err[-2000:]}"
    return {**json.loads(lines[-1]), "stderr": err}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_stalled_worker_that_wakes_after_a_retry_does_not_repeat_the_effect(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:  # fmt: skip
    url, oracle = store_url(backend, tmp_path, request), tmp_path / "oracle.jsonl"
    a = subprocess.Popen(command(url, oracle, "--slow", "20", "--lease-ttl", "2"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert a.stdout is not None and a.stdout.readline().strip() == "began"
        os.kill(a.pid, signal.SIGSTOP)  # inside its once call, before the effect
        time.sleep(2.5)  # past its lease
        b = outcome(subprocess.Popen(command(url, oracle, "--resume"), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True), 60)  # fmt: skip
        assert b["status"] == "needs-decision", b

        # What a person sees on the item: who started the first attempt, when, and that it may still complete.
        state = with_store(url, lambda store: load_tree(store, "s1"))
        (item,) = state.items()
        assert item.status == "started" and item.attempts == 1
        assert f":{a.pid}:" in item.note and "may still complete" in item.note, item.note
        assert time.strftime("%Y-%m-%d", time.gmtime()) in item.note and "UTC" in item.note

        with_store(url, lambda store: record_decisions(store, "s1", lambda s: s.retry(item.id, by="ana")))
        c = outcome(subprocess.Popen(command(url, oracle, "--resume"), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True), 60)  # fmt: skip
        assert c["status"] == "finished", c
    finally:
        os.kill(a.pid, signal.SIGCONT)  # it wakes, still inside its first attempt
    late = outcome(a, 60)
    effects = [r for r in read_oracle(oracle) if r["ev"] == "effect"]
    assert len(effects) == 1, f"the effect happened {len(effects)} times: {effects}"
    assert effects[0]["pid"] != a.pid  # the retry's
    assert late["status"] == "lease-conflict" and "no longer this worker's" in late["error"], late
    assert "was cancelled" in late["error"] or "were cancelled" in late["error"]
    finished = with_store(url, lambda store: store.load("s1"))
    assert [ev.kind for ev in finished].count("tool-finished") == 1  # only the retry's result
