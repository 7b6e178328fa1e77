"""What every ``tether`` command shares: printing, errors as exit statuses, the common options."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

from ..exceptions import StateError, TetherError, UserError
from ._config import Settings, load_settings
from ._render import visible
from ._session import Session

__all__ = [
    "fail",
    "handle_errors",
    "model_options",
    "replace_option",
    "resolve",
    "say",
    "settings_from",
    "store_options",
]

F = TypeVar("F", bound=Callable[..., Any])


def say(text: str, *, err: bool = False) -> None:
    """Print a line, with any control character in it made visible."""
    click.echo(visible(text), err=err)


def fail(message: str, code: int = 2) -> NoReturn:
    say(f"error: {message}", err=True)
    sys.exit(code)


def handle_errors(fn: F) -> F:
    """Turn what users can get wrong into one line and an exit status, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (UserError, StateError) as exc:
            fail(str(exc), 2)
        except TetherError as exc:
            fail(f"{type(exc).__name__}: {exc}", 1)
        except KeyboardInterrupt:
            fail("interrupted", 130)

    return wrapper  # type: ignore[return-value]


def store_options(fn: F) -> F:
    fn = click.option(
        "--store",
        metavar="URL",
        help="Run store: sqlite:///PATH, postgresql://..., memory:// [default: sqlite:///<workspace>/.tether/runs.db].",
    )(fn)
    return click.option(
        "--workspace",
        "-w",
        metavar="DIR",
        help="Directory the agent works in and where .tether/ lives [default: current directory].",
    )(fn)


def model_options(fn: F) -> F:
    options = [
        click.option(
            "--model",
            metavar="MODEL",
            help="openai:NAME, anthropic:NAME, local[:NAME], scripted:FILE.json or an "
            "OpenAI-compatible NAME [env TETHER_MODEL; default: the offline local model].",
        ),
        click.option(
            "--base-url", metavar="URL", help="The model's endpoint, e.g. an Ollama server [env TETHER_BASE_URL]."
        ),
        click.option(
            "--api-key-env",
            metavar="VAR",
            help="Environment variable holding the API key [default: OPENAI_API_KEY or ANTHROPIC_API_KEY].",
        ),
        click.option("--max-steps", type=int, metavar="N", help="Most model turns per run [default: 20]."),
        click.option(
            "--context-size",
            type=int,
            metavar="TOKENS",
            help="The offline local model's context window [config context_size; default: 8192].",
        ),
        click.option(
            "--unsafe-no-sandbox", is_flag=True, help="Run shell and python commands on the host, WITHOUT isolation."
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def settings_from(opts: dict[str, Any]) -> Settings:
    settings = load_settings(**opts)
    if settings.unsafe_no_sandbox:
        click.echo(
            "warning: --unsafe-no-sandbox: shell and python commands run on this machine without a sandbox",
            err=True,
        )
    return settings


def replace_option(fn: F) -> F:
    return click.option(
        "--replace", is_flag=True, help="Change a decision already recorded for the call (it stands otherwise)."
    )(fn)


def resolve(session: Session, text: str) -> str:
    """A run id from its full text or a unique prefix."""

    async def find() -> str:
        if await session.store.get(text) is not None:
            return text
        found = [i.run_id for i in await session.store.list_runs(limit=100_000) if i.run_id.startswith(text)]
        if len(found) == 1:
            return found[0]
        if not found:
            raise UserError(f"no run {text!r} in {session.settings.store_url}")
        raise UserError(f"{text!r} matches {len(found)} runs; give more of the id")

    return session.run(find())
