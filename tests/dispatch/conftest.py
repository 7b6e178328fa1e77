"""Fixtures for the dispatch tests: a PostgreSQL schema for the store and one for the queue."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from durability.conftest import fresh_schema, pg_url
from durability.harness import PG_DSN

__all__ = ["PG_DSN", "pg_url"]


@pytest.fixture
def queue_schema() -> Iterator[str]:
    """A fresh schema name for the task queue's tables; dropped afterwards."""
    yield from fresh_schema("tether_q")


@pytest.fixture
def store_schema() -> Iterator[str]:
    """A fresh schema name for the run store; dropped afterwards."""
    yield from fresh_schema("tether_s")
