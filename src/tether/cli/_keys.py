"""One signing key per store, and the signed record of how each run was started.

The key that signs decisions belongs to the store, not to the directory a
command runs in, so every process that reaches a store uses the same key:

* ``TETHER_SIGNING_KEY`` (hex, or any string of 16 bytes or more) when set;
* for an SQLite store, ``signing.key`` beside the database file (32 random
  bytes in hex, mode 0600, made by the first command that runs an agent);
* for ``memory://``, a fresh key for the process (nothing outlives it);
* a PostgreSQL store is reached from many places: it needs ``TETHER_SIGNING_KEY``.

When a run starts, the command line records in its first event the brain
(provider, model, base URL and the *name* of the key variable, never a key),
the workspace and the signing key's id, signed with that key. ``resume`` uses
that record (a run continues with the brain and in the directory it started
with) and refuses flags that ask for others; ``approve`` and the other
decisions refuse a key whose id differs, saying so, before recording anything.

>>> meta = run_meta({"model": "local", "workspace": "/srv/p"}, b"k" * 32)
>>> sorted(meta)
['key_id', 'model', 'signature', 'workspace']
>>> check_record(meta, b"k" * 32, "run1", "TETHER_SIGNING_KEY")
True
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

from ..exceptions import StateTampered
from ._errors import ConfigError
from ._trust import sqlite_path

KEY_FILE = "signing.key"
KEY_ENV = "TETHER_SIGNING_KEY"


def key_source(store_url: str, env: Mapping[str, str]) -> str:
    """Where the store's key comes from: ``TETHER_SIGNING_KEY``, a file path, or ``memory``."""
    if env.get(KEY_ENV):
        return KEY_ENV
    db = sqlite_path(store_url)
    if db is not None:
        return str(db.parent / KEY_FILE)
    if store_url.lower().startswith("memory:"):
        return "memory"
    raise ConfigError(
        f"a {store_url.partition(':')[0]} store needs {KEY_ENV} (the same value wherever its runs are "
        f'started, decided or resumed), e.g. export {KEY_ENV}="$(openssl rand -hex 32)"'
    )


def signing_key(store_url: str, env: Mapping[str, str], *, create: bool) -> bytes:
    """The store's key; ``create`` makes the SQLite key file when it is missing."""
    source = key_source(store_url, env)
    if source == KEY_ENV:
        text = env[KEY_ENV]
        try:
            return bytes.fromhex(text)
        except ValueError:
            return text.encode()
    if source == "memory":
        return secrets.token_bytes(32)
    path = Path(source)
    if create:
        _make_key(path)
    elif not path.exists():
        raise ConfigError(f"the store has no signing key: {source!r} does not exist (or set {KEY_ENV})")
    return _read_key(path)


def _make_key(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")


def _read_key(path: Path) -> bytes:
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        raise ConfigError(f"signing key {str(path)!r} is readable by others; run: chmod 600 {path}")
    try:
        return bytes.fromhex(path.read_text().strip())
    except ValueError:
        raise ConfigError(f"signing key {str(path)!r} is not hex; delete it to make a new one") from None


def key_id(key: bytes) -> str:
    """A short public name for a key (an HMAC of a constant: it reveals nothing of the key)."""
    return hmac.new(key, b"tether signing key id", hashlib.sha256).hexdigest()[:16]


def _mac(key: bytes, meta: Mapping[str, str]) -> str:
    # A session's labels are the loop's, added after the record is signed (the store's fencing guards them).
    body = {k: v for k, v in meta.items() if k not in ("signature", "session", "continues")}
    return hmac.new(key, json.dumps(body, sort_keys=True).encode(), hashlib.sha256).hexdigest()


def run_meta(fields: Mapping[str, str], key: bytes) -> dict[str, str]:
    """``fields`` plus the key's id, signed with the key: a new run's record."""
    meta = {**fields, "key_id": key_id(key)}
    return {**meta, "signature": _mac(key, meta)}


def check_record(meta: Mapping[str, str], key: bytes, run_id: str, source: str) -> bool:
    """True if ``meta`` is a record signed with ``key``; False if the run has none.

    Raises for a key other than the one the run was started with, and for a
    record that was altered. A record without a key id (a run started by
    another program, or written into the store by someone without the key) is
    no record: nothing in it is used.
    """
    recorded = meta.get("key_id")
    if not recorded:
        return False
    if recorded != key_id(key):
        raise ConfigError(
            f"run {run_id!r} was started with another signing key (id {recorded}) than this command's "
            f"(id {key_id(key)}, from {source}); decisions signed with it would be refused: use the key "
            f"the run was started with ({KEY_ENV}, or the {KEY_FILE} beside the store)"
        )
    if not hmac.compare_digest(meta.get("signature", ""), _mac(key, meta)):
        raise StateTampered(f"the record of how run {run_id!r} was started has a bad signature")
    return True
