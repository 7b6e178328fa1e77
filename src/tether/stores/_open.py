"""Open a run store from a URL: the one switch the CLI and apps need.

* ``sqlite:///relative/runs.db``, ``sqlite:////absolute/runs.db`` or a plain
  path: :class:`~tether.stores.sqlite.SQLiteStore` (``?durability=full`` for
  power-loss durability);
* ``postgresql://...`` or ``postgres://...``:
  :class:`~tether.stores.postgres.PostgresStore` (``?schema=name`` picks the
  schema, ``?connections=N`` lets N calls of different runs talk to the server
  at once; every other parameter goes to libpq);
* ``memory://``: :class:`~tether.stores.memory.MemoryStore`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..exceptions import UserError

if TYPE_CHECKING:
    from . import RunStore

DEFAULT_PATH = Path(".tether") / "runs.db"


def open_store(url: str | Path) -> RunStore:
    """The store a URL names (see the module docstring).

    >>> type(open_store("memory://")).__name__
    'MemoryStore'
    """
    text = str(url)
    scheme, sep, _ = text.partition("://")
    if not sep or len(scheme) == 1:  # a plain path (or a Windows drive letter)
        if re.match(r"(?i)(sqlite|postgres(ql)?|memory):", text):  # a URL with a slash too few, not a file name
            raise UserError(f"store URL {text!r} is malformed: use sqlite:///path, postgresql://HOST/DB or memory://")
        return _sqlite(text, {})
    scheme = scheme.lower()
    if scheme == "memory":
        from .memory import MemoryStore

        return MemoryStore()
    if scheme == "sqlite":
        return _sqlite_url(text)
    if scheme in ("postgresql", "postgres"):
        return _postgres_url(text)
    raise UserError(
        f"unknown store URL scheme {scheme!r} in {text!r}: use sqlite:///path, postgresql://... or memory://"
    )


def _sqlite_url(url: str) -> RunStore:
    # As in SQLAlchemy: sqlite:///runs.db is relative, sqlite:////var/runs.db absolute.
    rest = url[len("sqlite://") :]
    path, _, query = rest.partition("?")
    if not path.startswith("/") or path == "/":
        raise UserError(f"SQLite URL {url!r} must look like sqlite:///relative.db or sqlite:////abs.db")
    return _sqlite(path[1:], dict(parse_qsl(query, keep_blank_values=True)))


def _sqlite(path: str, params: dict[str, str]) -> RunStore:
    from .sqlite import SQLiteStore

    durability = params.pop("durability", "normal")
    if params:
        raise UserError(f"unknown SQLite store options {sorted(params)}; the only one is 'durability'")
    return SQLiteStore(path, durability=durability)  # type: ignore[arg-type]  # checked there


def _postgres_url(url: str) -> RunStore:
    from .postgres import PostgresStore

    parts = urlsplit(url)
    params = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in params if k == "schema"), "tether")
    connections = next((v for k, v in params if k == "connections"), "1")
    if not connections.isdigit() or int(connections) < 1:
        raise UserError(f"connections= must be a positive integer, got {connections!r}")
    query = urlencode([(k, v) for k, v in params if k not in ("schema", "connections")])
    return PostgresStore(urlunsplit(parts._replace(query=query)), schema=schema, connections=int(connections))
