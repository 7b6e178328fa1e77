"""A run store on PostgreSQL (``pip install 'tether[postgres]'``), on psycopg 3 async.

:class:`PostgresStore` keeps the same contract as the SQLite store: each
:meth:`append` is one transaction that advances the run's row only if its
length still equals ``expected_seq`` (a conditional ``UPDATE``, or an
``INSERT ... ON CONFLICT DO NOTHING`` for a new run), then inserts the events;
the ``(run_id, seq)`` primary key backs that up, and a unique violation is
reported as :class:`~tether.exceptions.LeaseConflict` too. Two workers racing on
one run are serialised by the row lock: the loser sees the winner's row and is
refused before it executes anything.

Tables live in their own schema (``schema="tether"`` by default), created and
migrated on first use. One connection per store, used under an asyncio lock;
a connection that broke is dropped and reopened on the next call (the fencing
rule makes that safe even when a commit's outcome was lost with it).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import select
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from ..events import Event
from ..exceptions import LeaseConflict, StoreError, UserError, import_extra
from ..parts import shared
from ..store import Lease, RunInfo, SessionInfo
from ._blobs import Blobs, names_blobs
from ._codec import decode_event, encode_events
from ._migrations import migrate_postgres
from .rules import (
    check_continues,
    check_free,
    check_latest,
    check_position,
    conflict,
    held_by,
    holds,
    session_of,
    status_after,
)

if TYPE_CHECKING:
    import psycopg

_MAX_PAYLOAD = 7900  # bytes: a NOTIFY payload must stay under 8000
# JSONB cannot hold NUL characters or lone surrogates; such bodies are kept as JSON text.
_NOT_JSONB = re.compile(r"\\u(0000|d[89a-f])", re.IGNORECASE)
_ENVELOPE = "$json"


def _psycopg() -> Any:
    return import_extra("psycopg", extra="postgres", needs="PostgresStore needs psycopg 3")


class PostgresStore:
    """Runs and their events in PostgreSQL, under one schema.

    >>> store = await PostgresStore.connect("postgresql://localhost/app")   # doctest: +SKIP
    >>> agent = Agent(model, tools, store=store)                           # doctest: +SKIP

    The constructor does no I/O: the connection opens (and the schema is
    created or migrated) on first use, or at once with :meth:`connect`.
    """

    def __init__(self, dsn: str, *, schema: str = "tether", connections: int = 1) -> None:
        self._pg = _psycopg()
        if not schema or "\x00" in schema:
            raise UserError(f"invalid PostgreSQL schema name {schema!r}")
        self.dsn = dsn
        self.schema = schema
        self.version = 0
        if not isinstance(connections, int) or connections < 1:
            raise UserError(f"connections must be a positive integer, got {connections!r}")
        self.connections = connections
        self._conn: psycopg.AsyncConnection[Any] | None = None  # the connection opened last
        self._idle: list[psycopg.AsyncConnection[Any]] = []
        self._open: set[psycopg.AsyncConnection[Any]] = set()
        self._slots = asyncio.Semaphore(connections)  # each call has a connection to itself
        self._lock = asyncio.Lock()  # the schema is migrated once
        self._sql = _statements(self._pg.sql.Identifier(schema))
        self.channel = "tether_changes_" + hashlib.sha256(schema.encode()).hexdigest()[:16]

    @classmethod
    async def connect(cls, dsn: str, *, schema: str = "tether", connections: int = 1) -> PostgresStore:
        """A store whose connection is open and whose schema is up to date."""
        store = cls(dsn, schema=schema, connections=connections)
        async with store._session("connect"):
            pass
        return store

    # -- the RunStore protocol -------------------------------------------

    async def append(
        self, run_id: str, events: Sequence[Event], *, expected_seq: int, lease: Lease | None = None
    ) -> int:
        """Append ``events`` after ``expected_seq`` in one transaction; return the new length."""
        blobs: dict[str, bytes] = {}
        rows = [(kind, _jsonb_text(body)) for kind, body in encode_events(events, blobs)]
        new_status = status_after("", events) or None  # None: keep the run's status
        new_seq = expected_seq + len(rows)
        if len(rows) == 1 and expected_seq > 0 and not blobs and len(run_id.encode()) < _MAX_PAYLOAD:
            return await self._append_one(run_id, rows[0], expected_seq, new_status, lease)
        async with self._session(f"append to run {run_id!r}", tx=True, run_id=run_id, expected=expected_seq) as conn:
            if lease is not None:
                await self._check_lease(conn, lease)
            if not rows:
                found = await self._seq(conn, run_id)
                check_position(run_id, found, expected_seq)
                return found
            if expected_seq == 0:
                session, n = await self._session_place(conn, events)
                cur = await conn.execute(self._sql["create"], (run_id, new_status or "running", new_seq, session, n))
            else:
                cur = await conn.execute(self._sql["advance"], (new_seq, new_status, run_id, expected_seq))
            advanced = await cur.fetchone()
            if advanced is None:
                raise conflict(run_id, await self._seq(conn, run_id), expected_seq)
            if expected_seq and advanced[1] is not None:  # after the row lock: a newer run's start is visible
                await self._check_last(conn, run_id, advanced[1], advanced[2])
            if blobs:
                await self._keep_blobs(conn, run_id, blobs)
            params = [(run_id, expected_seq + i, kind, body) for i, (kind, body) in enumerate(rows, 1)]
            if len(params) == 1:
                await conn.execute(self._sql["insert"], params[0])
            else:
                await conn.cursor().executemany(self._sql["insert"], params)  # pipelined
            if len(run_id.encode()) < _MAX_PAYLOAD:  # delivered to listeners when this commits
                await conn.execute("SELECT pg_notify(%s, %s)", (self.channel, run_id))
        return new_seq

    async def _append_one(
        self, run_id: str, row: tuple[str, str], expected_seq: int, status: str | None, lease: Lease | None
    ) -> int:
        """The hot path (one event on an existing run): lease check, advance, insert and notify in one
        statement, so one round trip; a refusal is explained by a second look."""
        kind, body = row
        owner, token = (lease.owner, lease.token) if lease is not None else (None, None)
        params = (run_id, owner, token, expected_seq + 1, status, run_id, expected_seq, lease is None,
                  expected_seq + 1, kind, body, self.channel)  # fmt: skip
        async with self._session(f"append to run {run_id!r}", run_id=run_id, expected=expected_seq) as conn:
            cur = await conn.execute(self._sql["append_one"], params)
            found = await cur.fetchone()
            if found is not None and found[0] == 1:
                return expected_seq + 1
            async with conn.transaction():  # refused: say why, as the general path would
                if lease is not None:
                    await self._check_lease(conn, lease)
                cur = await conn.execute(self._sql["run_place"], (run_id,))
                place = await cur.fetchone()
                if place is not None and place[0] is not None:
                    await self._check_last(conn, run_id, place[0], place[1])
                raise conflict(run_id, await self._seq(conn, run_id), expected_seq)

    async def acquire(self, run_id: str, owner: str, ttl: float, *, take_over: str | None = None) -> Lease:
        """Take (or renew) the run's lease for ``ttl`` seconds, on the database's clock."""
        async with self._session(f"take the lease of run {run_id!r}", tx=True) as conn:
            cur = await conn.execute(self._sql["acquire"], (run_id, owner, ttl, take_over))
            row = await cur.fetchone()
            if row is None:  # a live lease of another owner
                raise held_by(run_id, await self._lease(conn, run_id), await self._now(conn))
        return Lease(run_id, owner, int(row[0]), float(row[1]))

    async def release(self, lease: Lease) -> None:
        """Let the lease expire now, if it is still this one."""
        async with self._session(f"release the lease of run {lease.run_id!r}") as conn:
            await conn.execute(self._sql["release"], (lease.run_id, lease.owner, lease.token))

    async def load(self, run_id: str) -> list[Event]:
        """Every committed event of the run, in order ([] if unknown)."""
        async with self._session(f"load run {run_id!r}") as conn:
            cur = await conn.execute(self._sql["load"], (run_id,))
            rows = await cur.fetchall()
            raw: dict[str, bytes] = {}
            if any(names_blobs(_unwrap(body)) for _, _, body in rows):
                cur = await conn.execute(self._sql["blobs"], (run_id,))
                raw = {d: bytes(data) for d, data in await cur.fetchall()}
        blobs = Blobs(run_id, lambda: raw)
        with shared():  # a part many events name is decoded once, one bytes object
            return [decode_event(run_id, seq, _unwrap(body), blobs) for seq, _, body in rows]

    async def get(self, run_id: str) -> RunInfo | None:
        """The run's status, length and times, or None if unknown."""
        async with self._session(f"get run {run_id!r}") as conn:
            cur = await conn.execute(self._sql["get"], (run_id,))
            row = await cur.fetchone()
        return RunInfo(*row) if row else None

    async def list_runs(self, status: str | None = None, limit: int = 100) -> list[RunInfo]:
        """Runs, most recently updated first, optionally only those with ``status``."""
        async with self._session("list runs") as conn:
            if status is None:
                cur = await conn.execute(self._sql["list"], (limit,))
            else:
                cur = await conn.execute(self._sql["list_status"], (status, limit))
            rows = await cur.fetchall()
        return [RunInfo(*row) for row in rows]

    async def delete(self, run_id: str) -> None:
        """Forget the run and all its events (a no-op for an unknown run)."""
        async with self._session(f"delete run {run_id!r}", tx=True) as conn:
            await conn.execute(self._sql["delete_events"], (run_id,))
            await conn.execute(self._sql["delete_run"], (run_id,))
            await conn.execute(self._sql["delete_lease"], (run_id,))
            await conn.execute(self._sql["delete_blobs"], (run_id,))

    async def sessions(self, name: str | None = None, limit: int = 100) -> list[SessionInfo]:
        """Sessions, most recently updated first (only ``name``'s, when given); by the session index."""
        async with self._session("list sessions") as conn:
            if name is None:
                cur = await conn.execute(self._sql["sessions"], (limit,))
            else:
                cur = await conn.execute(self._sql["session"], (name, limit))
            rows = await cur.fetchall()
        return [SessionInfo(*row) for row in rows]

    async def changes(self, *, interval: float = 0.2) -> AsyncIterator[str]:
        """The id of each run as its appends commit, from any process: ``LISTEN`` on the schema's channel.

        Every append notifies :attr:`channel` in its transaction, so listeners
        hear of a commit when it is visible. The iterator holds a connection of
        its own; if it breaks, it reconnects after ``interval`` seconds (changes
        made meanwhile are not replayed: look at the runs again after a gap).
        """
        pg = self._pg
        while True:
            try:
                async with await pg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
                    await conn.execute(pg.sql.SQL("LISTEN {}").format(pg.sql.Identifier(self.channel)))
                    async for note in conn.notifies():
                        yield note.payload
            except (pg.Error, OSError):  # the server went away: listen again once it is back
                await asyncio.sleep(max(interval, 0.05))

    async def aclose(self) -> None:
        """Close the connection; a later call would open a new one."""
        conns, self._open, self._idle, self._conn = list(self._open), set(), [], None
        for conn in conns:
            await conn.close()

    async def __aenter__(self) -> PostgresStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"PostgresStore(schema={self.schema!r})"

    # -- connection and transactions ---------------------------------------

    async def _connection(self) -> psycopg.AsyncConnection[Any]:
        while self._idle:
            idle = self._idle.pop()
            if not idle.closed and not _dropped(idle):
                return idle
            await self._drop(idle)  # its server went away (a restart, a terminated backend): open another
        try:
            conn: psycopg.AsyncConnection[Any] = await self._pg.AsyncConnection.connect(self.dsn, autocommit=True)
        except self._pg.Error as exc:
            raise StoreError(f"cannot connect to PostgreSQL: {exc}") from exc
        try:
            async with self._lock:
                if not self.version:
                    self.version = await migrate_postgres(conn, self.schema)
        except BaseException:
            await conn.close()
            raise
        self._open.add(conn)
        self._conn = conn
        return conn

    async def _drop(self, conn: psycopg.AsyncConnection[Any] | None) -> None:
        if conn is not None:
            self._open.discard(conn)
            await conn.close()

    @asynccontextmanager
    async def _session(
        self, what: str, *, tx: bool = False, run_id: str = "", expected: int = 0
    ) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A connection to this call alone (in one transaction if ``tx``); psycopg errors become StoreError.

        With ``connections=N``, up to N calls (of different runs) talk to the server at once.
        """
        pg = self._pg
        async with self._slots:
            conn = None
            try:
                conn = await self._connection()
                if tx:
                    async with conn.transaction():
                        yield conn
                else:
                    yield conn
            except pg.errors.UniqueViolation as exc:
                if getattr(exc.diag, "constraint_name", None) == "runs_by_session":  # two starters, one session
                    raise LeaseConflict(
                        f"run {run_id!r} continues a session another process moved on meanwhile: start again"
                    ) from exc
                # Backs up the seq check: another writer inserted the same (run_id, seq) first.
                raise LeaseConflict(
                    f"run {run_id!r} already has an event after #{expected}: another worker advanced it"
                ) from exc
            except pg.Error as exc:
                if isinstance(exc, pg.OperationalError) or _broken(conn):
                    await self._drop(conn)
                    conn = None
                raise StoreError(f"PostgreSQL store could not {what}: {exc}") from exc
            except asyncio.CancelledError:
                await self._drop(conn)  # closing aborts whatever the server was doing for us
                conn = None
                raise
            finally:
                if conn is not None and conn in self._open:
                    self._idle.append(conn)

    async def _keep_blobs(self, conn: psycopg.AsyncConnection[Any], run_id: str, blobs: dict[str, bytes]) -> None:
        """Send the parts this run does not hold yet (a part named again is not sent again)."""
        cur = await conn.execute(self._sql["held_blobs"], (run_id, list(blobs)))
        held = {d for (d,) in await cur.fetchall()}
        new = [(run_id, d, data) for d, data in blobs.items() if d not in held]
        if new:
            await conn.cursor().executemany(self._sql["insert_blob"], new)

    async def _session_place(
        self, conn: psycopg.AsyncConnection[Any], events: Sequence[Event]
    ) -> tuple[str | None, int | None]:
        """A new run's session and position; refused unless it continues the session's last run
        (two racing starters both take the next position: the unique index refuses the second)."""
        found = session_of(events)
        if found is None:
            return None, None
        session, continues = found
        cur = await conn.execute(self._sql["session_last"], (session,))
        last = await cur.fetchone()
        check_continues(session, continues, last[0] if last else None)
        if last is not None:  # its rows are locked: a worker taking its lease waits for this start
            lease = await self._lease(conn, last[0], lock=True, update=True)
            if lease is not None:  # the database's clock is read only when there is a lease to judge
                check_free(session, lease, await self._now(conn))
        return session, (int(last[1]) if last else 0) + 1

    async def _check_last(self, conn: psycopg.AsyncConnection[Any], run_id: str, session: str, place: int) -> None:
        """Refuse to advance an older run of a session once a newer run continued the session."""
        cur = await conn.execute(self._sql["session_newer"], (session, place))
        newer = await cur.fetchone()
        check_latest(run_id, session, newer[0] if newer else None)

    async def _check_lease(self, conn: psycopg.AsyncConnection[Any], lease: Lease) -> None:
        current = await self._lease(conn, lease.run_id, lock=True)
        if not holds(current, lease):
            raise held_by(lease.run_id, current, await self._now(conn))

    async def _lease(
        self, conn: psycopg.AsyncConnection[Any], run_id: str, *, lock: bool = False, update: bool = False
    ) -> Lease | None:
        cur = await conn.execute(self._sql["lease_update" if update else "lease_lock" if lock else "lease"], (run_id,))
        row = await cur.fetchone()
        return Lease(run_id, row[0], int(row[1]), float(row[2])) if row else None

    async def _now(self, conn: psycopg.AsyncConnection[Any]) -> float:
        cur = await conn.execute("SELECT extract(epoch from clock_timestamp())::float8")
        row = await cur.fetchone()
        return float(row[0]) if row else 0.0

    async def _seq(self, conn: psycopg.AsyncConnection[Any], run_id: str) -> int:
        cur = await conn.execute(self._sql["seq"], (run_id,))
        row = await cur.fetchone()
        return int(row[0]) if row else 0


def _dropped(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Whether the server closed an idle connection: a terminated backend writes FATAL, then EOF, so
    the socket of a connection nobody is using turns readable. One syscall, no round trip."""
    try:
        return bool(select.select([conn.fileno()], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def _broken(conn: psycopg.AsyncConnection[Any] | None) -> bool:
    return conn is not None and (conn.closed or conn.broken)


def _statements(schema: Any) -> dict[str, Any]:
    from psycopg import sql

    def q(text: str) -> Any:
        return sql.SQL(text).format(s=schema)

    times = "extract(epoch from r.created_at)::float8, extract(epoch from r.updated_at)::float8"
    columns = f"r.run_id, r.status, r.seq, {times}, l.owner, l.expires_at"
    runs = "{s}.runs r LEFT JOIN {s}.leases l ON l.run_id = r.run_id"
    now = "extract(epoch from clock_timestamp())::float8"
    return {
        "create": q(
            "INSERT INTO {s}.runs (run_id, status, seq, created_at, updated_at, session, session_n) "
            "VALUES (%s, %s, %s, now(), now(), %s, %s) ON CONFLICT (run_id) DO NOTHING RETURNING seq"
        ),
        "held_blobs": q("SELECT sha256 FROM {s}.blobs WHERE run_id = %s AND sha256 = ANY(%s)"),
        "insert_blob": q("INSERT INTO {s}.blobs (run_id, sha256, data) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"),
        "blobs": q("SELECT sha256, data FROM {s}.blobs WHERE run_id = %s"),
        "delete_blobs": q("DELETE FROM {s}.blobs WHERE run_id = %s"),
        "session_last": q(
            "SELECT run_id, session_n FROM {s}.runs WHERE session = %s ORDER BY session_n DESC LIMIT 1 FOR UPDATE"
        ),
        "session_newer": q(
            "SELECT run_id FROM {s}.runs WHERE session = %s AND session_n > %s ORDER BY session_n DESC LIMIT 1"
        ),
        "sessions": q(_SESSIONS.format(where="")),
        "session": q(_SESSIONS.format(where="AND session = %s")),
        "advance": q(
            "UPDATE {s}.runs SET seq = %s, status = coalesce(%s, status), updated_at = now() "
            "WHERE run_id = %s AND seq = %s RETURNING seq, session, session_n"
        ),
        "insert": q(
            "INSERT INTO {s}.events (run_id, seq, kind, body, created_at) VALUES (%s, %s, %s, %s::jsonb, now())"
        ),
        # One event, one statement: the lease (if any) must be the current one (locked against a take-over
        # until this commits), the run must still be at the expected position; then the event and the
        # notification. A statement not referenced by the final SELECT would not run: each is counted.
        "append_one": q(
            "WITH l AS (SELECT 1 FROM {s}.leases WHERE run_id = %s AND owner = %s AND token = %s FOR SHARE), "
            "r AS (UPDATE {s}.runs SET seq = %s, status = coalesce(%s, status), updated_at = now() "
            "WHERE run_id = %s AND seq = %s AND (%s OR EXISTS (SELECT 1 FROM l)) "
            "AND (session IS NULL OR NOT EXISTS (SELECT 1 FROM {s}.runs o "
            "WHERE o.session = runs.session AND o.session_n > runs.session_n)) RETURNING run_id), "
            "e AS (INSERT INTO {s}.events (run_id, seq, kind, body, created_at) "
            "SELECT r.run_id, %s, %s, %s::jsonb, now() FROM r RETURNING 1), "
            "n AS (SELECT pg_notify(%s, r.run_id) FROM r) "
            "SELECT (SELECT count(*) FROM e), (SELECT count(*) FROM n)"
        ),
        "seq": q("SELECT seq FROM {s}.runs WHERE run_id = %s"),
        "load": q("SELECT seq, kind, body FROM {s}.events WHERE run_id = %s ORDER BY seq"),
        "get": q(f"SELECT {columns} FROM {runs} WHERE r.run_id = %s"),
        "list": q(f"SELECT {columns} FROM {runs} ORDER BY r.updated_at DESC, r.run_id LIMIT %s"),
        "list_status": q(
            f"SELECT {columns} FROM {runs} WHERE r.status = %s ORDER BY r.updated_at DESC, r.run_id LIMIT %s"
        ),
        # Take a free or expired lease, or renew our own; a live lease of another owner returns no row.
        "acquire": q(
            f"INSERT INTO {{s}}.leases AS l (run_id, owner, token, expires_at) VALUES (%s, %s, 1, {now} + %s::float8) "
            "ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at, "
            "token = l.token + (l.owner <> excluded.owner)::int "
            f"WHERE l.owner = excluded.owner OR l.expires_at <= {now} OR l.owner = %s RETURNING token, expires_at"
        ),
        "release": q("UPDATE {s}.leases SET expires_at = 0 WHERE run_id = %s AND owner = %s AND token = %s"),
        "lease": q("SELECT owner, token, expires_at FROM {s}.leases WHERE run_id = %s"),
        "lease_lock": q("SELECT owner, token, expires_at FROM {s}.leases WHERE run_id = %s FOR SHARE"),
        "lease_update": q("SELECT owner, token, expires_at FROM {s}.leases WHERE run_id = %s FOR UPDATE"),
        "run_place": q("SELECT session, session_n FROM {s}.runs WHERE run_id = %s"),
        "delete_lease": q("DELETE FROM {s}.leases WHERE run_id = %s"),
        "delete_events": q("DELETE FROM {s}.events WHERE run_id = %s"),
        "delete_run": q("DELETE FROM {s}.runs WHERE run_id = %s"),
    }


# The last run of each session (by position), with how many runs it has had and when it began.
_SESSIONS = (
    "SELECT r.session, r.run_id, r.status, s.n, extract(epoch from s.first)::float8, "
    "extract(epoch from r.updated_at)::float8 FROM ("
    "SELECT session, count(*) AS n, min(created_at) AS first, max(session_n) AS last FROM {{s}}.runs "
    "WHERE session IS NOT NULL {where} GROUP BY session) s "
    "JOIN {{s}}.runs r ON r.session = s.session AND r.session_n = s.last "
    "ORDER BY r.updated_at DESC, r.session LIMIT %s"
)


def _jsonb_text(body: str) -> str:
    """The body as JSONB input, wrapped as a JSON string when JSONB cannot hold it."""
    if _NOT_JSONB.search(body):
        return json.dumps({_ENVELOPE: body}, separators=(",", ":"))
    return body


def _unwrap(body: Any) -> Any:
    if isinstance(body, dict) and len(body) == 1 and _ENVELOPE in body:
        return body[_ENVELOPE]
    return body
