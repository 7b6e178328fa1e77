"""A readable trace of a run, the way the seed article tells one.

>>> from tether import Action, Agent, tool
>>> from tether.testing import ScriptedModel
>>> @tool(effect="none")
... def look_up_order(order_id: str) -> str:
...     return f"{order_id}: Wireless Headphones, $79, delivered"
>>> model = ScriptedModel([Action("look_up_order", {"order_id": "A1234"}, reasoning="let me pull up the order first"),
...                        "Refunded $79."])
>>> result = Agent(model, [look_up_order]).run_sync("Can I get a refund for order A1234?")
>>> print(render(result.events, name="support"))
you asked: "Can I get a refund for order A1234?"
  support thought: let me pull up the order first
  support calls: look_up_order({"order_id": "A1234"})
    -> look_up_order returned: A1234: Wireless Headphones, $79, delivered
  final answer: Refunded $79.
"""

from __future__ import annotations

from collections.abc import Iterable

from .context import Context
from .events import (
    ApprovalDecided,
    ApprovalRequested,
    Cancelled,
    Compacted,
    Event,
    Failed,
    LimitReached,
    ModelReplied,
    Paused,
    RunStarted,
    ToolFinished,
)
from .messages import Message


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def render(run: Iterable[Event] | Context | Iterable[Message], *, name: str = "agent", width: int = 200) -> str:
    """The trace of a run's events, a Context, or a list of messages, as text."""
    lines: list[str] = []
    for item in run:
        if isinstance(item, Message):
            _message(lines, item, name, width)
        elif isinstance(item, RunStarted):
            for m in item.messages:
                _message(lines, m, name, width)
        elif isinstance(item, ModelReplied):
            _message(lines, item.message, name, width)
        elif isinstance(item, ToolFinished):
            _message(lines, item.result, name, width)
        else:
            _event(lines, item, width)
    return "\n".join(lines)


def _message(lines: list[str], m: Message, name: str, width: int) -> None:
    if m.role == "user":
        lines.append(f'you asked: "{_short(m.content, width)}"')
    elif m.role == "assistant" and m.tool_calls:
        if m.content:
            lines.append(f"  {name} thought: {_short(m.content, width)}")
        for c in m.tool_calls:
            lines.append(f"  {name} calls: {c.name}({_short(c.arguments, width)})")
    elif m.role == "assistant":
        lines.append(f"  final answer: {_short(m.content, width)}")
    elif m.role == "tool":
        verb = "failed" if m.is_error else "returned"
        lines.append(f"    -> {m.name or 'tool'} {verb}: {_short(m.content, width)}")


def _event(lines: list[str], ev: Event, width: int) -> None:
    if isinstance(ev, ApprovalRequested):
        lines.append(f"    ?? {ev.call.name} waits for a human decision")
    elif isinstance(ev, ApprovalDecided):
        lines.append(f"    !! a human said {ev.decision.verdict} to {ev.decision.call_id}")
    elif isinstance(ev, Paused):
        lines.append(f"  (paused: {ev.reason})")
    elif isinstance(ev, Failed):
        lines.append(f"  (failed: {_short(ev.error, width)})")
    elif isinstance(ev, Cancelled):
        lines.append("  (cancelled)")
    elif isinstance(ev, LimitReached):
        lines.append(f"  (stopped: the {ev.limit} limit of {ev.value:g} was reached)")
    elif isinstance(ev, Compacted):
        lines.append("  (older notes were summarised)")
