"""How a run ended, as the entry points return it: :class:`RunResult`."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..context import Context
from ..events import Event, Failed, Finished
from ..journal import state_of
from ..messages import Usage
from ..state import PendingCall, RunState, Status
from .run import Run
from .settings import Settings

__all__ = ["RunResult", "output_of"]


@dataclass(frozen=True)
class RunResult:
    """How a run ended: ``status``, ``output`` (the answer), the notebook and a resumable state.

    ``output`` is the final text, or with ``Agent(output_type=T)`` the ``T`` instance.
    ``items`` lists what waits for a person when it paused (in child runs too, by path);
    ``open_calls`` only the run's own open calls.
    ``usage`` adds up every reply of the run (across resumes); ``cost`` is what
    it cost in US dollars (:mod:`tether.cost`), or None when a model has no price.
    """

    status: Status
    output: Any
    context: Context
    state: RunState
    usage: Usage
    events: tuple[Event, ...] = field(repr=False)
    limit: str | None = None
    error: str | None = None
    cost: float | None = None

    @property
    def run_id(self) -> str:
        return self.state.run_id

    @property
    def items(self) -> tuple[PendingCall, ...]:
        """Every item waiting for a person (when paused), in child runs too, each with its path."""
        return self.state.items()

    @property
    def open_calls(self) -> tuple[PendingCall, ...]:
        """The run's own open calls (an item of a child run waits under its delegating call)."""
        return self.state.open_calls

    @property
    def pending(self) -> tuple[PendingCall, ...]:
        """Deprecated: every open item of the run tree, now :attr:`items`."""
        warnings.warn(
            "RunResult.pending is deprecated: use RunResult.items (every open item of the run tree) "
            "or RunResult.open_calls (the run's own open calls)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.items

    @classmethod
    def of(cls, run: Run, events: list[Event]) -> RunResult:
        """The result of ``run`` once its stream of ``events`` is drained."""
        last = events[-1] if events else None
        state = run.snapshot()
        output = last.output if isinstance(last, Finished) else None
        if output is not None and (spec := run.agent.output) is not None and spec.answer_in(state.messages) == output:
            output = spec.load(output)  # the typed value, rebuilt from the JSON the journal keeps
        return cls(
            status=state.status,
            output=output,
            context=run.journal.context,
            state=state,
            usage=state.total_usage,
            events=tuple(events),
            limit=run.limit,
            error=last.error if isinstance(last, Failed) else None,
            cost=run.cost(),
        )


def output_of(agent: Settings, source: RunState | Iterable[Event]) -> Any:
    """A finished run's output, rebuilt from its state or its stored events (None if it did not finish):
    with an output type the ``T`` instance (from the JSON the journal keeps), else the final text."""
    state = source if isinstance(source, RunState) else state_of(source)
    driver = (agent.reachable(state.agent) if state.agent else None) or agent
    if state.status != "finished" or not state.messages:
        return None
    if driver.output is None:
        return state.messages[-1].content
    text = driver.output.answer_in(state.messages)
    return driver.output.load(text) if text is not None else None
