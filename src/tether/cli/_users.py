"""``tether users add|remove|reset|token|list`` and ``tether audit export``: the people of ``tether serve``.

Accounts live in ``users.json`` in the server's home (the directory of an
SQLite store, else ``.tether``), the audit log in ``audit.jsonl`` beside it.
A running server sees a change at its next request. See ``docs/serve.md``.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from ..exceptions import UserError

__all__ = ["audit_group", "users_group"]

STORE = click.option(
    "--store",
    metavar="URL",
    default="sqlite:///.tether/runs.db",
    show_default=True,
    help="The server's store: its home (where users.json and audit.jsonl live) is beside it.",
)


def _home(store: str) -> Path:
    from ..serve._secrets import home_of

    return home_of(store)


def _accounts(store: str) -> Any:
    from ..serve._people import Accounts

    return Accounts(_home(store) / "users.json")


def _password(stdin: bool) -> str:
    if stdin:
        return sys.stdin.readline().rstrip("\n")
    return str(click.prompt("Password", hide_input=True, confirmation_prompt=True))


def _run(action: Any) -> None:
    try:
        action()
    except UserError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)


@click.group("users")
def users_group() -> None:
    """Accounts for the web inbox and the API: decisions are signed with who made them."""


@users_group.command("add")
@click.argument("name")
@click.option("--password-stdin", is_flag=True, help="Read the password from the first line of standard input.")
@STORE
def add(name: str, password_stdin: bool, store: str) -> None:
    """Add a person (asks for a password; roles are given in the rules file)."""

    def go() -> None:
        accounts = _accounts(store)
        if name in accounts.names():  # before the prompt
            raise UserError(f"user {name!r} exists already (tether users reset {name} sets a new password)")
        accounts.add(name, _password(password_stdin))
        click.echo(f"added {name} to {accounts.path}")

    _run(go)


@users_group.command("reset")
@click.argument("name")
@click.option("--password-stdin", is_flag=True, help="Read the password from the first line of standard input.")
@STORE
def reset(name: str, password_stdin: bool, store: str) -> None:
    """Set a new password; the person's sessions and personal tokens end at once."""

    def go() -> None:
        accounts = _accounts(store)
        accounts.info(name)
        accounts.reset(name, _password(password_stdin))
        click.echo(f"new password for {name}; their sessions and tokens ended")

    _run(go)


@users_group.command("remove")
@click.argument("name")
@STORE
def remove(name: str, store: str) -> None:
    """Remove a person; their sessions and tokens stop working at once."""

    def go() -> None:
        _accounts(store).remove(name)
        click.echo(f"removed {name}")

    _run(go)


@users_group.command("token")
@click.argument("name")
@click.option("--label", default="", help="A name for the token (shown by tether users list).")
@STORE
def token(name: str, label: str, store: str) -> None:
    """Make a personal API token (Authorization: Bearer ...): shown once, kept only as a hash."""
    _run(lambda: click.echo(_accounts(store).new_token(name, label)))


@users_group.command("list")
@STORE
def list_users(store: str) -> None:
    """The people who may sign in."""

    def go() -> None:
        accounts = _accounts(store)
        names = accounts.names()
        if not names:
            click.echo(f"no users in {accounts.path} (the server is in its one-person mode: one shared token)")
        for name in names:
            info = accounts.info(name)
            since = datetime.fromtimestamp(info["created"] or 0, UTC).strftime("%Y-%m-%d")
            tokens = f", tokens: {', '.join(info['tokens'])}" if info["tokens"] else ""
            click.echo(f"{name}  (since {since}{tokens})")

    _run(go)


@click.group("audit")
def audit_group() -> None:
    """The audit log of tether serve: who signed in, saw, decided and was refused."""


@audit_group.command("export")
@STORE
@click.option("--since", type=float, default=0.0, help="Only steps from this Unix time on.")
def export(store: str, since: float) -> None:
    """Print the audit log as JSON lines (oldest first)."""
    import json

    from ..serve._audit import read_lines

    for entry in read_lines(_home(store) / "audit.jsonl"):
        if entry.get("at", 0) >= since:
            click.echo(json.dumps(entry, ensure_ascii=False, sort_keys=True))
