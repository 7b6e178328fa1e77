"""Schema migrations for the durable run stores.

Each backend has an ordered tuple of SQL steps; step ``n`` (1-based) takes a
database from schema version ``n - 1`` to ``n``. Opening a store applies the
steps it has not seen yet, each in its own transaction together with the new
version number, so a crash mid-migration leaves the database at the previous
version, never in between. SQLite records the version in ``PRAGMA
user_version``; PostgreSQL in a ``schema_migrations`` table inside the store's
schema. A database whose version is newer than this code knows is refused with
a clear :class:`~tether.exceptions.StoreError`: old code must not write to a
schema it does not understand.

To change the schema, append a step; never edit a released one.

Indexes are chosen for the write path: ``runs`` is updated on every commit, so
it is indexed only by ``status`` (which changes a few times per run, and is
only written when it does) and by ``(session, session_n)`` (written once, when
a run of a session starts); listing sorts the matching rows by ``updated_at``.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from ..exceptions import StoreError

if TYPE_CHECKING:
    import psycopg

SQLITE_STEPS: tuple[str, ...] = (
    # 1: runs and their events.
    """
    CREATE TABLE runs (
        run_id     TEXT PRIMARY KEY,
        status     TEXT NOT NULL,
        seq        INTEGER NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX runs_by_status ON runs (status);
    CREATE TABLE events (
        run_id     TEXT NOT NULL,
        seq        INTEGER NOT NULL,
        kind       TEXT NOT NULL,
        body       TEXT NOT NULL,  -- JSON of events.to_dict(event)
        created_at REAL NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
    """,
    # 2: run leases (who advances a run, until when; token grows on each takeover).
    """
    CREATE TABLE leases (
        run_id     TEXT PRIMARY KEY,
        owner      TEXT NOT NULL,
        token      INTEGER NOT NULL,
        expires_at REAL NOT NULL
    ) WITHOUT ROWID;
    """,
    # 3: the bytes of images and files, once per run; sessions (named conversations), by position.
    """
    CREATE TABLE blobs (
        run_id TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        data   BLOB NOT NULL,
        PRIMARY KEY (run_id, sha256)
    );
    ALTER TABLE runs ADD COLUMN session TEXT;
    ALTER TABLE runs ADD COLUMN session_n INTEGER;
    CREATE UNIQUE INDEX runs_by_session ON runs (session, session_n) WHERE session IS NOT NULL;
    """,
    # 4: long-term memory (tether.longterm): items by namespace, their earlier versions, the
    # remember calls already served (by idempotency key), and a write counter per namespace
    # that tells a process its cached vectors are stale.
    """
    CREATE TABLE memory_items (
        id         TEXT PRIMARY KEY,
        namespace  TEXT NOT NULL,
        text       TEXT NOT NULL,
        meta       TEXT NOT NULL,  -- JSON object
        source     TEXT NOT NULL,
        model      TEXT NOT NULL,  -- the embedder that made the vector
        vector     BLOB NOT NULL,  -- float32, little-endian
        version    INTEGER NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX memory_by_namespace ON memory_items (namespace, model);
    CREATE TABLE memory_history (
        id         TEXT NOT NULL,
        version    INTEGER NOT NULL,
        text       TEXT NOT NULL,
        meta       TEXT NOT NULL,
        source     TEXT NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (id, version)
    );
    CREATE TABLE memory_keys (key TEXT PRIMARY KEY, id TEXT NOT NULL);
    CREATE TABLE memory_writes (namespace TEXT PRIMARY KEY, n INTEGER NOT NULL);
    """,
)

# ``{schema}`` is replaced by the quoted schema name.
POSTGRES_STEPS: tuple[str, ...] = (
    # 1: runs and their events.
    """
    CREATE TABLE {schema}.runs (
        run_id     text PRIMARY KEY,
        status     text NOT NULL,
        seq        integer NOT NULL,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL
    );
    CREATE INDEX runs_by_status ON {schema}.runs (status);
    CREATE TABLE {schema}.events (
        run_id     text NOT NULL REFERENCES {schema}.runs (run_id),
        seq        integer NOT NULL,
        kind       text NOT NULL,
        body       jsonb NOT NULL,
        created_at timestamptz NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
    """,
    # 2: run leases; expires_at is the database's clock (epoch seconds), shared by every worker.
    """
    CREATE TABLE {schema}.leases (
        run_id     text PRIMARY KEY,
        owner      text NOT NULL,
        token      bigint NOT NULL,
        expires_at float8 NOT NULL
    );
    """,
    # 3: the bytes of images and files, once per run; sessions (named conversations), by position.
    """
    CREATE TABLE {schema}.blobs (
        run_id text NOT NULL,
        sha256 text NOT NULL,
        data   bytea NOT NULL,
        PRIMARY KEY (run_id, sha256)
    );
    ALTER TABLE {schema}.runs ADD COLUMN session text, ADD COLUMN session_n integer;
    CREATE UNIQUE INDEX runs_by_session ON {schema}.runs (session, session_n) WHERE session IS NOT NULL;
    """,
    # 4: long-term memory (tether.longterm), as in SQLite's step 4; times are epoch seconds.
    """
    CREATE TABLE {schema}.memory_items (
        id         text PRIMARY KEY,
        namespace  text NOT NULL,
        text       text NOT NULL,
        meta       text NOT NULL,
        source     text NOT NULL,
        model      text NOT NULL,
        vector     bytea NOT NULL,
        version    integer NOT NULL,
        created_at float8 NOT NULL,
        updated_at float8 NOT NULL
    );
    CREATE INDEX memory_by_namespace ON {schema}.memory_items (namespace, model);
    CREATE TABLE {schema}.memory_history (
        id         text NOT NULL,
        version    integer NOT NULL,
        text       text NOT NULL,
        meta       text NOT NULL,
        source     text NOT NULL,
        updated_at float8 NOT NULL,
        PRIMARY KEY (id, version)
    );
    CREATE TABLE {schema}.memory_keys (key text PRIMARY KEY, id text NOT NULL);
    CREATE TABLE {schema}.memory_writes (namespace text PRIMARY KEY, n bigint NOT NULL);
    """,
)


def check_version(found: int, known: int, where: str) -> None:
    """Refuse a database written by a newer tether."""
    if found > known:
        raise StoreError(
            f"{where} is at schema version {found}, but this tether knows only up to "
            f"version {known}: upgrade tether to open it"
        )


def migrate_sqlite(conn: sqlite3.Connection, where: str, steps: tuple[str, ...] = SQLITE_STEPS) -> int:
    """Bring an SQLite database (autocommit connection) up to date; return its version."""
    version: int = conn.execute("PRAGMA user_version").fetchone()[0]
    check_version(version, len(steps), where)
    while version < len(steps):
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Read again under the write lock: another process may have migrated.
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            check_version(version, len(steps), where)
            if version < len(steps):
                for statement in _statements(steps[version]):
                    conn.execute(statement)
                version += 1
                conn.execute(f"PRAGMA user_version = {version:d}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    return version


async def migrate_postgres(
    conn: psycopg.AsyncConnection[object], schema: str, steps: tuple[str, ...] = POSTGRES_STEPS
) -> int:
    """Bring the tables under ``schema`` up to date (autocommit connection); return the version."""
    from psycopg import sql

    name = sql.Identifier(schema)
    where = f"PostgreSQL schema {schema!r}"
    async with conn.transaction():
        # One migrator at a time per schema, across every process.
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"tether:{schema}",))
        await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(name))
        await conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {}.schema_migrations "
                "(version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            ).format(name)
        )
        cur = await conn.execute(sql.SQL("SELECT coalesce(max(version), 0) FROM {}.schema_migrations").format(name))
        row = await cur.fetchone()
        version = int(row[0]) if row else 0  # type: ignore[index]
        check_version(version, len(steps), where)
        for step in steps[version:]:
            version += 1
            await conn.execute(sql.SQL(step).format(schema=name))
            await conn.execute(
                sql.SQL("INSERT INTO {}.schema_migrations (version) VALUES (%s)").format(name),
                (version,),
            )
    return version


def _statements(script: str) -> list[str]:
    """Split a migration script on ``;`` (our scripts have no semicolons inside strings)."""
    return [s.strip() for s in script.split(";") if s.strip()]
