"""The embedded run store: one SQLite file, stdlib ``sqlite3``, WAL journal.

:class:`SQLiteStore` is tether's default durable store. Every :meth:`append` is
one ``BEGIN IMMEDIATE`` transaction that checks the run's length against
``expected_seq`` (the fencing rule of :mod:`tether.stores`), inserts the events
and updates the run's status; it returns only once SQLite has committed, and a
failed append leaves nothing behind.

Durability: ``"normal"`` (``synchronous=NORMAL`` in WAL mode) makes a commit
survive the process being killed at any moment; ``"full"``
(``synchronous=FULL``) also survives power loss or an OS crash, at the price of
an fsync per commit. See ``docs/stores.md`` for measured costs.

The methods are ``async`` to fit the :class:`~tether.stores.RunStore` protocol
but run the SQL inline: a local WAL commit costs tens of microseconds, less than
a hop to a worker thread would. A busy database (another process writing)
blocks the caller up to ``busy_timeout``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from ..events import Event
from ..exceptions import StoreError, UserError
from ..parts import shared
from ..store import Lease, RunInfo, SessionInfo
from ._blobs import Blobs
from ._codec import decode_event, encode_events
from ._migrations import migrate_sqlite
from .rules import (
    check_continues,
    check_free,
    check_latest,
    check_position,
    granted,
    held_by,
    holds,
    session_of,
    status_after,
)

Durability = Literal["normal", "full"]
_SYNCHRONOUS = {"normal": 1, "full": 2}
_RUN_COLUMNS = "run_id, status, seq, created_at, updated_at"
_RUN_ROW = "SELECT status, seq, session, session_n FROM runs WHERE run_id = ?"
_INFO = (
    "SELECT r.run_id, r.status, r.seq, r.created_at, r.updated_at, l.owner, l.expires_at "
    "FROM runs r LEFT JOIN leases l ON l.run_id = r.run_id"
)

# The last run of each session (by position), with how many runs it has had and when it began.
_SESSIONS = (
    "SELECT r.session, r.run_id, r.status, s.n, s.first, r.updated_at FROM ("
    "SELECT session, count(*) AS n, min(created_at) AS first, max(session_n) AS last FROM runs "
    "WHERE session IS NOT NULL {where} GROUP BY session) s "
    "JOIN runs r ON r.session = s.session AND r.session_n = s.last "
    "ORDER BY r.updated_at DESC, r.session LIMIT {p}"
)


class SQLiteStore:
    """Runs and their events in one SQLite database file.

    >>> import asyncio, tempfile
    >>> from tether import Agent
    >>> from tether.testing import ScriptedModel
    >>> store = SQLiteStore(tempfile.mkdtemp() + "/runs.db")
    >>> Agent(ScriptedModel(["hello"]), store=store).run_sync("hi", run_id="r1").status
    'finished'
    >>> [e.kind for e in asyncio.run(store.load("r1"))]
    ['run-started', 'model-replied', 'finished']
    >>> store.close()

    The file (and its parent directory) is created if missing and migrated to
    the current schema. One connection per store object; safe to share between
    tasks and threads (calls are serialised by a lock).
    """

    def __init__(self, path: str | Path, *, durability: Durability = "normal", busy_timeout: float = 5.0) -> None:
        if durability not in _SYNCHRONOUS:
            raise UserError(f"durability must be 'normal' or 'full', not {durability!r}")
        self.path = str(path)
        self.durability: Durability = durability
        self._guard = threading.Lock()
        with self._translated("open"):
            _create_private(Path(self.path))
            self._conn = sqlite3.connect(self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
        try:
            with self._translated("open"):
                self._configure(busy_timeout)
                self.version = migrate_sqlite(self._conn, f"SQLite store {self.path!r}")
        except BaseException:
            self._conn.close()
            raise

    def _configure(self, busy_timeout: float) -> None:
        conn = self._conn
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000):d}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode != "wal":
            raise StoreError(f"SQLite store {self.path!r} cannot use WAL journal mode (got {mode!r})")
        conn.execute(f"PRAGMA synchronous = {_SYNCHRONOUS[self.durability]:d}")
        found = conn.execute("PRAGMA synchronous").fetchone()[0]
        if found != _SYNCHRONOUS[self.durability]:
            raise StoreError(f"SQLite store {self.path!r} refused synchronous={self.durability!r}")

    # -- the RunStore protocol -------------------------------------------

    async def append(
        self, run_id: str, events: Sequence[Event], *, expected_seq: int, lease: Lease | None = None
    ) -> int:
        """Append ``events`` after ``expected_seq`` in one transaction; return the new length."""
        blobs: dict[str, bytes] = {}
        rows = encode_events(events, blobs)
        with self._write(f"append to run {run_id!r}") as conn:
            row = conn.execute(_RUN_ROW, (run_id,)).fetchone()
            status, seq, session, place = row if row else ("running", 0, None, None)
            check_position(run_id, seq, expected_seq)
            if session is not None and place is not None:  # an older run of a session stays put past a newer one
                _check_last(conn, run_id, session, place)
            if lease is not None:
                current = _lease(conn, run_id)
                if not holds(current, lease):
                    raise held_by(run_id, current, time.time())
            if not rows:
                return seq
            now = time.time()
            conn.executemany(
                "INSERT INTO events (run_id, seq, kind, body, created_at) VALUES (?, ?, ?, ?, ?)",
                [(run_id, seq + i, kind, body, now) for i, (kind, body) in enumerate(rows, 1)],
            )
            new_status, new_seq = status_after(status, events), seq + len(rows)
            if blobs:
                _keep_blobs(conn, run_id, blobs)
            if row is None:
                session, n = _session_place(conn, events)
                conn.execute(
                    f"INSERT INTO runs ({_RUN_COLUMNS}, session, session_n) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (run_id, new_status, new_seq, now, now, session, n),
                )
            elif new_status == status:  # leave the status index untouched
                conn.execute("UPDATE runs SET seq = ?, updated_at = ? WHERE run_id = ?", (new_seq, now, run_id))
            else:
                conn.execute(
                    "UPDATE runs SET status = ?, seq = ?, updated_at = ? WHERE run_id = ?",
                    (new_status, new_seq, now, run_id),
                )
        return new_seq

    async def acquire(self, run_id: str, owner: str, ttl: float, *, take_over: str | None = None) -> Lease:
        """Take (or renew) the run's lease for ``ttl`` seconds; a live lease of another owner is refused."""
        with self._write(f"take the lease of run {run_id!r}") as conn:
            lease = granted(run_id, _lease(conn, run_id), owner, ttl, time.time(), take_over=take_over)
            conn.execute(
                "INSERT INTO leases (run_id, owner, token, expires_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, token = excluded.token, "
                "expires_at = excluded.expires_at",
                (run_id, owner, lease.token, lease.expires_at),
            )
        return lease

    async def release(self, lease: Lease) -> None:
        """Let the lease expire now, if it is still this one."""
        with self._write(f"release the lease of run {lease.run_id!r}") as conn:
            conn.execute(
                "UPDATE leases SET expires_at = 0 WHERE run_id = ? AND owner = ? AND token = ?",
                (lease.run_id, lease.owner, lease.token),
            )

    async def load(self, run_id: str) -> list[Event]:
        """Every committed event of the run, in order ([] if unknown)."""
        with self._read(f"load run {run_id!r}") as conn:
            rows = conn.execute("SELECT seq, body FROM events WHERE run_id = ? ORDER BY seq", (run_id,)).fetchall()
        blobs = Blobs(run_id, lambda: self._blobs(run_id))
        with shared():  # a part many events name is decoded once, one bytes object
            return [decode_event(run_id, seq, body, blobs) for seq, body in rows]

    def _blobs(self, run_id: str) -> dict[str, bytes]:
        with self._read(f"load the parts of run {run_id!r}") as conn:
            return dict(conn.execute("SELECT sha256, data FROM blobs WHERE run_id = ?", (run_id,)).fetchall())

    async def get(self, run_id: str) -> RunInfo | None:
        """The run's status, length and times, or None if unknown."""
        with self._read(f"get run {run_id!r}") as conn:
            row = conn.execute(f"{_INFO} WHERE r.run_id = ?", (run_id,)).fetchone()
        return RunInfo(*row) if row else None

    async def list_runs(self, status: str | None = None, limit: int = 100) -> list[RunInfo]:
        """Runs, most recently updated first, optionally only those with ``status``."""
        where, params = ("WHERE r.status = ?", (status, limit)) if status else ("", (limit,))
        with self._read("list runs") as conn:
            rows = conn.execute(f"{_INFO} {where} ORDER BY r.updated_at DESC, r.run_id LIMIT ?", params).fetchall()
        return [RunInfo(*row) for row in rows]

    async def delete(self, run_id: str) -> None:
        """Forget the run and all its events (a no-op for an unknown run)."""
        with self._write(f"delete run {run_id!r}") as conn:
            conn.execute("DELETE FROM events WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM leases WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM blobs WHERE run_id = ?", (run_id,))

    async def sessions(self, name: str | None = None, limit: int = 100) -> list[SessionInfo]:
        """Sessions, most recently updated first (only ``name``'s, when given); by the session index."""
        where, params = ("AND session = ?", (name, limit)) if name is not None else ("", (limit,))
        query = _SESSIONS.format(where=where, p="?")
        with self._read("list sessions") as conn:
            rows = conn.execute(query, params).fetchall()
        return [SessionInfo(*row) for row in rows]

    async def aclose(self) -> None:
        self.close()

    async def changes(self, *, interval: float = 0.2) -> AsyncIterator[str]:
        """The id of each run whose journal changed, written by this or any other process.

        Polls on a connection of its own every ``interval`` seconds:
        ``PRAGMA data_version`` (a few microseconds) says whether anyone
        committed since the last look; only then are the runs updated in the
        last moments read and compared with what was seen. A run may be
        reported once more than needed, never missed while the iterator runs.
        """
        with _watcher(self.path) as conn:
            version, seen = _data_version(conn), _RecentRuns(time.time())
            while True:
                await asyncio.sleep(interval)
                now = _data_version(conn)
                if now != version:
                    version = now
                    for run_id in seen.changed(conn):
                        yield run_id

    # -- SQLite specifics --------------------------------------------------

    def close(self) -> None:
        """Close the connection (the last one to close checkpoints the WAL)."""
        with self._guard:
            self._conn.close()

    def pragmas(self) -> dict[str, Any]:
        """The settings this store runs with, read back from SQLite."""
        with self._read("read pragmas") as conn:
            names = ("journal_mode", "synchronous", "busy_timeout", "user_version")
            found = {name: conn.execute(f"PRAGMA {name}").fetchone()[0] for name in names}
        found["synchronous"] = {1: "normal", 2: "full"}.get(found["synchronous"], found["synchronous"])
        return found

    def integrity_check(self) -> str:
        """``"ok"``, or SQLite's list of problems found in the database file."""
        with self._read("check integrity") as conn:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
        return "\n".join(str(r[0]) for r in rows)

    async def __aenter__(self) -> SQLiteStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r}, durability={self.durability!r})"

    # -- transactions and errors -------------------------------------------

    @contextlib.contextmanager
    def _read(self, what: str) -> Iterator[sqlite3.Connection]:
        with self._guard, self._translated(what):
            yield self._conn

    @contextlib.contextmanager
    def _write(self, what: str) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: committed on success, rolled back on any error."""
        with self._guard, self._translated(what):
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise

    @contextlib.contextmanager
    def _translated(self, what: str) -> Iterator[None]:
        try:
            yield
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"SQLite store {self.path!r} could not {what}: {exc}") from exc


def _create_private(path: Path) -> None:
    """A new database file (and any folder made for it) only its owner can read: runs hold
    whatever the model and the tools saw. SQLite gives its -wal and -shm files the same mode."""
    if str(path) == ":memory:" or path.exists():
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))


def _keep_blobs(conn: sqlite3.Connection, run_id: str, blobs: dict[str, bytes]) -> None:
    """Write the parts this run does not hold yet (a part named again is not written again)."""
    digests = list(blobs)
    marks = ", ".join("?" * len(digests))
    held = {
        d
        for (d,) in conn.execute(
            f"SELECT sha256 FROM blobs WHERE run_id = ? AND sha256 IN ({marks})", (run_id, *digests)
        )
    }
    conn.executemany(
        "INSERT INTO blobs (run_id, sha256, data) VALUES (?, ?, ?)",
        [(run_id, d, blobs[d]) for d in digests if d not in held],
    )


def _session_place(conn: sqlite3.Connection, events: Sequence[Event]) -> tuple[str | None, int | None]:
    """A new run's session and position in it, refused unless it continues the session's last run."""
    found = session_of(events)
    if found is None:
        return None, None
    session, continues = found
    last = conn.execute(
        "SELECT run_id, session_n FROM runs WHERE session = ? ORDER BY session_n DESC LIMIT 1", (session,)
    ).fetchone()
    check_continues(session, continues, last[0] if last else None)
    if last is not None:
        check_free(session, _lease(conn, last[0]), time.time())
    return session, (last[1] if last else 0) + 1


def _check_last(conn: sqlite3.Connection, run_id: str, session: str, place: int) -> None:
    newer = conn.execute(
        "SELECT run_id FROM runs WHERE session = ? AND session_n > ? ORDER BY session_n DESC LIMIT 1", (session, place)
    ).fetchone()
    check_latest(run_id, session, newer[0] if newer else None)


def _lease(conn: sqlite3.Connection, run_id: str) -> Lease | None:
    row = conn.execute("SELECT owner, token, expires_at FROM leases WHERE run_id = ?", (run_id,)).fetchone()
    return Lease(run_id, *row) if row else None


@contextlib.contextmanager
def _watcher(path: str) -> Iterator[sqlite3.Connection]:
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise StoreError(f"SQLite store {path!r} could not watch for changes: {exc}") from exc
    try:
        yield conn
    finally:
        conn.close()


def _data_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


class _RecentRuns:
    """The runs updated in the last few seconds and their lengths: what a watcher compares against."""

    SLACK = 5.0  # seconds: a commit stamped this long before a look is still caught

    def __init__(self, since: float) -> None:
        self.since = since - self.SLACK
        self.seqs: dict[str, tuple[int, float]] = {}

    def changed(self, conn: sqlite3.Connection) -> list[str]:
        rows = conn.execute("SELECT run_id, seq, updated_at FROM runs WHERE updated_at >= ?", (self.since,)).fetchall()
        out = [run_id for run_id, seq, _ in rows if self.seqs.get(run_id, (None,))[0] != seq]
        self.seqs.update((run_id, (seq, at)) for run_id, seq, at in rows)
        newest = max((at for _, _, at in rows), default=self.since + self.SLACK)
        self.since = max(self.since, newest - self.SLACK)
        self.seqs = {r: v for r, v in self.seqs.items() if v[1] >= self.since}
        return out


def _rollback(conn: sqlite3.Connection) -> None:
    # SQLite may already have rolled back by itself (e.g. on SQLITE_FULL).
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
