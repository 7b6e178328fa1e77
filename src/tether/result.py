"""How a run ended, as the entry points return it: :class:`RunResult`."""

from __future__ import annotations

from dataclasses import dataclass, field

from .context import Context
from .events import Event, Failed, Finished
from .messages import Usage
from .run import Run
from .state import PendingCall, RunState, Status

__all__ = ["RunResult"]


@dataclass(frozen=True)
class RunResult:
    """How a run ended: ``status``, ``output`` (the answer), the notebook and a resumable state.

    ``usage`` adds up every reply of the run (across resumes); ``cost`` is what
    it cost in US dollars (:mod:`tether.cost`), or None when a model has no price.
    """

    status: Status
    output: str | None
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
    def pending(self) -> tuple[PendingCall, ...]:
        """Every item waiting for a person (when paused), in child runs too, each with its path."""
        return self.state.items()

    @classmethod
    def of(cls, run: Run, events: list[Event]) -> RunResult:
        """The result of ``run`` once its stream of ``events`` is drained."""
        last = events[-1] if events else None
        state = run.snapshot()
        return cls(
            status=state.status,
            output=last.output if isinstance(last, Finished) else None,
            context=run.journal.context,
            state=state,
            usage=state.total_usage,
            events=tuple(events),
            limit=run.limit,
            error=last.error if isinstance(last, Failed) else None,
            cost=run.cost(),
        )
