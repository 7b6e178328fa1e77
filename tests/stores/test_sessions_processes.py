"""A session across three real processes, on SQLite and on PostgreSQL: each run continues where the last one stopped."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from .conftest import PG_DSN, check_postgres, drop_schema

WORKER = Path(__file__).with_name("session_worker.py")
SRC = str(Path(__file__).resolve().parents[2] / "src")


def _run(url: str, task: str) -> str:
    env = {**os.environ, "PYTHONPATH": SRC}
    done = subprocess.run(
        [sys.executable, str(WORKER), url, "customer-42", task], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _three_processes(url: str) -> None:
    assert _run(url, "I am Ada") == "1 notes, first 'I am Ada', pid-independent"
    assert _run(url, "my order is A1") == "2 notes, first 'I am Ada', pid-independent"
    assert _run(url, "what do you know?") == "3 notes, first 'I am Ada', pid-independent"


def test_a_session_goes_on_across_three_processes_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    _three_processes(url)
    from tether.stores.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "runs.db")
    (info,) = asyncio.run(store.sessions())
    assert (info.name, info.runs, info.status) == ("customer-42", 3, "finished")
    store.close()


@pytest.mark.postgres
async def test_a_session_goes_on_across_three_processes_on_postgres() -> None:
    await check_postgres()
    schema = f"tether_test_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in PG_DSN else "?"
    try:
        await asyncio.to_thread(_three_processes, f"{PG_DSN}{sep}schema={schema}")
        from tether.stores.postgres import PostgresStore

        store = await PostgresStore.connect(PG_DSN, schema=schema)
        (info,) = await store.sessions()
        assert (info.name, info.runs, info.status) == ("customer-42", 3, "finished")
        await store.aclose()
    finally:
        await drop_schema(schema)
