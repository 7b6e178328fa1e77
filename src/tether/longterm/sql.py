"""Memory items in the run store's database: SQLite and PostgreSQL, one set of statements.

The tables come with the stores' migrations (step 4 in ``stores/_migrations.py``),
so a database opened by a run store already has them, and one opened here first
gets the run tables too. Each backend holds a connection of its own: memory
writes never wait behind a run's append, nor the other way round.

Vectors are float32 bytes in a plain column and searched by brute force over numpy
(``tether.longterm.memory``): pgvector's Debian package does not exist for
bookworm's PostgreSQL 15, and this Python's ``sqlite3`` cannot load extensions,
so sqlite-vec cannot either (docs/memory.md has the measurements).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from ..exceptions import StoreError, UserError, import_extra
from ..stores._migrations import migrate_postgres, migrate_sqlite
from .items import Item, Vectors

__all__ = ["PostgresItems", "SQLiteItems", "SQLItems"]

Run = Callable[[str, Sequence[Any]], Awaitable[list[tuple[Any, ...]]]]
COLUMNS = "id, namespace, text, meta, source, version, created_at, updated_at"


def _item(row: Sequence[Any]) -> Item:
    return Item(row[0], row[1], row[2], json.loads(row[3]), row[4], int(row[5]), float(row[6]), float(row[7]))


class SQLItems:
    """The statements both databases run; a subclass supplies ``_fetch`` and ``_transaction``."""

    prefix = ""  # the schema, quoted, with its dot (PostgreSQL)

    def _sql(self, text: str) -> str:
        return text.replace("{t}", self.prefix)

    async def _fetch(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _transaction(self) -> Any:  # an async context manager yielding a Run
        raise NotImplementedError

    async def writes(self, namespace: str) -> int:
        rows = await self._fetch(self._sql("SELECT n FROM {t}memory_writes WHERE namespace = ?"), (namespace,))
        return int(rows[0][0]) if rows else 0

    async def vectors(self, namespace: str, model: str) -> Vectors:
        async with self._transaction() as run:  # the counter and the rows it counts, read together
            counted = await run(self._sql("SELECT n FROM {t}memory_writes WHERE namespace = ?"), (namespace,))
            rows = await run(
                self._sql("SELECT id, vector FROM {t}memory_items WHERE namespace = ? AND model = ?"),
                (namespace, model),
            )
        writes = int(counted[0][0]) if counted else 0
        return Vectors(writes, tuple(r[0] for r in rows), tuple(bytes(r[1]) for r in rows))

    async def get(self, ids: list[str]) -> list[Item]:
        if not ids:
            return []
        marks = ", ".join("?" * len(ids))
        rows = await self._fetch(self._sql(f"SELECT {COLUMNS} FROM {{t}}memory_items WHERE id IN ({marks})"), ids)
        found = {r[0]: _item(r) for r in rows}
        return [found[i] for i in ids if i in found]

    async def served(self, key: str) -> Item | None:
        sql = f"SELECT {COLUMNS} FROM {{t}}memory_items WHERE id = (SELECT id FROM {{t}}memory_keys WHERE key = ?)"
        rows = await self._fetch(self._sql(sql), (key,))
        return _item(rows[0]) if rows else None

    async def add(self, item: Item, model: str, vector: bytes, key: str | None) -> Item:
        async with self._transaction() as run:
            if key is not None:
                done = await run(self._sql("SELECT id FROM {t}memory_keys WHERE key = ?"), (key,))
                if done:  # this remember call was served before (a retry after a crash)
                    rows = await run(self._sql(f"SELECT {COLUMNS} FROM {{t}}memory_items WHERE id = ?"), (done[0][0],))
                    if rows:
                        return _item(rows[0])
                await run(
                    self._sql("INSERT INTO {t}memory_keys (key, id) VALUES (?, ?) ON CONFLICT DO NOTHING"),
                    (key, item.id),
                )
            await run(
                self._sql(
                    f"INSERT INTO {{t}}memory_items ({COLUMNS}, model, vector) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                ),
                (*self._row(item), model, vector),
            )
            await self._count(run, item.namespace)
        return item

    async def update(self, item: Item, model: str, vector: bytes) -> None:
        async with self._transaction() as run:
            await run(
                self._sql(
                    "INSERT INTO {t}memory_history (id, version, text, meta, source, updated_at) "
                    "SELECT id, version, text, meta, source, updated_at FROM {t}memory_items WHERE id = ?"
                ),
                (item.id,),
            )
            await run(
                self._sql(
                    "UPDATE {t}memory_items SET text = ?, meta = ?, source = ?, version = ?, updated_at = ?, "
                    "model = ?, vector = ? WHERE id = ?"
                ),
                (item.text, json.dumps(item.meta), item.source, item.version, item.updated_at, model, vector, item.id),
            )
            await self._count(run, item.namespace)

    async def history(self, id: str) -> list[Item]:
        now = await self.get([id])
        rows = await self._fetch(
            self._sql(
                "SELECT version, text, meta, source, updated_at FROM {t}memory_history WHERE id = ? ORDER BY version"
            ),
            (id,),
        )
        if not now:
            return []
        base = now[0]
        old = [
            Item(id, base.namespace, r[1], json.loads(r[2]), r[3], int(r[0]), base.created_at, float(r[4]))
            for r in rows
        ]
        return [*old, base]

    async def delete(self, id: str) -> None:
        async with self._transaction() as run:
            found = await run(self._sql("SELECT namespace FROM {t}memory_items WHERE id = ?"), (id,))
            for table in ("memory_items", "memory_history", "memory_keys"):
                await run(self._sql(f"DELETE FROM {{t}}{table} WHERE id = ?"), (id,))
            if found:
                await self._count(run, found[0][0])

    async def items(self, namespace: str) -> list[Item]:
        sql = f"SELECT {COLUMNS} FROM {{t}}memory_items WHERE namespace = ? ORDER BY created_at, id"
        return [_item(r) for r in await self._fetch(self._sql(sql), (namespace,))]

    async def _count(self, run: Run, namespace: str) -> None:
        await run(
            self._sql(
                "INSERT INTO {t}memory_writes (namespace, n) VALUES (?, 1) "
                "ON CONFLICT (namespace) DO UPDATE SET n = {t}memory_writes.n + 1"
            ),
            (namespace,),
        )

    @staticmethod
    def _row(item: Item) -> tuple[Any, ...]:
        meta = json.dumps(item.meta)
        return (item.id, item.namespace, item.text, meta, item.source, item.version, item.created_at, item.updated_at)


class SQLiteItems(SQLItems):
    """Memory items in the SQLite file of a :class:`~tether.stores.sqlite.SQLiteStore` (``path``)."""

    def __init__(self, path: str, *, durability: str = "normal", busy_timeout: float = 5.0) -> None:
        self.path = path
        try:
            self._conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000):d}")
            self._conn.execute("PRAGMA journal_mode = WAL")
            # the run store's durability: with WAL, NORMAL syncs at checkpoints, FULL at every commit
            self._conn.execute(f"PRAGMA synchronous = {'FULL' if durability == 'full' else 'NORMAL'}")
            migrate_sqlite(self._conn, f"SQLite store {path!r}")
        except sqlite3.Error as exc:
            raise StoreError(f"memory in SQLite store {path!r} could not open: {exc}") from exc
        self._lock = asyncio.Lock()

    async def _fetch(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._conn.execute(sql, tuple(args)).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"memory in SQLite store {self.path!r}: {exc}") from exc

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Run]:
        async with self._lock:
            await self._fetch("BEGIN IMMEDIATE")
            try:
                yield self._fetch
                await self._fetch("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    async def aclose(self) -> None:
        self._conn.close()


class PostgresItems(SQLItems):
    """Memory items in the schema of a :class:`~tether.stores.postgres.PostgresStore` (``dsn``, ``schema``)."""

    def __init__(self, dsn: str, *, schema: str = "tether") -> None:
        if not schema or "\x00" in schema:
            raise UserError(f"invalid PostgreSQL schema name {schema!r}")
        self._pg = import_extra("psycopg", extra="postgres", needs="memory in PostgreSQL needs psycopg 3")
        self.dsn, self.schema = dsn, schema
        self.prefix = '"' + schema.replace('"', '""') + '".'
        self._conn: Any = None
        self._lock = asyncio.Lock()

    def _sql(self, text: str) -> str:
        return super()._sql(text).replace("?", "%s")

    async def _connection(self) -> Any:
        if self._conn is None or self._conn.closed:
            try:
                conn = await self._pg.AsyncConnection.connect(self.dsn, autocommit=True)
                await migrate_postgres(conn, self.schema)
            except self._pg.Error as exc:
                raise StoreError(f"memory in PostgreSQL could not open: {exc}") from exc
            self._conn = conn
        return self._conn

    async def _run(self, conn: Any, sql: str, args: Sequence[Any]) -> list[tuple[Any, ...]]:
        try:
            cur = await conn.execute(sql, tuple(args))
            return list(await cur.fetchall()) if cur.description else []
        except self._pg.Error as exc:
            raise StoreError(f"memory in PostgreSQL schema {self.schema!r}: {exc}") from exc

    async def _fetch(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        async with self._lock:
            return await self._run(await self._connection(), sql, args)

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Run]:
        async with self._lock:
            conn = await self._connection()
            async with conn.transaction():

                async def run(sql: str, args: Sequence[Any]) -> list[tuple[Any, ...]]:
                    return await self._run(conn, sql, args)

                yield run

    async def aclose(self) -> None:
        if self._conn is not None:
            await self._conn.close()
