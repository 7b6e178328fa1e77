"""``tether serve APP [APP ...]``: serve agents over HTTP, with the web inbox (``tether[serve]``).

``APP`` is ``module:attribute`` naming an :class:`~tether.Agent` or a callable
that returns one (``examples.refund_server:support``), imported with the
working directory on ``sys.path``, as uvicorn does. See ``docs/serve.md``.
"""

from __future__ import annotations

import importlib
import logging
import sys
from pathlib import Path
from typing import Any

import click

from ..exceptions import UserError

__all__ = ["load_agent", "serve"]


def load_agent(spec: str) -> Any:
    """The agent ``module:attribute`` names (calling the attribute if it is not an Agent itself)."""
    from ..agent import Agent

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UserError(f"APP must look like module:attribute (e.g. examples.refund_server:support), got {spec!r}")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise UserError(f"cannot import {module_name!r} for {spec!r}: {exc}") from exc
    for part in attr.split("."):
        if not hasattr(found, part):
            raise UserError(f"{module_name!r} has no attribute {attr!r}")
        found = getattr(found, part)
    if not isinstance(found, Agent) and callable(found):
        found = found()
    if not isinstance(found, Agent):
        raise UserError(f"{spec!r} is not an Agent (nor a callable returning one): {found!r}")
    return found


@click.command()
@click.argument("apps", nargs=-1, required=True, metavar="APP...")
@click.option("--store", metavar="URL", default="sqlite:///.tether/runs.db", show_default=True, help="Run store URL.")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on (not loopback: needs a token)."
)
@click.option("--port", type=int, default=8765, show_default=True)
@click.option(
    "--workers",
    type=int,
    default=4,
    show_default=True,
    help="Runs advanced at once in this process (0: none; tether worker processes advance them).",
)
@click.option("--notify", metavar="URL", help="Webhook: a signed POST when items start waiting.")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME", help="Another host name clients may use.")
@click.option("--public-url", metavar="URL", help="The inbox's address in notifications [default: http://HOST:PORT].")
@click.option("--max-auth-failures", type=int, default=10, show_default=True, help="Wrong tokens a minute per client.")
@click.option("--rules", type=click.Path(dir_okay=False), help="Who may decide what (a TOML file; see docs/serve.md).")
def serve(apps: tuple[str, ...], store: str, host: str, port: int, workers: int, **options: Any) -> None:
    """Serve agents over HTTP: a JSON API, and a web inbox where people decide.

    \b
      tether serve examples.refund_server:support
      open http://127.0.0.1:8765/ and sign in with the token in .tether/serve.token
    """
    try:
        import uvicorn

        from ..serve import Server
        from ..serve._secrets import is_loopback

        agents = [load_agent(spec) for spec in apps]
        public = options.pop("public_url") or f"http://{host}:{port}"
        hosts = options.pop("allow_hosts")
        dispatcher = None
        if workers == 0:  # runs go through the queue on the store's PostgreSQL to `tether worker` processes
            from ..dispatch.procrastinate import ProcrastinateDispatcher

            dispatcher = ProcrastinateDispatcher.for_store(store)
        server = Server(
            agents, store=store, host=host, allowed_hosts=hosts, public_url=public, workers=workers,
            dispatcher=dispatcher, **options,
        )  # fmt: skip
    except UserError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    if not is_loopback(host):
        click.echo(
            f"warning: serving on {host}:{port}, beyond this machine: anyone who reaches it needs the token; "
            "put TLS in front of it",
            err=True,
        )
        logging.getLogger("tether.serve").warning("listening on %s:%d (not loopback)", host, port)
    from ..dispatch import tune_gc

    tune_gc()  # a server may hold thousands of runs
    click.echo(f"tether serve: {', '.join(server.agents)} over {store}")
    click.echo(f"inbox: {public}/   sign in with the token in {server.token_hint}")
    uvicorn.run(
        server.app,
        host=host,
        port=port,
        log_level="info",
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=3,
    )
