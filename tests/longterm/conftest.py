"""Fixtures for long-term memory: the real local embedding model, and a run store on each durable backend.

The model is loaded once per test session (it is read-only). PostgreSQL gets a
schema of its own per test, dropped afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from stores.conftest import PG_DSN, drop_schema
from tether.longterm import MiniLM
from tether.stores.sqlite import SQLiteStore


@pytest.fixture(scope="session")
def minilm() -> MiniLM:
    model = MiniLM()
    model(["warm up"])  # loads the weights: a missing model fails here, naming how to install it
    return model


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """A run store; ``store.reopen`` says how another process opens the same database."""
    if request.param == "sqlite":
        s: Any = SQLiteStore(tmp_path / "runs.db")
        s.reopen = f"SQLiteStore({str(tmp_path / 'runs.db')!r})"
        yield s
        await s.aclose()
        return
    from tether.stores.postgres import PostgresStore

    schema = f"mem_{uuid.uuid4().hex[:10]}"
    s = await PostgresStore.connect(PG_DSN, schema=schema)
    s.reopen = f"PostgresStore({PG_DSN!r}, schema={schema!r})"
    try:
        yield s
    finally:
        await s.aclose()
        await drop_schema(schema)
