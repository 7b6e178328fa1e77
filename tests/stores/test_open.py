"""open_store(url): one string picks the store."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tether import RunStarted, UserError
from tether.stores._open import open_store
from tether.stores.memory import MemoryStore
from tether.stores.postgres import PostgresStore
from tether.stores.sqlite import SQLiteStore

from .conftest import PG_DSN


def test_memory() -> None:
    assert isinstance(open_store("memory://"), MemoryStore)


@pytest.mark.parametrize(
    ("url", "where"),
    [
        ("sqlite:///runs.db", "runs.db"),  # relative to the working directory
        ("sqlite:///.tether/runs.db", ".tether/runs.db"),
        ("sqlite:///sub/runs.db?durability=full", "sub/runs.db"),
        (".tether/runs.db", ".tether/runs.db"),  # a plain path
    ],
)
async def test_sqlite_urls_and_paths(url: str, where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store(url)
    assert isinstance(store, SQLiteStore)
    assert Path(store.path) == Path(where) and (tmp_path / where).exists()
    assert store.durability == ("full" if "full" in url else "normal")
    await store.append("r", [RunStarted("r")], expected_seq=0)
    await store.aclose()


async def test_an_absolute_sqlite_url(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/abs.db")  # four slashes: sqlite:////tmp/...
    assert isinstance(store, SQLiteStore) and store.path == f"{tmp_path}/abs.db"
    await store.aclose()
    plain = open_store(tmp_path / "p.db")  # a Path works too
    assert isinstance(plain, SQLiteStore)
    await plain.aclose()


def test_postgres_urls_pick_the_schema_and_pass_the_rest_to_libpq() -> None:
    store = open_store("postgresql://app@db.internal:5433/prod?schema=agents&sslmode=require")
    assert isinstance(store, PostgresStore)
    assert store.schema == "agents"
    assert store.dsn == "postgresql://app@db.internal:5433/prod?sslmode=require"
    assert open_store("postgres://localhost/x").schema == "tether"  # type: ignore[attr-defined]


@pytest.mark.postgres
async def test_a_postgres_url_opens_a_working_store() -> None:
    from .conftest import check_postgres, drop_schema

    await check_postgres()
    sep, schema = "&" if "?" in PG_DSN else "?", f"tether_test_{uuid.uuid4().hex[:12]}"
    store = open_store(f"{PG_DSN}{sep}schema={schema}")
    try:
        await store.append("r", [RunStarted("r")], expected_seq=0)
        assert await store.load("r") == [RunStarted("r")]
    finally:
        await store.aclose()
        await drop_schema(schema)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://x/y", "unknown store URL scheme 'mysql'"),
        ("sqlite://runs.db", "must look like sqlite:///relative.db"),
        ("sqlite:///runs.db?mode=ro", r"unknown SQLite store options \['mode'\]"),
        ("sqlite:///runs.db?durability=off", "durability must be 'normal' or 'full'"),
    ],
)
def test_bad_urls_are_user_errors(url: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match=message):
        open_store(url)
