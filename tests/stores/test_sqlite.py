"""What only the SQLite store does: pragmas, migrations, errors, parallel writers."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from tether import ApprovalDecided, Decision, LeaseConflict, Paused, RunStarted, RunState, StoreError, UserError
from tether.stores._migrations import SQLITE_STEPS, migrate_sqlite
from tether.stores.sqlite import SQLiteStore


def test_open_sets_and_reports_the_pragmas(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a" / "b" / "runs.db")  # parents are created
    assert store.pragmas() == {
        "journal_mode": "wal", "synchronous": "normal", "busy_timeout": 5000,
        "user_version": len(SQLITE_STEPS),
    }  # fmt: skip
    store.close()
    full = SQLiteStore(tmp_path / "a" / "b" / "runs.db", durability="full", busy_timeout=1.5)
    assert full.pragmas()["synchronous"] == "full"
    assert full.pragmas()["busy_timeout"] == 1500
    assert full.integrity_check() == "ok"
    full.close()


def test_an_unknown_durability_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="durability must be 'normal' or 'full', not 'off'"):
        SQLiteStore(tmp_path / "runs.db", durability="off")  # type: ignore[arg-type]


def test_a_path_that_cannot_be_opened_is_a_store_error_with_its_cause(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="could not open") as info:
        SQLiteStore(tmp_path)  # a directory
    assert isinstance(info.value.__cause__, sqlite3.Error)


def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a database"):
        SQLiteStore(path)


async def test_a_closed_store_raises_store_error(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    await store.aclose()
    with pytest.raises(StoreError, match="closed"):
        await store.load("r")


async def test_an_event_that_is_not_plain_json_is_refused_whole(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    edit = Decision("r", "c1", "approve", "0" * 32, 0, args={"when": {1, 2}})  # a set is not JSON
    bad = Paused("approval", ("c1",), RunState("r", (), decisions=(edit,)))
    with pytest.raises(StoreError, match="'paused' event is not plain JSON"):
        await store.append("r", [RunStarted("r"), bad], expected_seq=0)
    assert await store.load("r") == [] and await store.get("r") is None
    store.close()


# -- migrations --------------------------------------------------------------


def test_reopening_does_not_migrate_again_and_keeps_the_data(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    asyncio.run(store.append("r", [RunStarted("r")], expected_seq=0))
    store.close()
    again = SQLiteStore(tmp_path / "runs.db")
    assert again.version == len(SQLITE_STEPS)
    assert asyncio.run(again.load("r")) == [RunStarted("r")]
    again.close()


def test_a_database_from_a_newer_tether_is_refused(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "runs.db").close()
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(
        StoreError, match=f"schema version 99, but this tether knows only up to version {len(SQLITE_STEPS)}"
    ):
        SQLiteStore(tmp_path / "runs.db")


def test_migration_steps_apply_in_order_and_a_failing_step_changes_nothing(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    steps = ("CREATE TABLE a (x); INSERT INTO a VALUES (1)", "ALTER TABLE a ADD COLUMN y")
    assert migrate_sqlite(conn, "test db", steps) == 2
    assert migrate_sqlite(conn, "test db", steps) == 2  # idempotent
    broken = (*steps, "CREATE TABLE b (x); INSERT INTO nowhere VALUES (1)")
    with pytest.raises(sqlite3.OperationalError, match="no such table: nowhere"):
        migrate_sqlite(conn, "test db", broken)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"a"}  # step 3's first statement was rolled back with it
    assert conn.execute("SELECT x, y FROM a").fetchall() == [(1, None)]


def test_a_failing_migration_on_open_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE runs (x)")  # squatting on our table name
    with pytest.raises(StoreError, match="table runs already exists") as info:
        SQLiteStore(path)
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)


# -- parallel writers --------------------------------------------------------


def test_writers_in_parallel_threads_never_share_a_seq(tmp_path: Path) -> None:
    """Real contention: 8 threads, each with its own connection and event loop."""
    path = tmp_path / "runs.db"
    SQLiteStore(path).close()
    wins: dict[int, list[int]] = {}
    conflicts = [0]
    start = threading.Barrier(8)

    async def worker(n: int) -> None:
        store = SQLiteStore(path)
        mine = wins.setdefault(n, [])
        start.wait()
        while len(mine) < 25:
            info = await store.get("shared")
            seq = info.seq if info else 0
            try:
                mine.append(
                    await store.append(
                        "shared",
                        [ApprovalDecided(Decision("shared", "c1", "approve", "0" * 32, 0, by=f"writer {n}"))],
                        expected_seq=seq,
                    )
                )
            except LeaseConflict:
                conflicts[0] += 1
        store.close()

    threads = [threading.Thread(target=asyncio.run, args=(worker(n),)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store = SQLiteStore(path)
    events = asyncio.run(store.load("shared"))
    assert len(events) == 200
    for n, seqs in wins.items():
        for seq in seqs:  # the event at each seq a writer was told it got is its own
            assert events[seq - 1] == ApprovalDecided(
                Decision("shared", "c1", "approve", "0" * 32, 0, by=f"writer {n}")
            )
    assert store.integrity_check() == "ok"
    store.close()


async def test_a_writer_locked_out_past_busy_timeout_gets_store_error_and_writes_nothing(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db", busy_timeout=0.05)
    other = sqlite3.connect(tmp_path / "runs.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    with pytest.raises(StoreError, match="database is locked"):
        await store.append("r", [RunStarted("r")], expected_seq=0)
    other.execute("ROLLBACK")
    other.close()
    assert await store.load("r") == []
    assert await store.append("r", [RunStarted("r")], expected_seq=0) == 1
    store.close()


def test_a_new_sqlite_store_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "private" / "runs.db").close()
    assert oct((tmp_path / "private" / "runs.db").stat().st_mode & 0o777) == "0o600"
    assert oct((tmp_path / "private").stat().st_mode & 0o777) == "0o700"
