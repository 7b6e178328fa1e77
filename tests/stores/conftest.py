"""Fixtures for the store tests: one ``store`` parametrised over every backend.

``backend`` knows how to open more store objects on the same database (a fresh
process would do the same), so tests can prove that what one store object
committed another one reads. PostgreSQL tests use ``TETHER_PG_DSN`` and a
schema of their own, dropped afterwards; when the server does not answer they
fail loudly (CI guarantees the server), never skip.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tether.stores import RunStore
from tether.stores.memory import MemoryStore
from tether.stores.sqlite import SQLiteStore

PG_DSN = os.environ.get("TETHER_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")


@dataclass
class Backend:
    """Opens store objects on one database; closes them all at the end."""

    name: str
    path: Path | None = None
    schema: str = ""
    opened: list[Any] = field(default_factory=list)
    shared: RunStore | None = None  # for a backend whose "other" store objects are one object

    async def open(self) -> RunStore:
        store = await BACKENDS[self.name](self)
        if store is not self.shared:
            self.opened.append(store)
        return store

    async def close_all(self) -> None:
        for store in self.opened:
            await store.aclose()


async def _memory(b: Backend) -> RunStore:
    # One process, one dict: every "other" store object is the same one.
    b.shared = b.shared or MemoryStore()
    return b.shared


async def _sqlite(b: Backend) -> RunStore:
    assert b.path is not None
    return SQLiteStore(b.path)


async def _postgres(b: Backend) -> RunStore:
    from tether.stores.postgres import PostgresStore

    return await PostgresStore.connect(PG_DSN, schema=b.schema)


# Every test in tests/stores that takes ``store`` or ``backend`` runs once per entry: a new backend is one
# more opener here (a store object on the database the Backend names: its ``path``, its ``schema``).
BACKENDS: dict[str, Callable[[Backend], Awaitable[RunStore]]] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "postgres": _postgres,
}
MARKS = {"postgres": pytest.mark.postgres}


async def drop_schema(schema: str) -> None:
    import psycopg
    from psycopg import sql

    async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as conn:
        await conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


async def check_postgres() -> None:
    import psycopg

    try:
        async with await psycopg.AsyncConnection.connect(PG_DSN, connect_timeout=10):
            pass
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL at TETHER_PG_DSN={PG_DSN!r} does not answer: {exc}", pytrace=False)


@pytest.fixture(params=[pytest.param(name, marks=MARKS.get(name, ())) for name in BACKENDS])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    name = request.param
    b = Backend(name, path=tmp_path / "runs.db", schema=f"tether_test_{uuid.uuid4().hex[:12]}")
    if name == "postgres":
        await check_postgres()
    try:
        yield b
    finally:
        await b.close_all()
        if name == "postgres":
            await drop_schema(b.schema)


@pytest.fixture
async def store(backend: Backend) -> RunStore:
    return await backend.open()
