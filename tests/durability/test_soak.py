"""RELIABILITY A.2 (SQLite) and A.3 (PostgreSQL): random kill -9 soak; see soak.py for the method.

Pass: 0 lost runs; 0 duplicated ``once`` effects; every effect preceded by its
own committed ``tool-started``; idempotent calls keep one key; at most one extra
model request per kill; the store is consistent after every kill (SQLite
``PRAGMA integrity_check`` = ok); every finished run's notebook equals an
un-killed reference run of the same plan, except the results of skipped calls.
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
from .soak import RUNS, SoakReport, soak

SEED = int(os.environ.get("TETHER_SOAK_SEED", random.randrange(2**31)))


def sqlite_integrity(lab: Lab) -> str:
    conn = sqlite3.connect(lab.store_url)
    try:
        return "\n".join(str(r[0]) for r in conn.execute("PRAGMA integrity_check"))
    finally:
        conn.close()


def journal_consistent(lab: Lab) -> str:
    """Each run's stored length equals its number of events, numbered 1..n without gaps."""

    async def fn(store: RunStore) -> str:
        for run_id in lab.plans:
            info = await store.get(run_id)
            events = await store.load(run_id)
            if (info.seq if info else 0) != len(events):
                return f"{run_id}: seq {info.seq if info else None} but {len(events)} events"
        return "ok"

    return with_store(lab.store_url, fn)


def check_all(lab: Lab) -> str:
    found = sqlite_integrity(lab)
    return found if found != "ok" else journal_consistent(lab)


def assert_clean(report: SoakReport) -> None:
    """Every run accounted for, killed, consistent, and no effect or answer repeated."""
    assert report.verdict.runs == RUNS
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
