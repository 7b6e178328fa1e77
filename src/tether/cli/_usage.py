"""Time, tokens and cost of a stored run, for ``tether runs`` and ``tether show``.

Everything comes from the run's committed events: each carries its commit
time, each reply its usage, and ``run-started`` the model that drove the run
from there (:mod:`tether.cost` prices it).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..cost import total_cost
from ..events import Event, ModelReplied, ToolFinished, ToolStarted
from ..journal import Journal


def run_cost(events: Sequence[Event]) -> float | None:
    """What the run's replies cost in US dollars (None when a model has no price)."""
    journal = Journal.of(events)
    return total_cost(journal.usage_by_model, default_model=journal.model)


def money(cost: float | None) -> str:
    """``$0.0123``, or ``-`` when the cost is unknown."""
    return "-" if cost is None else f"${cost:.4f}"


def took(seconds: float) -> str:
    """A duration the way a person reads it: ``850 ms``, ``2.4 s``, ``3 min 5 s``."""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    return f"{int(seconds // 60)} min {int(seconds % 60)} s"


def steps_report(events: Sequence[Event]) -> list[str]:
    """Lines saying how long each model call and tool call took and what each reply used."""
    lines = ["", "time and usage:"]
    step, last_at = 0, 0.0
    started: dict[str, float] = {}  # call id -> when it started
    for ev in events:
        if isinstance(ev, ModelReplied):
            step += 1
            usage = ev.message.usage
            tokens = f"  {usage.input_tokens:,} in / {usage.output_tokens:,} out tokens" if usage else ""
            lines.append(f"  step {step:<3} {'model':<16} {took(ev.at - last_at):>9}{tokens}")
        elif isinstance(ev, ToolStarted):
            started[ev.call.id] = ev.at
        elif isinstance(ev, ToolFinished):
            name = ev.result.name or "tool"
            begun = started.pop(ev.call_id, None)
            spent = took(ev.at - begun) if begun is not None else "(not run)"
            lines.append(f"  {'':8} {name:<16} {spent:>9}" + (f"  {ev.error}" if ev.error else ""))
        if ev.kind != "token":
            last_at = ev.at
    journal = Journal.of(events)
    u = journal.usage
    lines.append(
        f"  total: {u.input_tokens:,} in / {u.output_tokens:,} out tokens in {u.requests} request(s), "
        f"cost {money(total_cost(journal.usage_by_model, default_model=journal.model))}"
    )
    return lines
