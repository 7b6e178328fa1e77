"""What the loop reads from the agent it runs, and who may watch a run.

:class:`Settings` is the loop's view of an :class:`~tether.agent.Agent`: the
loop (:mod:`tether._loop.run`) depends on this shape, not on the class, so the agent
is configuration and the run is behaviour. :class:`Observer` and
:class:`Watcher` are how telemetry (or anything else) sees each committed event
of a run without being part of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..context import Context
from ..cost import Price
from ..events import RESERVED_LABELS, Event
from ..exceptions import UserError
from ..grounding import Validator
from ..messages import Message
from ..output import OutputSpec
from ..policy import Policy
from ..state import RunState
from ..store import RunStore
from ..tools import Invocation, Tool, missing_deps

__all__ = [
    "Input",
    "Observer",
    "Settings",
    "Watcher",
    "instructions_of",
    "labels",
    "loop_running",
    "model_of",
    "require_deps",
]

Input = str | Message | RunState | None
"""What a run starts from: a task, a paused state, or None to resume by run id."""


class Settings(Protocol):
    """What the loop reads from the agent it runs (an :class:`~tether.agent.Agent`)."""

    @property
    def fingerprint(self) -> str: ...

    def reachable(self, name: str) -> Settings | None: ...

    name: str
    instructions: str | Callable[[Invocation[Any]], str] | None
    output: OutputSpec | None  # set: the run ends by its terminal output tool with a typed value
    output_validators: tuple[Validator, ...]  # see the run's journal; may send an answer back
    output_retries: int  # how many answers a validator (or the output's schema) may send back
    policy: Policy
    tools: dict[str, Tool]
    tool_list: tuple[Tool, ...]
    ends_turns: bool  # some tool is terminal or hands the run over
    max_steps: int
    max_tool_calls: int | None
    max_tokens: int | None
    max_seconds: float | None
    max_cost: float | None
    prices: Mapping[str, Price]
    store: RunStore | None
    signing_key: bytes | None
    approver: Callable[[Tool, dict[str, Any], Context], bool | str] | None
    compactor: Callable[[Context], Context] | None
    lease_ttl: float
    observers: tuple[Observer, ...]


class Watcher(Protocol):
    """Watches one run: sees each event right after it is committed, then ``close()`` when the
    run's stream ends, however it ends (even without a closing event: a crash, a lost lease)."""

    def event(self, ev: Event) -> None: ...

    def close(self) -> None: ...


class Observer(Protocol):
    """Watches the runs of an agent (``Agent(observers=[...])``): one :class:`Watcher` per run,
    e.g. :class:`tether.telemetry.Tracing`."""

    def watch(self, agent: Settings) -> Watcher: ...


def loop_running() -> bool:
    """True inside a running event loop (where ``run_sync`` cannot start one)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def model_of(agent: Settings) -> str:
    """The model name of an agent's brain, when it has one (``policy.model``)."""
    model = getattr(agent.policy, "model", None)
    return model if isinstance(model, str) else ""


def instructions_of(agent: Settings, run_id: str, deps: Any) -> tuple[Message, ...]:
    """The agent's instructions as the run's system note; a callable gets the invocation (its text is
    what the journal keeps, so replay shows what the model saw)."""
    text = agent.instructions
    if callable(text):
        text = text(Invocation(run_id, "", "", deps))
    return (Message.system(text),) if text else ()


def require_deps(agent: Settings, deps: Any) -> None:
    """A tool that declares ``Invocation[D]`` needs deps: without them, :class:`UserError` naming it."""
    if why := missing_deps(agent.tool_list, deps):
        raise UserError(why)


def labels(meta: Mapping[str, str] | None) -> dict[str, str]:
    """A run's labels (``meta``), checked: strings to strings, none of them reserved.

    >>> labels({"ticket": "T-1"})
    {'ticket': 'T-1'}
    """
    found = dict(meta or {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in found.items()):
        raise UserError(f"meta must map strings to strings, got {found!r}")
    if reserved := sorted(RESERVED_LABELS.intersection(found)):
        raise UserError(
            f"meta label(s) {reserved} are reserved: tether sets them for a run of a session (give session= instead)"
        )
    return found
