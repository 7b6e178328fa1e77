"""The commands that record a person's decision on a paused run, one per verdict, and cancel.

``approve`` (edited arguments, several calls at once) and ``answer`` (text or
JSON) are written out; every verdict on one item that takes a message or
nothing (``deny``, ``retry``, ``skip``) is made by :func:`one_item` from
:data:`tether.pending.VERBS`. Each records in the store and says what to run
next (``tether resume``); none runs the agent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import click

from ..events import ApprovalDecided, Cancelled, Event, RunStarted
from ..exceptions import StateTampered, UserError
from ..pending import VERBS, Verdict
from ..state import Choice, Decision, RunState
from ..store import load_tree
from ._config import load_settings, location
from ._decide import check_args_for, check_replacing, described, load_state, record, waiting
from ._errors import ConfigError
from ._keys import KEY_ENV, key_id, key_source
from ._options import handle_errors, replace_option, resolve, say, store_options
from ._session import Session

__all__ = ["COMMANDS", "answer", "approve", "cancel", "one_item"]


# -- deciding ---------------------------------------------------------------------------


@click.command()
@click.argument("run_id")
@click.argument("call_ids", nargs=-1)
@store_options
@click.option("--args", "args_json", metavar="JSON", help="Approve one call with these arguments instead.")
@replace_option
@handle_errors
def approve(run_id: str, call_ids: tuple[str, ...], args_json: str | None, replace: bool, **opts: Any) -> None:
    """Approve calls of a paused run (all waiting calls when none are named)."""
    args = check_args_for(call_ids, args_json)

    def choose(state: RunState) -> list[Choice]:
        ids = call_ids or tuple(p.id for p in waiting(state) if p.status == "awaiting-approval")
        if not ids:
            done = "; ".join(f"{d.call_id} is already {described(d)}" for d in state.decisions)
            raise UserError(
                f"run {state.run_id!r} has no call waiting for approval"
                + (f" ({done}; continue with `tether resume`)" if done else "")
            )
        return [Choice("approve", cid, args=args) for cid in ids]

    decide_command(opts, run_id, choose, replace)


@click.command()
@click.argument("run_id")
@click.argument("item")
@click.argument("text")
@store_options
@click.option("--json", "as_json", is_flag=True, help="TEXT is JSON (for a question with a structured answer).")
@replace_option
@handle_errors
def answer(run_id: str, item: str, text: str, as_json: bool, replace: bool, **opts: Any) -> None:
    """Answer a question a run asks (``ask_human``); the answer becomes the question's result."""
    try:
        value = json.loads(text) if as_json else text
    except ValueError as exc:
        raise UserError(f"--json: TEXT is not JSON ({exc})") from None
    decide_command(opts, run_id, lambda state: [Choice("answer", item, answer=value)], replace)


def one_item(verdict: Verdict) -> click.Command:
    """``tether deny`` / ``retry`` / ``skip``: the command of a verdict on one item that takes a message or nothing.

    Its help is the verdict's own words, and it takes ``--message`` when the verdict
    does (:data:`tether.pending.VERBS`).
    """

    def decide(run_id: str, call_id: str, replace: bool, message: str = "", **opts: Any) -> None:
        decide_command(opts, run_id, lambda state: [Choice(verdict, call_id, message=message)], replace)

    fn = replace_option(handle_errors(decide))
    if VERBS[verdict].takes == "message":
        fn = click.option("--message", "-m", default="", help="What the model reads as the call's result.")(fn)
    fn = click.argument("run_id")(click.argument("call_id")(store_options(fn)))
    return click.command(verdict, help=VERBS[verdict].says)(fn)


def decide_command(
    opts: dict[str, Any], run_id: str, choose: Callable[[RunState], list[Choice]], replace: bool
) -> None:
    """Record decisions in the store; the run continues on ``tether resume``."""
    settings = load_settings(**opts, reading=True)
    with Session(settings, create=False) as session:
        rid = resolve(session, run_id)
        events = session.run(session.store.load(rid))
        ours = session.check_key(rid, events[0].meta if isinstance(events[0], RunStarted) else {})
        before = session.run(load_tree(session.store, rid))
        if not ours:  # started by a program of yours: nothing recorded says which key its agent checks
            check_foreign_key(rid, events, session.key, key_source(settings.store_url, settings.env))
        choices = choose(before)
        changes = check_replacing(before, choices, replace)
        state = before
        if changes:
            state = session.run(record(session.store, rid, changes, key=session.key, replace=replace))
    for c in choices:
        say(decided_line(c, state, before.decision(c.item), changed=c in changes))
    left = waiting(state)
    if left:
        say(f"still waiting: {', '.join(p.id for p in left)}")
    say("a running `tether serve` on this store resumes it by itself; without one,")
    if ours:
        say(f"continue with: tether resume {rid}{location(settings)}")
    else:
        agent = next((ev.agent for ev in events if isinstance(ev, RunStarted) and ev.agent), "agent")
        say(f"continue it in the program that started it (agent {agent!r}): agent.run(run_id={rid!r})")


def check_foreign_key(run_id: str, events: Sequence[Event], key: bytes, source: str) -> None:
    """For a run the command line did not start: its earlier decisions must verify with this key.

    Without any, nothing can say which key the run's agent checks: the line printed names the
    key used, so that a refusal on resume can be traced to it.
    """
    signed = [ev.decision for ev in events if isinstance(ev, ApprovalDecided) and ev.decision.signature]
    for d in signed:
        try:
            d.verify(key)
        except StateTampered:
            raise ConfigError(
                f"run {run_id!r} has decisions signed with another key than this command's (id {key_id(key)}, "
                f"from {source}): its agent would refuse this one; use the key it was decided with "
                f"({KEY_ENV}, the signing_key its program gives the Agent)"
            ) from None
    if not signed:
        say(
            f"note: run {run_id!r} was started by another program, which records no key: this decision is "
            f"signed with key id {key_id(key)} (from {source}); its agent accepts it only with that signing_key",
            err=True,
        )


def decided_line(c: Choice, state: RunState, old: Decision | None, *, changed: bool) -> str:
    """``approved call_1_0: shell {...}``, with what it replaced, or that it changed nothing."""
    p = state.item(c.item)
    if old is not None and not changed:
        return f"{p.id} is already {described(old)}: nothing changed"
    edited = f" with {json.dumps(c.args, sort_keys=True)}" if c.args is not None else ""
    answered = f" with {json.dumps(c.answer, ensure_ascii=False)}" if c.verdict == "answer" else ""
    replaced = f" (replaces: {described(old)})" if old is not None else ""
    return f"{VERBS[c.verdict].done} {p.id}: {p.label} {p.call.arguments}{edited}{answered}{replaced}"


@click.command()
@click.argument("run_id")
@store_options
@handle_errors
def cancel(run_id: str, **opts: Any) -> None:
    """End a paused or failed run for good; nothing waiting in it will run."""
    with Session(load_settings(**opts), create=False) as session:
        rid = resolve(session, run_id)
        state = session.run(load_state(session.store, rid))
        if state.status in ("finished", "cancelled"):
            raise UserError(f"run {rid!r} is already {state.status!r}")
        if state.status == "running":
            raise UserError(f"run {rid!r} is running; press Ctrl-C in its terminal to cancel it")
        event = Cancelled("cancelled from the command line", final=True)
        session.run(session.store.append(rid, [event], expected_seq=state.seq))
    say(f"cancelled {rid}")


ONE_ITEM = tuple(one_item(v) for v, verb in VERBS.items() if verb.takes in ("message", "nothing"))
COMMANDS = (approve, answer, *ONE_ITEM, cancel)
"""Every command of this module: one per verdict (see :data:`tether.pending.VERBS`), and ``cancel``."""
