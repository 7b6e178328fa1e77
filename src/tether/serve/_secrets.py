"""The server's secrets: the access token and the key that signs decisions, kept with the store.

* The **token** is what people and programs present (``Authorization: Bearer``,
  or the login form): ``TETHER_SERVE_TOKEN`` when set, else ``serve.token`` in
  the server's home, made on first start (256 random bits, hex, mode 0600).
* The **signing key** signs every decision the server records:
  ``TETHER_SIGNING_KEY`` when set, else ``signing.key`` beside an SQLite store
  (the file the command line uses too, so both sign alike); a PostgreSQL store
  is reached from many places, so it needs ``TETHER_SIGNING_KEY``.

The **home** is the directory of an SQLite store's file, else ``.tether`` in
the working directory. A secret file readable by others is refused.

>>> import tempfile
>>> home = Path(tempfile.mkdtemp())
>>> token = secret_file(home / "serve.token", create=True)
>>> len(token), oct((home / "serve.token").stat().st_mode & 0o777)
(64, '0o600')
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

from ..exceptions import UserError

__all__ = ["TOKEN_ENV", "home_of", "is_loopback", "secret_file", "server_key", "server_token", "same_secret"]

TOKEN_ENV = "TETHER_SERVE_TOKEN"
KEY_ENV = "TETHER_SIGNING_KEY"
NOTIFY_ENV = "TETHER_NOTIFY_SECRET"


def sqlite_file(store_url: str) -> Path | None:
    """The database file an SQLite store URL (or plain path) names, else None."""
    scheme, sep, rest = store_url.partition("://")
    if not sep or len(scheme) == 1:
        return Path(store_url)
    if scheme.lower() != "sqlite":
        return None
    path = rest.partition("?")[0]
    return Path(path[1:]) if path.startswith("/") and path != "/" else None


def home_of(store_url: str) -> Path:
    """Where the server keeps its secrets for a store: beside an SQLite file, else ``./.tether``."""
    db = sqlite_file(store_url)
    return db.parent if db is not None else Path(".tether")


def is_loopback(host: str) -> bool:
    """Whether ``host`` is only reachable from this machine.

    >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("0.0.0.0")
    (True, True, False)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def secret_file(path: Path, *, create: bool) -> str | None:
    """The hex secret in ``path``; made (mode 0600) when missing and ``create``, else None."""
    if create and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            pass  # another process made it first: read theirs
        else:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32) + "\n")
    if not path.exists():
        return None
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        raise UserError(f"secret file {str(path)!r} is readable by others; run: chmod 600 {path}")
    text = path.read_text().strip()
    if len(text) < 32:
        raise UserError(f"secret file {str(path)!r} holds less than 16 bytes; delete it to make a new one")
    return text


def server_token(home: Path, env: Mapping[str, str], *, create: bool) -> str | None:
    """The access token: ``TETHER_SERVE_TOKEN``, else ``<home>/serve.token`` (made when ``create``)."""
    if env.get(TOKEN_ENV):
        if len(env[TOKEN_ENV]) < 32:
            raise UserError(f"{TOKEN_ENV} must be at least 32 characters (e.g. openssl rand -hex 32)")
        return env[TOKEN_ENV]
    return secret_file(home / "serve.token", create=create)


def server_key(store_url: str, env: Mapping[str, str]) -> bytes:
    """The key that signs decisions: ``TETHER_SIGNING_KEY``, else the SQLite store's ``signing.key``."""
    if text := env.get(KEY_ENV):
        try:
            return bytes.fromhex(text)
        except ValueError:
            return text.encode()
    if store_url.lower().startswith("memory:"):
        return secrets.token_bytes(32)
    db = sqlite_file(store_url)
    if db is None:
        raise UserError(
            f"a {store_url.partition(':')[0]} store needs {KEY_ENV} (the same value wherever its runs are "
            f'started, decided or resumed), e.g. export {KEY_ENV}="$(openssl rand -hex 32)"'
        )
    text = secret_file(db.parent / "signing.key", create=True)
    assert text is not None
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise UserError(f"signing key {str(db.parent / 'signing.key')!r} is not hex; delete it") from None


def same_secret(given: str, expected: str) -> bool:
    """Constant-time comparison of two secrets."""
    return hmac.compare_digest(given.encode(), expected.encode())
