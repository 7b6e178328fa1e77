"""Accounts: the people who may sign in to ``tether serve``, their passwords and personal API tokens.

The accounts live in ``users.json`` in the server's home (beside the store's
``serve.token``; mode 0600), written by ``tether users add|remove|reset|token``
and read by the server, which notices a change at the next request: removing a
person or resetting a password ends their sessions and tokens at once.

* A **password** is kept only as an Argon2id hash (``argon2-cffi``, its
  default cost); checking one costs tens of milliseconds on purpose.
* A **personal token** (``tt_`` and 43 random characters) is shown once; the
  file keeps its SHA-256, enough to recognise it and useless to present.

>>> import tempfile
>>> accounts = Accounts(Path(tempfile.mkdtemp()) / "users.json")
>>> accounts.add("ana", "correct horse battery")
>>> accounts.check("ana", "correct horse battery"), accounts.check("ana", "wrong")
(True, False)
>>> token = accounts.new_token("ana")
>>> accounts.owner_of(token), accounts.owner_of("tt_forged")
('ana', None)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import time
from pathlib import Path
from typing import Any

from ..exceptions import UserError

__all__ = ["NAME", "Accounts", "TOKEN_PREFIX"]

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}$")
TOKEN_PREFIX = "tt_"
MIN_PASSWORD = 10


def _hasher() -> Any:
    from ..exceptions import import_extra

    argon2 = import_extra("argon2", extra="serve", needs="tether users need argon2-cffi to hash passwords")
    return argon2.PasswordHasher()


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Accounts:
    """``users.json``: read on change, written atomically (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._users: dict[str, dict[str, Any]] = {}
        self._tokens: dict[str, str] = {}  # sha256 of a token -> its owner

    # -- reading -----------------------------------------------------------------

    def _fresh(self) -> dict[str, dict[str, Any]]:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._stamp, self._users, self._tokens = None, {}, {}
            return self._users
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            if st.st_mode & 0o077:
                raise UserError(f"{self.path} is readable by others; run: chmod 600 {self.path}")
            try:
                users = json.loads(self.path.read_text())["users"]
            except (ValueError, KeyError, TypeError) as exc:
                raise UserError(f"{self.path} is not a tether users file ({exc}); restore it or delete it") from None
            self._users = {str(k): dict(v) for k, v in users.items()}
            self._tokens = {d: name for name, u in self._users.items() for d in u.get("tokens", {}).values()}
            self._stamp = stamp
        return self._users

    def any(self) -> bool:
        """Whether at least one account exists (then the server is in people mode)."""
        return bool(self._fresh())

    def names(self) -> list[str]:
        return sorted(self._fresh())

    def info(self, name: str) -> dict[str, Any]:
        user = self._fresh().get(name)
        if user is None:
            raise UserError(f"there is no user {name!r} in {self.path}")
        return {"name": name, "created": user.get("created"), "tokens": sorted(user.get("tokens", {}))}

    def stamp(self, name: str) -> str:
        """Changes whenever ``name``'s password is reset or the account is removed (ends their sessions)."""
        user = self._fresh().get(name)
        return "" if user is None else str(user.get("password", ""))[-16:]

    def check(self, name: str, password: str) -> bool:
        """Whether ``password`` is ``name``'s (a slow hash, also for an unknown name: no timing tell)."""
        hasher = _hasher()
        user = self._fresh().get(name)
        stored = user["password"] if user else _DUMMY.get("hash") or _dummy(hasher)
        try:
            ok = bool(hasher.verify(stored, password))
        except Exception:  # argon2's VerifyMismatchError / InvalidHashError: not this password
            return False
        return ok and user is not None

    def owner_of(self, token: str) -> str | None:
        """Whose personal token ``token`` is, if anyone's."""
        if not token.startswith(TOKEN_PREFIX):
            return None
        self._fresh()
        return self._tokens.get(_digest(token))

    # -- writing (the tether users command) ---------------------------------------

    def add(self, name: str, password: str) -> None:
        if not NAME.match(name):
            raise UserError(f"a user name is letters, digits and . _ @ + - (up to 100), got {name!r}")
        users = self._fresh()
        if name in users:
            raise UserError(f"user {name!r} exists already (tether users reset {name} sets a new password)")
        users[name] = {"password": _hash(password), "created": time.time(), "tokens": {}}
        self._save(users)

    def reset(self, name: str, password: str) -> None:
        """A new password; the person's sessions and personal tokens end."""
        users = self._fresh()
        self.info(name)
        users[name] = {**users[name], "password": _hash(password), "tokens": {}}
        self._save(users)

    def remove(self, name: str) -> None:
        users = self._fresh()
        self.info(name)
        del users[name]
        self._save(users)

    def new_token(self, name: str, label: str = "") -> str:
        """A new personal API token for ``name`` (shown once; the file keeps its hash)."""
        users = self._fresh()
        self.info(name)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        tokens = dict(users[name].get("tokens", {}))
        tokens[label or f"token-{len(tokens) + 1}"] = _digest(token)
        users[name] = {**users[name], "tokens": tokens}
        self._save(users)
        return token

    def _save(self, users: dict[str, dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"users": users}, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self._stamp = None  # read it back on next use


_DUMMY: dict[str, str] = {}


def _dummy(hasher: Any) -> str:
    _DUMMY["hash"] = hasher.hash(secrets.token_hex(8))
    return _DUMMY["hash"]


def _hash(password: str) -> str:
    if len(password) < MIN_PASSWORD:
        raise UserError(f"a password needs at least {MIN_PASSWORD} characters")
    return str(_hasher().hash(password))
