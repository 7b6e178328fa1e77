"""Random kill -9 soak, on SQLite and on PostgreSQL; see soak.py for the method.

Pass: 0 lost runs; 0 duplicated ``once`` effects; every effect preceded by its
own committed ``tool-started``; idempotent calls keep one key; at most one extra
model request per kill; the store is consistent after every kill (SQLite
``PRAGMA integrity_check`` = ok); every finished run's notebook equals an
un-killed reference run of the same plan, except the results of skipped calls.

The nested soaks (issue 11) play run trees the same way: a parent delegating to
child runs (some to a grandchild) whose calls mix the three effects; every run
of every tree is judged so, and each delegating call has exactly one child run,
never started afresh a second time.
"""

from __future__ import annotations

import os
import random
import sqlite3
from pathlib import Path

import pytest

from tether.stores import RunStore

from .conftest import pg_url
from .harness import Lab, with_store
from .soak import NESTED_BATCH, NESTED_RUNS, RUNS, SoakReport, random_tree_plan, soak

SEED = int(os.environ.get("TETHER_SOAK_SEED", random.randrange(2**31)))


def sqlite_integrity(lab: Lab) -> str:
    conn = sqlite3.connect(lab.store_url)
    try:
        return "\n".join(str(r[0]) for r in conn.execute("PRAGMA integrity_check"))
    finally:
        conn.close()


def journal_consistent(lab: Lab) -> str:
    """Each run's stored length (child runs' too) equals its number of events, numbered 1..n without gaps."""

    async def fn(store: RunStore) -> str:
        found = [i.run_id for i in await store.list_runs(limit=1_000_000)]
        for run_id in [*lab.plans, *(r for r in found if "/" in r and r.split("/")[0] in lab.plans)]:
            info = await store.get(run_id)
            events = await store.load(run_id)
            if (info.seq if info else 0) != len(events):
                return f"{run_id}: seq {info.seq if info else None} but {len(events)} events"
        return "ok"

    return with_store(lab.store_url, fn)


def check_all(lab: Lab) -> str:
    found = sqlite_integrity(lab)
    return found if found != "ok" else journal_consistent(lab)


def assert_clean(report: SoakReport, runs: int = RUNS) -> None:
    """Every run accounted for, killed, consistent, and no effect or answer repeated."""
    assert report.verdict.runs == runs
    assert report.kills >= 3
    assert report.lost == []
    assert set(report.store_checks) == {"ok"}
    assert report.verdict.problems == [], f"seed {SEED}: {report.verdict.problems[:10]}"
    assert report.verdict.repeated_answers == 0  # a committed final answer is never asked for again


# A nightly TETHER_SOAK_RUNS=2000 takes ~10x the CI time: let pytest-timeout scale with it.
LIMIT = pytest.mark.timeout(max(300, RUNS * 1.5))


@pytest.mark.slow
@LIMIT
def test_sqlite_soak_random_kill9(tmp_path: Path) -> None:
    report = soak(tmp_path, lambda b: str(tmp_path / f"runs{b}.db"), check_all, SEED)
    print(report.line("SQLite", SEED))
    assert_clean(report)


@pytest.mark.slow
@pytest.mark.postgres
@LIMIT
def test_postgres_soak_random_kill9(tmp_path: Path, pg_schema: str) -> None:
    report = soak(tmp_path, lambda b: pg_url(pg_schema), journal_consistent, SEED)
    print(report.line("PostgreSQL", SEED))
    assert_clean(report)


def assert_one_child_each(report: SoakReport) -> None:
    """Every tree had child runs, each started once: no delegating call started a second child."""
    assert report.verdict.children >= report.verdict.runs  # one or two per tree, some with a grandchild
    assert report.verdict.executions["delegate"] == report.verdict.children
    assert report.verdict.second_children == 0


NESTED_LIMIT = pytest.mark.timeout(max(300, NESTED_RUNS * 3))


@pytest.mark.slow
@NESTED_LIMIT
def test_sqlite_soak_of_nested_runs_random_kill9(tmp_path: Path) -> None:
    report = soak(tmp_path, lambda b: str(tmp_path / f"runs{b}.db"), check_all, SEED, NESTED_RUNS, NESTED_BATCH,
                  random_tree_plan)  # fmt: skip
    print(report.line("SQLite nested", SEED))
    assert_clean(report, NESTED_RUNS)
    assert_one_child_each(report)


@pytest.mark.slow
@pytest.mark.postgres
@NESTED_LIMIT
def test_postgres_soak_of_nested_runs_random_kill9(tmp_path: Path, pg_schema: str) -> None:
    report = soak(tmp_path, lambda b: pg_url(pg_schema), journal_consistent, SEED, NESTED_RUNS, NESTED_BATCH,
                  random_tree_plan)  # fmt: skip
    print(report.line("PostgreSQL nested", SEED))
    assert_clean(report, NESTED_RUNS)
    assert_one_child_each(report)
