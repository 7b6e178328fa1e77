"""Nothing an agent can write steers the command line.

The agent's tools (the file tools and the sandboxed ``shell`` and ``python``)
can write anywhere in its workspace except the workspace's own ``.tether/``
directory, which the sandbox hides and the file tools refuse. So everything
that tells the command line which model, key or store to use must come from
outside the workspace or from that directory, and the command refuses to
start (exit status 2, one line saying why and what to do) when:

* the workspace's ``.tether`` is a symbolic link or not a directory (the agent
  could have made it point at files it can write);
* a directory above the workspace has a ``.tether`` directory: the workspace is
  inside another one, whose agent can write this one's ``.tether/``;
* the store is an SQLite file inside the workspace but outside its
  ``.tether/`` (its signing key lives beside it);
* for the commands that run an agent: the user's configuration directory
  (``~/.config/tether`` or ``$XDG_CONFIG_HOME/tether``) is inside the
  workspace, as it is when the workspace is ``$HOME``.

>>> inside(Path("/home/me/.config/tether"), Path("/home/me"))
True
>>> sqlite_path("postgresql://db/x") is None
True
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ._errors import ConfigError

STATE_DIR = ".tether"


def inside(path: Path, root: Path) -> bool:
    """True if ``path`` is ``root`` or below it (both taken as they are)."""
    return path == root or root in path.parents


def real(path: Path) -> Path:
    """``path`` with symbolic links resolved as far as it exists."""
    return Path(os.path.realpath(path))


def sqlite_path(url: str) -> Path | None:
    """The database file of an SQLite store URL (or plain path); None for other stores."""
    scheme, sep, rest = url.partition("://")
    if sep and len(scheme) > 1:
        if scheme.lower() != "sqlite" or not rest.startswith("/") or rest == "/":
            return None  # another store, or a malformed URL the store itself reports
        url = rest[1:].partition("?")[0]
    return real(Path(url).expanduser())


def check_workspace(ws: Path) -> None:
    """Refuse a workspace whose ``.tether`` the agent could have planted or can reach."""
    state = ws / STATE_DIR
    if state.is_symlink() or (state.exists() and not state.is_dir()):
        raise ConfigError(
            f"{str(state)!r} is not a plain directory; tether keeps its state there and will not follow "
            "it (remove it if you did not make it)"
        )
    for parent in ws.parents:
        if os.path.lexists(parent / STATE_DIR):
            raise ConfigError(
                f"workspace {str(ws)!r} is inside another tether workspace, {str(parent)!r} (it has a "
                f"{STATE_DIR} directory), whose agent can write this one's {STATE_DIR}/; use {str(parent)!r} "
                f"as the workspace, or remove {str(parent / STATE_DIR)!r} if no agent works there"
            )


def check_store(ws: Path, store_url: str) -> None:
    """Refuse an SQLite store the agent could write (inside the workspace, outside ``.tether/``)."""
    db = sqlite_path(store_url)
    if db is not None and inside(db, ws) and not inside(db, ws / STATE_DIR):
        raise ConfigError(
            f"the store {str(db)!r} is inside the workspace {str(ws)!r}, where the agent can write it; "
            f"keep it in {str(ws / STATE_DIR)!r} (the default) or outside the workspace"
        )


def check_user_config(ws: Path, config_dir: Path) -> None:
    """Refuse to let an agent work in a directory that holds the user's tether configuration."""
    where = real(config_dir)
    if inside(where, ws):
        raise ConfigError(
            f"the workspace {str(ws)!r} contains your tether configuration {str(where)!r}, which the agent "
            "could rewrite to redirect the model and its key; give the agent a project directory instead "
            "(cd into it, or pass --workspace DIR)"
        )


def user_config_dir(env: Mapping[str, str]) -> Path:
    """``$XDG_CONFIG_HOME/tether``, or ``~/.config/tether``."""
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or "~", ".config")
    return Path(base).expanduser() / "tether"


def make_state_dir(ws: Path) -> None:
    """Create the workspace's ``.tether/`` before an agent runs, so it is hidden from the start.

    The sandbox hides only a ``.tether`` that exists when a command starts: were
    it missing (a PostgreSQL store keeps nothing there), a command could create
    ``.tether/config.toml`` for the next run to read.
    """
    (ws / STATE_DIR).mkdir(mode=0o700, exist_ok=True)
    check_workspace(ws)  # it was not swapped for a link in between
