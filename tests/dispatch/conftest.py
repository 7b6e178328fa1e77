"""Fixtures for the dispatch tests: a PostgreSQL schema for the store and one for the queue."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from durability.conftest import _admin, pg_url
from durability.harness import PG_DSN

__all__ = ["PG_DSN", "pg_url"]


@pytest.fixture
def queue_schema() -> Iterator[str]:
    """A fresh schema name for the task queue's tables; dropped afterwards."""
    schema = f"tether_q_{uuid.uuid4().hex[:10]}"
    _admin("SELECT 1")
    try:
        yield schema
    finally:
        _admin(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def store_schema() -> Iterator[str]:
    """A fresh schema name for the run store; dropped afterwards."""
    schema = f"tether_s_{uuid.uuid4().hex[:10]}"
    _admin("SELECT 1")
    try:
        yield schema
    finally:
        _admin(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
