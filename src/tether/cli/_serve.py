"""``tether serve APP [APP ...]``: serve agents over HTTP, with the web inbox (``tether[serve]``).

``APP`` is ``module:attribute`` naming an :class:`~tether.Agent` or a callable
that returns one (``examples.refund_server:support``), imported with the
working directory on ``sys.path``, as uvicorn does. See ``docs/serve.md``.
"""

from __future__ import annotations

import asyncio
import errno
import importlib
import logging
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import click

from ..exceptions import TetherError, UserError, import_extra

__all__ = ["load_agent", "load_deps", "load_object", "serve"]


def load_agent(spec: str) -> Any:
    """The agent ``module:attribute`` names (calling the attribute if it is not an Agent itself)."""
    from ..agent import Agent

    found = load_object(spec, "APP", "examples.refund_server:support")
    if not isinstance(found, Agent) and callable(found):
        found = found()
    if not isinstance(found, Agent):
        raise UserError(f"{spec!r} is not an Agent (nor a callable returning one): {found!r}")
    return found


def load_deps(spec: str | None) -> Any:
    """The deps factory ``--deps module:make_deps`` names (None without one)."""
    if spec is None:
        return None
    found = load_object(spec, "--deps", "myapp.deps:make_deps")
    if not callable(found):
        raise UserError(f"--deps {spec!r} is not callable: give a function make_deps(run_id, agent, inputs)")
    return found


def load_object(spec: str, what: str, example: str) -> Any:
    """What ``module:attribute`` names, imported with the working directory on ``sys.path``."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UserError(f"{what} must look like module:attribute (e.g. {example}), got {spec!r}")
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
@click.option("--deps", "deps_spec", metavar="MODULE:FACTORY", help="make_deps(run_id, agent, inputs): a run's deps.")
def serve(apps: tuple[str, ...], store: str, host: str, port: int, workers: int, **options: Any) -> None:
    """Serve agents over HTTP: a JSON API, and a web inbox where people decide.

    \b
      tether serve examples.refund_server:support
      open http://127.0.0.1:8765/ and sign in with the token in .tether/serve.token
    """
    try:
        uvicorn = import_extra("uvicorn", extra="serve", needs="tether serve needs uvicorn")

        from ..serve import Server
        from ..serve._secrets import is_loopback

        agents = [load_agent(spec) for spec in apps]
        deps = load_deps(options.pop("deps_spec"))
        public = options.pop("public_url") or f"http://{host}:{port}"
        hosts = options.pop("allow_hosts")
        dispatcher = None
        if workers == 0:  # runs go through the queue on the store's PostgreSQL to `tether worker` processes
            from ..dispatch.procrastinate import ProcrastinateDispatcher

            dispatcher = ProcrastinateDispatcher.for_store(store)
        server = Server(
            agents, store=store, host=host, allowed_hosts=hosts, public_url=public, workers=workers,
            dispatcher=dispatcher, deps=deps, **options,
        )  # fmt: skip
        sock = listen(host, port)  # before anything is said about where: a port in use is this server's error
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
    config = uvicorn.Config(
        server.app, lifespan="off", log_level="info", proxy_headers=False, server_header=False,
        timeout_graceful_shutdown=3,
    )  # fmt: skip
    said = [
        f"tether serve: {', '.join(server.agents)} over {store}",
        f"inbox: {public}/   sign in with the token in {server.token_hint}",
    ]
    try:
        asyncio.run(_serve(server, uvicorn.Server(config), sock, said))
    except (TetherError, OSError) as exc:  # the store cannot be reached, or its database does not exist
        click.echo(f"error: the server could not start: {_first_line(exc)} (check --store)", err=True)
        sys.exit(2)
    finally:
        sock.close()


def listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound and listening (uvicorn serves on it), or a one-line :class:`UserError`."""
    bare = host.strip("[]")
    sock = socket.socket(socket.AF_INET6 if ":" in bare else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((bare, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise UserError(
                f"port {port} on {host} is in use (another tether serve?): stop the other server, "
                "or pick another port with --port"
            ) from None
        raise UserError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}: pick another --host or --port"
        ) from None
    return sock


async def _serve(server: Any, http: Any, sock: socket.socket, said: list[str]) -> None:
    """The workers first (a store that cannot be reached stops here), then say where, then serve."""
    async with server.running():
        for line in said:
            click.echo(line)
        for sig in (signal.SIGINT, signal.SIGTERM):  # uvicorn re-raises the signal it stopped on: it is handled
            signal.signal(sig, lambda *_: None)
        await http.serve(sockets=[sock])
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C while the runs stop
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
