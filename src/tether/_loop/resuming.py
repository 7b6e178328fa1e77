"""What is checked before a paused run goes on: nothing runs on a state that does not hold.

A state passed in by a caller is checked against its signature, the agent's
tools (fingerprint) and, with a store, the store's journal, which is the truth.
Decisions must be signed, fit their calls, and edited arguments or answers must
fit their tools. Any failure raises before anything is committed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from ..events import Event, RunStarted
from ..exceptions import LeaseConflict, StateError, StateIncompatible, StateTampered, UserError
from ..journal import Journal
from ..state import RunState
from ..store import RunStore
from ..tools import ArgumentsInvalid, Tool
from .settings import Settings, Watcher, model_of

__all__ = ["check_against_store", "check_edits", "check_resumable", "driver", "resumed", "shown", "stored_journal"]


def check_resumable(state: RunState, fingerprint: str, key: bytes | None, *, trusted: bool, child: bool) -> None:
    """Refuse a state paused with other tools, one that cannot resume, or one whose signatures fail.

    ``trusted``: loaded from our own store; ``child``: carried inside its verified parent.
    """
    if state.fingerprint != fingerprint:
        raise StateIncompatible(
            f"run {state.run_id!r} was paused with other tool definitions "
            f"(fingerprint {state.fingerprint!r}, this agent has {fingerprint!r})"
        )
    if state.status == "finished" or (state.status == "running" and not trusted):
        raise StateError(f"run {state.run_id!r} is {state.status!r} and cannot be resumed")
    if key is not None:  # trusted states still need their decisions' signatures
        if trusted or child:
            state.verify_decisions(key)
        else:
            state.verify(key)
    state.check_decisions()


def driver(state: RunState, agent: Settings, root: Settings) -> Settings:
    """The agent the journal says drives the run (after a handoff), once the decisions it
    holds fit that agent's tools (so a bad one leaves the run as it was)."""
    name = state.agent
    found = agent if not name or name == agent.name else root.reachable(name)
    if found is None:
        raise StateIncompatible(
            f"run {state.run_id!r} is driven by agent {name!r}, which {root.name!r} cannot hand off to"
        )
    check_edits(state, found.tools)
    return found


async def stored_journal(store: RunStore | None, run_id: str) -> tuple[Journal, RunStarted | None]:
    """The journal of a run to resume by id (in the store, not cancelled for good), and its run-started
    when that is all it holds: a run started elsewhere (a server) and never advanced, whose first
    segment it begins (a second run-started would say it resumed)."""
    if store is None:
        raise UserError("resuming by run_id needs an agent with a store")
    events = await store.load(run_id)
    if not events:
        raise StateError(f"no run {run_id!r} in the store")
    journal = Journal.of(events)
    if journal.closed:
        raise StateError(f"run {run_id!r} was cancelled for good and cannot be resumed")
    return journal, events[0] if len(events) == 1 and isinstance(events[0], RunStarted) else None


def resumed(run_id: str, fingerprint: str, agent: Settings) -> RunStarted:
    """The run-started a resumed segment begins with (a run never advanced begins with its own: see ``shown``)."""
    return RunStarted(run_id, (), True, fingerprint, agent.name, model=model_of(agent))


def shown(fresh: RunStarted | None, watchers: Sequence[Watcher]) -> list[Event]:
    """A segment's stored run-started, shown to its watchers and its stream, not committed again."""
    if fresh is None:
        return []
    for w in watchers:
        w.event(fresh)
    return [fresh]


async def check_against_store(store: RunStore, state: RunState) -> Journal:
    """With a store, its journal is the truth: a state that says otherwise is refused."""
    events = await store.load(state.run_id)
    if not events:
        raise StateTampered(f"run {state.run_id!r} is not in this agent's store; it cannot be resumed here")
    journal = Journal.of(events)
    if journal.closed:
        raise StateError(f"run {state.run_id!r} was cancelled for good and cannot be resumed")
    truth = journal.snapshot()
    if state.seq != truth.seq:
        raise LeaseConflict(
            f"run {state.run_id!r} is at position {truth.seq} in the store, this state at {state.seq}: "
            "it was resumed or decided elsewhere (load it again from the store)"
        )

    def claims(s: RunState) -> RunState:  # what the state says happened; decisions are checked apart
        # Child runs are checked against their own journals when they resume.
        return dataclasses.replace(s, decisions=(), signature="", status="paused", children=(), parent_call="")

    if claims(state) != claims(truth):
        raise StateTampered(
            f"run state {state.run_id!r} differs from the store's journal (its calls, arguments or notes); "
            "nothing was run"
        )
    return journal


def check_edits(state: RunState, tools: Mapping[str, Tool]) -> None:
    """Edited arguments and answers must fit their tools before anything is committed."""
    calls = {p.call.id: p.call for p in state.open_calls}
    for d in state.decisions:
        tool = tools.get(calls[d.call_id].name) if d.call_id in calls else None
        try:
            if tool is not None and d.verdict == "approve" and d.args is not None:
                tool.validate(d.args)
            elif tool is not None and d.verdict == "answer":
                tool.check_answer(d.answer)
        except ArgumentsInvalid as exc:
            what = "the answer" if d.verdict == "answer" else "the edited arguments"
            raise StateError(
                f"{what} for call {d.call_id!r} do not fit the tool: {exc} "
                "(decide again, replacing that decision: replace=True, or --replace in the CLI)"
            ) from None
