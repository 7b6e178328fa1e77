"""What only the PostgreSQL store does: its extra, schemas, migrations, JSONB, reconnects."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg import sql

from tether import Decision, LeaseConflict, Message, Paused, RunStarted, RunState, StoreError, ToolFinished, UserError
from tether.stores._migrations import POSTGRES_STEPS
from tether.stores.postgres import PostgresStore

from .conftest import PG_DSN, check_postgres, drop_schema


def test_without_psycopg_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg now raises ImportError
    with pytest.raises(UserError, match=r"pip install 'tether\[postgres\]'"):
        PostgresStore("postgresql://nowhere/db")


async def test_an_unreachable_server_is_a_store_error() -> None:
    store = PostgresStore("postgresql://postgres@127.0.0.1:1/test?connect_timeout=5")
    with pytest.raises(StoreError, match="cannot connect to PostgreSQL") as info:
        await store.load("r")
    assert isinstance(info.value.__cause__, psycopg.OperationalError)


postgres = pytest.mark.postgres


@pytest.fixture
async def schema() -> AsyncIterator[str]:
    await check_postgres()
    name = f"tether_test_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        await drop_schema(name)


async def sql_rows(query: sql.Composable, *params: object) -> list[tuple[object, ...]]:
    async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as conn:
        cur = await conn.execute(query, params)
        return await cur.fetchall()


@postgres
async def test_connect_creates_the_schema_and_records_its_version(schema: str) -> None:
    store = await PostgresStore.connect(PG_DSN, schema=schema)
    assert store.version == len(POSTGRES_STEPS)
    rows = await sql_rows(sql.SQL("SELECT version FROM {}.schema_migrations").format(sql.Identifier(schema)))
    assert rows == [(v,) for v in range(1, len(POSTGRES_STEPS) + 1)]
    await store.aclose()


@postgres
async def test_many_stores_opening_a_new_schema_at_once_migrate_it_once(schema: str) -> None:
    stores = await asyncio.gather(*(PostgresStore.connect(PG_DSN, schema=schema) for _ in range(6)))
    rows = await sql_rows(sql.SQL("SELECT count(*) FROM {}.schema_migrations").format(sql.Identifier(schema)))
    assert rows == [(len(POSTGRES_STEPS),)]
    for s in stores:
        await s.aclose()


@postgres
async def test_a_schema_from_a_newer_tether_is_refused(schema: str) -> None:
    await (await PostgresStore.connect(PG_DSN, schema=schema)).aclose()
    await sql_rows(
        sql.SQL("INSERT INTO {}.schema_migrations (version) VALUES (42) RETURNING version").format(
            sql.Identifier(schema)
        )
    )
    with pytest.raises(
        StoreError, match=f"schema version 42, but this tether knows only up to version {len(POSTGRES_STEPS)}"
    ):
        await PostgresStore.connect(PG_DSN, schema=schema)


@postgres
async def test_schemas_isolate_stores(schema: str) -> None:
    other = f"{schema}_b"
    try:
        a = await PostgresStore.connect(PG_DSN, schema=schema)
        b = await PostgresStore.connect(PG_DSN, schema=other)
        await a.append("r", [RunStarted("r")], expected_seq=0)
        assert await b.load("r") == []
        await b.append("r", [RunStarted("r"), RunStarted("r", resumed=True)], expected_seq=0)
        assert len(await a.load("r")) == 1
        await a.aclose()
        await b.aclose()
    finally:
        await drop_schema(other)


@postgres
async def test_bodies_are_real_jsonb_and_awkward_text_is_kept_exactly(schema: str) -> None:
    store = await PostgresStore.connect(PG_DSN, schema=schema)
    nul = ToolFinished(Message.tool_result("c1", "a\x00b", name="t"))
    await store.append("r", [RunStarted("r"), nul], expected_seq=0)
    rows = await sql_rows(
        sql.SQL("SELECT jsonb_typeof(body), body->>'kind' FROM {}.events ORDER BY seq").format(sql.Identifier(schema))
    )
    assert rows[0] == ("object", "run-started")
    assert rows[1][0] == "object"  # kept as JSON text inside JSONB: JSONB cannot hold NUL
    assert (await store.load("r"))[1] == nul
    await store.aclose()


@postgres
async def test_an_event_that_is_not_plain_json_is_refused_whole(schema: str) -> None:
    store = await PostgresStore.connect(PG_DSN, schema=schema)
    edit = Decision("r", "c1", "approve", "0" * 32, 0, args={"x": float("nan")})
    bad = Paused("approval", ("c1",), RunState("r", (), decisions=(edit,)))
    with pytest.raises(StoreError, match="not plain JSON"):
        await store.append("r", [RunStarted("r"), bad], expected_seq=0)
    assert await store.get("r") is None
    await store.aclose()


@postgres
async def test_a_killed_idle_connection_is_replaced_before_the_next_call(schema: str) -> None:
    """A backend terminated between calls (a restart, a failover) costs no failed call: the store sees
    the closed connection before reusing it and opens another; the fence still tells the truth."""
    store = await PostgresStore.connect(PG_DSN, schema=schema)
    await store.append("r", [RunStarted("r")], expected_seq=0)
    assert store._conn is not None
    pid = store._conn.info.backend_pid
    await sql_rows(sql.SQL("SELECT pg_terminate_backend(%s)"), pid)
    await asyncio.sleep(0.2)  # the server's close reaches this socket
    assert await store.append("r", [RunStarted("r", resumed=True)], expected_seq=1) == 2
    assert store._conn is not None and store._conn.info.backend_pid != pid
    with pytest.raises(LeaseConflict):
        await store.append("r", [RunStarted("r", resumed=True)], expected_seq=1)
    await store.aclose()


@postgres
async def test_a_cancelled_append_leaves_no_trace_and_the_store_keeps_working(schema: str) -> None:
    store = await PostgresStore.connect(PG_DSN, schema=schema)
    await store.append("r", [RunStarted("r")], expected_seq=0)
    blocker = await psycopg.AsyncConnection.connect(PG_DSN)  # holds the run's row lock
    await blocker.execute(sql.SQL("SELECT 1 FROM {}.runs WHERE run_id = 'r' FOR UPDATE").format(sql.Identifier(schema)))
    task = asyncio.create_task(store.append("r", [RunStarted("r", resumed=True)], expected_seq=1))
    await asyncio.sleep(0.2)
    assert not task.done()  # waiting on the lock
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await blocker.rollback()
    await blocker.close()
    assert await store.load("r") == [RunStarted("r")]
    assert await store.append("r", [RunStarted("r", resumed=True)], expected_seq=1) == 2
    await store.aclose()
