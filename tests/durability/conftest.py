"""Fixtures for the durability suite: a PostgreSQL schema of our own (the server must answer)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

from .harness import PG_DSN


def pg_url(schema: str) -> str:
    """``TETHER_PG_DSN`` with ``schema=`` added (the store URL form ``open_store`` reads)."""
    parts = urlsplit(PG_DSN)
    query = f"{parts.query}&schema={schema}" if parts.query else f"schema={schema}"
    return urlunsplit(parts._replace(query=query))


def _admin(sql: str, *params: object) -> None:
    import psycopg

    try:
        with psycopg.connect(PG_DSN, autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql, params)  # type: ignore[arg-type]
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL at TETHER_PG_DSN={PG_DSN!r} does not answer: {exc}", pytrace=False)


def fresh_schema(prefix: str) -> Iterator[str]:
    """A new schema name starting with ``prefix``, dropped afterwards (for a fixture to yield from).

    Fails (never skips) when the server does not answer.
    """
    schema = f"{prefix}_{uuid.uuid4().hex[:10]}"
    _admin("SELECT 1")
    try:
        yield schema
    finally:
        _admin(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def pg_schema() -> Iterator[str]:
    """A fresh schema name; dropped afterwards. Fails (never skips) without a server."""
    yield from fresh_schema("tether_dur")
