"""``tether worker APP [APP ...] --store postgresql://...``: a worker process (``tether[workers]``).

It takes jobs from the task queue on the store's PostgreSQL (Procrastinate)
and advances each run under its lease; its sweeper finds runs no job points at
(a worker killed with ``kill -9``, a decision recorded from anywhere). Start as
many as you like, on as many machines; ``tether serve --workers 0`` hands its
runs to them. ``SIGTERM`` or Ctrl-C stops it: its runs end resumable and are
queued again for the other workers. See ``docs/scale.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import os
import signal
import sys
from typing import Any

import click

from ..exceptions import TetherError, UserError

__all__ = ["worker"]


@click.command()
@click.argument("apps", nargs=-1, required=True, metavar="APP...")
@click.option("--store", metavar="URL", required=True, help="The run store: postgresql://... (shared by all workers).")
@click.option("--concurrency", type=int, default=16, show_default=True, help="Runs advanced at once by this worker.")
@click.option("--queue-schema", default="tether_queue", show_default=True, help="PostgreSQL schema of the queue.")
@click.option("--sweep-every", type=float, default=5.0, show_default=True, help="Seconds between sweeps of the store.")
@click.option("--deps", "deps_spec", metavar="MODULE:FACTORY", help="make_deps(run_id, agent, inputs): a run's deps.")
def worker(
    apps: tuple[str, ...], store: str, concurrency: int, queue_schema: str, sweep_every: float, deps_spec: str | None
) -> None:
    """Advance runs handed out through the store's PostgreSQL, until stopped.

    \b
      tether worker examples.refund_server:support --store postgresql://localhost/app --concurrency 32
    """
    try:
        dispatcher, opened = _dispatcher(apps, store, queue_schema, concurrency, deps_spec)
    except UserError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    from ..dispatch import tune_gc

    tune_gc()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    said = f"tether worker: {', '.join(dispatcher.agents)} over {_redacted(store)}, {concurrency} at a time"
    try:
        asyncio.run(_work(dispatcher, opened, concurrency, sweep_every, said))
    except (TetherError, OSError) as exc:  # the database cannot be reached or does not exist
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        click.echo(f"error: the worker could not start: {first} (check --store)", err=True)
        sys.exit(2)


def _dispatcher(apps: tuple[str, ...], url: str, schema: str, concurrency: int, deps: str | None) -> tuple[Any, Any]:
    from ..dispatch.procrastinate import ProcrastinateDispatcher
    from ..stores import open_store
    from ._serve import load_agent, load_deps

    if concurrency < 1:
        raise UserError(f"--concurrency must be at least 1, got {concurrency}")
    if not url.startswith(("postgresql://", "postgres://")):
        raise UserError(f"workers share a PostgreSQL store: --store postgresql://..., got {_redacted(url)!r}")
    if "connections=" not in url:  # runs of one worker commit side by side, up to 8 connections
        url += f"{'&' if '?' in url else '?'}connections={min(8, concurrency)}"
    opened = open_store(url)  # no I/O yet
    agents: dict[str, Any] = {}
    for spec in apps:
        agent = load_agent(spec)
        agents[agent.name] = copy.copy(agent)  # the worker's copy, on the shared store
        agents[agent.name].store = opened
        if agents[agent.name].signing_key is None and (key := os.environ.get("TETHER_SIGNING_KEY")):
            agents[agent.name].signing_key = _key_bytes(key)  # the key tether serve signs decisions with
    return ProcrastinateDispatcher.for_store(url, agents, schema=schema, deps=load_deps(deps)), opened


async def _work(dispatcher: Any, store: Any, concurrency: int, sweep_every: float, said: str) -> None:
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    try:
        await dispatcher.open()  # connected before it says it works
        await store.list_runs(limit=1)
        click.echo(said)
        await dispatcher.work(concurrency=concurrency, sweep_every=sweep_every)
    except asyncio.CancelledError:
        click.echo("tether worker: stopped; its runs were queued again", err=True)
    finally:
        with contextlib.suppress(Exception):
            await dispatcher.aclose()
        await store.aclose()


def _key_bytes(text: str) -> bytes:
    """``TETHER_SIGNING_KEY`` as tether serve reads it: hex, or else the text itself."""
    try:
        return bytes.fromhex(text)
    except ValueError:
        return text.encode()


def _redacted(url: str) -> str:
    """The URL without a password."""
    head, at, tail = url.rpartition("@")
    if not at:
        return url
    scheme, _, cred = head.partition("://")
    user = cred.partition(":")[0]
    return f"{scheme}://{user}:***@{tail}" if ":" in cred else url
