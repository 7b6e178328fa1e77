"""A served run's dependencies: made per run by the application's factory, never persisted.

A tool that takes ``Invocation[Desk]`` and dynamic instructions that read
``inv.deps`` need what ``agent.run(task, deps=...)`` gives them. A worker that
resumes a run by id (``tether serve``, ``tether worker``) has no caller to ask,
so the application gives it a **deps factory**, ``make_deps(run_id, agent,
inputs)``: it is called each time a worker advances the run (at its start,
after each decision, after a restart), with the JSON ``inputs`` the run was
started with (kept in its ``inputs`` label), and may be async.

:func:`refuse_missing` is the check a server or worker makes at start: an agent
that needs deps and has no factory is refused then, not found out run by run.
:func:`record_stuck` ends a run a worker could not advance with a ``failed``
event saying why, so that it never shows ``running`` forever.
"""

from __future__ import annotations

import inspect
import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..agent import Agent
from ..events import Failed, RunStarted
from ..exceptions import LeaseConflict, StoreError, UserError
from ..store import RunStore
from ..tools import Invocation, missing_deps

__all__ = [
    "INPUTS_LABEL",
    "DepsFactory",
    "deps_for",
    "inputs_label",
    "record_stuck",
    "refuse_missing",
    "transient",
]

log = logging.getLogger("tether.dispatch")

DepsFactory = Callable[[str, str, dict[str, Any]], Any]
"""``make_deps(run_id, agent_name, inputs)``: the deps of one run (or an awaitable of them)."""

INPUTS_LABEL = "inputs"
"""The label a served run keeps its start inputs in (JSON), for the factory of any later worker."""


def inputs_label(inputs: Mapping[str, Any] | None) -> dict[str, str]:
    """The label that keeps ``inputs`` with the run (none for no inputs).

    >>> inputs_label({"customer": "C-7"})
    {'inputs': '{"customer":"C-7"}'}
    """
    if not inputs:
        return {}
    return {INPUTS_LABEL: json.dumps(dict(inputs), separators=(",", ":"), sort_keys=True)}


async def deps_for(factory: DepsFactory | None, store: RunStore, run_id: str, agent: str) -> Any:
    """What ``factory`` makes for ``run_id`` (None without a factory); the factory's own errors propagate."""
    if factory is None:
        return None
    root = run_id.partition("/")[0]  # a child run has its root run's deps
    events = await store.load(root)
    first = events[0] if events and isinstance(events[0], RunStarted) else None
    inputs = json.loads(first.meta.get(INPUTS_LABEL, "{}")) if first is not None else {}
    made = factory(root, first.agent if first is not None and first.agent else agent, inputs)
    return await made if inspect.isawaitable(made) else made


def refuse_missing(agents: Mapping[str, Agent], factory: DepsFactory | None) -> None:
    """Refuse (:class:`UserError`) an agent that needs deps when there is no factory to make them."""
    if factory is not None:
        return
    for name, agent in agents.items():
        for member in _team(agent):
            why = missing_deps(member.tool_list, None) or _instructions_fail(member)
            if why:
                where = f"agent {name!r}" + (f" (through {member.name!r})" if member is not agent else "")
                raise UserError(
                    f"{where} needs run dependencies and none are given: {why}. Give a deps factory: "
                    "--deps module:make_deps (tether serve, tether worker) or deps= (Server, dispatchers); "
                    "see docs/serve.md#dependencies"
                )


def _team(agent: Agent) -> Iterator[Agent]:
    seen: set[int] = set()
    todo = [agent]
    while todo:
        a = todo.pop()
        if id(a) not in seen:
            seen.add(id(a))
            yield a
            todo.extend(a.handoffs)


def _instructions_fail(agent: Agent) -> str | None:
    """Why the agent's dynamic instructions cannot be written without deps, if they cannot."""
    if not callable(agent.instructions):
        return None
    try:
        agent.instructions(Invocation("deps-check", "", "", None))
    except Exception as exc:  # the application's code: whatever it raises, it needs deps
        return f"its instructions fail without deps ({type(exc).__name__}: {exc})"
    return None


async def record_stuck(store: RunStore, run_id: str, exc: BaseException) -> bool:
    """End a run that a worker could not advance with ``failed`` and the reason (True if recorded).

    Only a run still ``running``, or ``paused`` with its items decided (a worker was given it to
    go on), is ended: it would otherwise show ``running`` forever, or ``paused`` with nothing
    waiting, its reason only in a log. A failed run is resumed, like any other, once the cause is fixed. A store or
    network error is not the run's fault: the run is left for another worker (the sweeper finds it).
    """
    if transient(exc):
        return False
    try:
        info = await store.get(run_id)
        if info is None or info.status not in ("running", "paused"):
            return False
        reason = f"no worker could advance it: {type(exc).__name__}: {exc}"
        await store.append(run_id, [Failed(reason, type(exc).__name__, at=time.time())], expected_seq=info.seq)
    except (LeaseConflict, StoreError) as err:  # it moved meanwhile, or the store is down: the log says why
        log.warning("could not record why run %r is stuck: %s", run_id, err)
        return False
    return True


def transient(exc: BaseException) -> bool:
    """True for an error that says nothing about the run (the store or the network failed)."""
    return isinstance(exc, StoreError | OSError | TimeoutError) or type(exc).__module__.startswith("psycopg")
