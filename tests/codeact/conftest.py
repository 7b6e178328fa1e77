"""Fixtures for the code-action tests: a workspace the sandbox can enter, an oracle file, a store URL."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from durability.conftest import fresh_schema, pg_url

from .desk import open_workspace


@pytest.fixture
def workspace() -> Iterator[Path]:
    path = open_workspace()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def oracle(tmp_path: Path) -> Path:
    return tmp_path / "oracle.jsonl"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A real SQLite file, or a fresh PostgreSQL schema (dropped afterwards)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
        return
    for schema in fresh_schema("tether_codeact"):
        yield pg_url(schema)
