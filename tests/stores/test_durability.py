"""A commit that returned survives SIGKILL; a batch is all or nothing.

A helper process forks one child per trial; the child commits and is killed
within microseconds (by itself right after ``append`` returns, or from outside
at a random moment in the middle of its writes). After every kill the database
is opened again and checked. ``TETHER_SOAK_N`` sets the number of trials per
durability setting (the spec's 1,000 is the default; it takes a few seconds).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tether.stores.sqlite import SQLiteStore

HELPER = Path(__file__).with_name("_killer.py")
TRIALS = int(os.environ.get("TETHER_SOAK_N", "1000"))


def run_trials(db: Path, durability: str, lines: list[str]) -> list[dict[str, object]]:
    proc = subprocess.run(
        [sys.executable, str(HELPER), str(db), durability],
        input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(results) == len(lines), proc.stderr
    return results


@pytest.mark.parametrize(
    ("durability", "share", "fraction"),
    [
        # Another process keeps the database open, as a server would: the WAL is never reset.
        ("normal", True, 1),
        # The killed child was the only connection: every reopen runs SQLite's WAL recovery.
        ("normal", False, 10),
        ("full", True, 10),
    ],
    ids=["normal-shared", "normal-recovery", "full-shared"],
)
def test_a_commit_that_returned_survives_sigkill(tmp_path: Path, durability: str, share: bool, fraction: int) -> None:
    db = tmp_path / "runs.db"
    keeper = SQLiteStore(db) if share else None
    n = max(1, TRIALS // fraction)
    results = run_trials(db, durability, [f"self {i}" for i in range(n)])
    assert all(r["signal"] == 9 for r in results), [r for r in results if r["signal"] != 9][:3]
    lost = [r for r in results if (r["acked"], r["found"]) != (1, 3)]
    assert lost == [], f"{len(lost)}/{n} acknowledged commits missing after SIGKILL: {lost[:5]}"
    store = keeper or SQLiteStore(db)
    assert store.integrity_check() == "ok"
    assert len(_list_all(store)) == n
    store.close()


def test_a_kill_at_a_random_moment_leaves_whole_batches_only(tmp_path: Path) -> None:
    rng = random.Random(6)
    n = max(1, TRIALS // 5)
    lines = [f"external {i} {rng.randrange(0, 4000)}" for i in range(n)]
    keeper = SQLiteStore(tmp_path / "runs.db")
    results = run_trials(tmp_path / "runs.db", "normal", lines)
    assert all(r["signal"] == 9 for r in results)
    for r in results:
        acked, found = int(r["acked"]), int(r["found"])  # type: ignore[call-overload]
        assert found % 3 == 0, f"half a batch was committed: {r}"
        assert acked * 3 <= found <= (acked + 1) * 3, r  # at most the one unacknowledged batch
    assert sum(int(r["found"]) > 0 for r in results) > 0  # type: ignore[call-overload]  # kills landed mid-run
    assert keeper.integrity_check() == "ok"
    keeper.close()


def _list_all(store: SQLiteStore) -> list[object]:
    import asyncio

    return asyncio.run(store.list_runs(limit=1_000_000))
