"""The ``tether`` command group, and the commands that run agents or show runs: run, chat, resume, runs, show.

The decisions (approve, deny, answer, retry, skip, cancel) are in :mod:`._verdicts`;
``eval``, ``serve`` and ``mcp`` have modules of their own, registered at the end.

Every command finds its runs through ``--workspace`` (default: the current
directory) and ``--store`` (default: ``sqlite:///<workspace>/.tether/runs.db``).
The ones that run the agent also take the model options; ``resume`` continues
a run with the brain and workspace it recorded. Exit status: 0 the run
finished; 1 it failed or hit a limit; 2 bad usage or configuration; 3 it waits
for a human decision; 130 it was cancelled with Ctrl-C. Everything printed
goes through :func:`~tether.cli._render.visible` (or ``json_line``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

import click

from ..events import Event, RunStarted, to_dict
from ..exceptions import UserError
from ..journal import state_of
from ..state import RunState
from ..store import RunInfo, load_tree
from ._config import Settings, load_settings, location
from ._decide import (
    load_state,
    pause_hint,
    pretty_args,
    waiting,
)
from ._mcp import mcp as mcp_command
from ._options import handle_errors, model_options, resolve, say, settings_from, store_options
from ._project import instructions_shown
from ._render import PlainRenderer, json_line, make_renderer
from ._session import Asker, Outcome, Session
from ._usage import money, run_cost, steps_report
from ._verdicts import COMMANDS

F = TypeVar("F", bound=Callable[..., Any])
EXIT = {
    "finished": 0,
    "failed": 1,
    "limit-reached": 1,
    "running": 1,
    "paused": 3,
    "needs-decision": 3,
    "cancelled": 130,
}


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="tether", message="tether %(version)s")
def cli() -> None:
    """Run agents, watch them work, and approve what they want to do.

    \b
      tether run "summarise README.md"      one task, then exit
      tether chat                           a conversation
      tether runs --status paused           runs waiting for you
      tether show RUN                       a run's trace and waiting calls
      tether approve RUN [CALL...]          say yes (deny, retry, skip: the others)
      tether resume RUN                     continue a run here
    """


# -- running ------------------------------------------------------------------------


@cli.command()
@click.argument("task")
@model_options
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print every event as a JSON line.")
@click.option("--no-input", is_flag=True, help="Never ask: pause the run when a call needs approval.")
@handle_errors
def run(task: str, as_json: bool, no_input: bool, **opts: Any) -> None:
    """Do one TASK, then exit ("-" reads it from stdin)."""
    if task == "-":
        task = sys.stdin.read().strip()
    settings = settings_from(opts)
    renderer = make_renderer(as_json=as_json)
    asker = inline_asker(as_json, no_input)
    with Session(settings) as session:
        outcome = session.settle(session.start(task, renderer), renderer, asker)
    finish(outcome, settings)


@cli.command()
@model_options
@store_options
@click.option("--session", "name", metavar="NAME", help="Continue the named conversation from the store (and keep it).")
@handle_errors
def chat(name: str | None, **opts: Any) -> None:
    """Talk with the agent: each message is a run that continues the conversation."""
    from ._chat import chat as repl

    settings = settings_from(opts)
    with Session(settings) as session:
        session.agent  # noqa: B018  # fail on bad configuration before the first prompt
        repl(session, make_renderer(as_json=False, chat=True), name=name)


@cli.command()
@click.argument("run_id", required=False)
@model_options
@store_options
@click.option(
    "--all",
    "every",
    is_flag=True,
    help="Resume every failed or interrupted run and every paused run whose calls are all decided.",
)
@click.option("--json", "as_json", is_flag=True, help="Print every event as a JSON line.")
@click.option("--no-input", is_flag=True, help="Never ask: pause again when a call needs approval.")
@handle_errors
def resume(run_id: str | None, every: bool, as_json: bool, no_input: bool, **opts: Any) -> None:
    """Continue RUN_ID in this process (after approvals, a failure or a crash)."""
    if every == bool(run_id):
        raise UserError("name one RUN_ID or pass --all")
    settings = settings_from(opts)
    renderer = make_renderer(as_json=as_json)
    asker = inline_asker(as_json, no_input)
    with Session(settings, create=False) as session:
        ids = session.run(resumable(session)) if every else [resolve(session, run_id or "")]
        outcomes = []
        for rid in ids:
            if every:  # say which run the output below belongs to (stderr keeps --json clean)
                say(f"== resuming run {rid}", err=True)
            outcomes.append(session.settle(session.resume(rid, renderer), renderer, asker))
    if not every:
        finish(outcomes[0], settings)
    for o in outcomes:
        say(f"{o.run_id}  {o.status}  {o.reason}".rstrip(), err=True)
    codes = [EXIT.get(o.status, 1) for o in outcomes]
    sys.exit(next((c for c in (1, 3, 130) if c in codes), 0))


def inline_asker(as_json: bool, no_input: bool) -> Asker | None:
    from ._decide import ask

    at_terminal = sys.stdin.isatty() and sys.stdout.isatty()  # questions need both ends
    return ask if at_terminal and not as_json and not no_input else None


async def resumable(session: Session) -> list[str]:
    """Runs ``resume --all`` continues: failed, interrupted, and paused ones with every call decided."""
    ids = []
    for info in await session.store.list_runs(limit=100_000):
        decided = info.status in ("paused", "needs-decision") and not waiting(
            await load_state(session.store, info.run_id)
        )
        if info.status == "failed" or interrupted(info) or decided:
            ids.append(info.run_id)
    return ids


def interrupted(info: RunInfo) -> bool:
    """True for a run left ``running`` whose worker's lease has expired: its worker is gone."""
    expiry = info.lease_expires_at
    return info.status == "running" and expiry is not None and expiry < time.time()


def finish(outcome: Outcome, settings: Settings) -> NoReturn:
    """Say how the run ended (on stderr) and exit with its status."""
    rid, where = outcome.run_id, location(settings)
    if outcome.status in ("paused", "needs-decision") and outcome.state is not None:
        say(pause_hint(outcome.state, outcome.call_ids, where), err=True)
    elif outcome.status == "failed":
        bigger = " --context-size 16384" if "context size" in outcome.reason.lower() else ""  # llama.cpp's overflow
        hint = f"continue it with: tether resume {rid}{where}{bigger}"
        say(f"error: run {rid} failed: {outcome.reason}\n  {hint}", err=True)
    elif outcome.status != "finished":
        say(f"run {rid} stopped ({outcome.status}): {outcome.reason}", err=True)
    if outcome.status == "cancelled":  # Ctrl-C: its end is committed; a model thread still reading a prompt
        sys.stdout.flush()  # is not waited for (the offline model cannot stop before its first token)
        sys.stderr.flush()
        os._exit(EXIT["cancelled"])
    sys.exit(EXIT.get(outcome.status, 1))


# -- looking ----------------------------------------------------------------------------


@cli.command()
@store_options
@click.option("--status", help="Only runs with this status (paused, needs-decision, failed, ...).")
@click.option("--limit", type=int, default=50, show_default=True, help="Most runs to list.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run.")
@handle_errors
def runs(status: str | None, limit: int, as_json: bool, **opts: Any) -> None:
    """List runs, most recently updated first."""
    with Session(load_settings(**opts, reading=True), create=False) as session:
        infos = session.run(session.store.list_runs(status=status, limit=limit))
        events = {i.run_id: session.run(session.store.load(i.run_id)) for i in infos}
    if as_json:
        for i in infos:
            fields = {"run_id": i.run_id, "status": i.status, "decided": decided(events[i.run_id])}
            fields |= {"interrupted": interrupted(i), "events": i.seq}
            fields |= {"created_at": i.created_at, "updated_at": i.updated_at}
            click.echo(json_line({**fields, "task": first_task(events[i.run_id]), "cost": run_cost(events[i.run_id])}))
        return
    if not infos:
        say("no runs" + (f" with status {status!r}" if status else ""))
        return
    labels = {i.run_id: status_label(i, events[i.run_id]) for i in infos}
    width = max(14, *map(len, labels.values()))
    click.echo(f"{'RUN':32}  {'STATUS':{width}}  {'UPDATED':19}  {'COST':>9}  TASK")
    for i in infos:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(i.updated_at))
        cost = money(run_cost(events[i.run_id]))
        say(f"{i.run_id:32}  {labels[i.run_id]:{width}}  {when}  {cost:>9}  {short(first_task(events[i.run_id]), 60)}")


def status_label(info: RunInfo, events: Sequence[Event]) -> str:
    """The status ``tether runs`` shows: the store's, or what a person should do about it."""
    if decided(events):
        return f"{info.status} (decided, resume it)"
    if interrupted(info):
        return "interrupted (resume it)"
    return info.status


def decided(events: Sequence[Event]) -> bool:
    """True for a paused run whose waiting calls are all decided: it waits to be resumed, not for people."""
    if not events:
        return False
    state = state_of(events)
    return state.status in ("paused", "needs-decision") and bool(state.decisions) and not waiting(state)


def first_task(events: Sequence[Event]) -> str:
    for ev in events:
        if isinstance(ev, RunStarted):
            users = [m.text for m in ev.messages if m.role == "user"]
            if users:
                return users[-1]
    return ""


def short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


@cli.command()
@click.argument("run_id")
@store_options
@click.option("--json", "as_json", is_flag=True, help="The committed events as JSON lines.")
@handle_errors
def show(run_id: str, as_json: bool, **opts: Any) -> None:
    """A run's trace, and the calls waiting for a decision with their full arguments."""
    with Session(load_settings(**opts, reading=True), create=False) as session:
        rid = resolve(session, run_id)
        events = session.run(session.store.load(rid))
        tree = session.run(load_tree(session.store, rid)) if events else None
    if as_json:
        for ev in events:
            click.echo(json_line(to_dict(ev)))
        return
    state = state_of(events)
    name = next((ev.agent for ev in events if isinstance(ev, RunStarted) and ev.agent), "agent")
    say(
        f"run {rid}  status: {state.status}  agent: {name}  events: {len(events)}  "
        f"steps: {state.steps}  tool calls: {state.tool_calls}"
    )
    if shown := instructions_shown(events):
        say("\n".join(shown))
    renderer = PlainRenderer(name=name)  # the story names the agent as it is named, not "agent"
    for ev in events:
        renderer.event(ev)
    say("\n".join(steps_report(events)))
    if state.open_calls and state.status in ("paused", "needs-decision"):
        say(describe_pending(tree or state))


def describe_pending(state: RunState) -> str:
    lines = ["", "calls waiting:"]
    for p in state.items():
        d = state.decision(p.id)
        lines.append(f"  {p.id}  {p.label}  ({p.status})  args_hash {p.args_hash}")
        lines += ["    " + line for line in pretty_args(p).splitlines()]
        if d is not None:
            extra = f": {d.message}" if d.message else ""
            edited = f" with {json.dumps(d.args, sort_keys=True)}" if d.args is not None else ""
            lines.append(
                f"    decided: {d.verdict}{edited} by {d.by or '?'}{extra} (applied on `tether resume {state.run_id}`)"
            )
    return "\n".join(lines)


for command in COMMANDS:
    cli.add_command(command)
cli.add_command(mcp_command)  # `tether mcp list`: the MCP servers of the config

# `tether eval` lives in its own module (the evaluation harness's face).
from ._eval import eval_group  # noqa: E402

cli.add_command(eval_group)

# `tether serve` lives in its own module (the web inbox's face).
from ._serve import serve  # noqa: E402

cli.add_command(serve)

# `tether worker` lives in its own module (scale-out: workers on a shared PostgreSQL).
from ._worker import worker  # noqa: E402

cli.add_command(worker)

# `tether users` and `tether audit`: the people of tether serve (accounts, the audit log).
from ._users import audit_group, users_group  # noqa: E402

cli.add_command(users_group)
cli.add_command(audit_group)
