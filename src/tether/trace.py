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
    ChildEvent,
    Compacted,
    Event,
    Failed,
    LimitReached,
    ModelReplied,
    Noted,
    Paused,
    QuestionAsked,
    RunStarted,
    ToolFinished,
)
from .messages import Message

__all__ = ["render"]


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def render(run: Iterable[Event] | Context | Iterable[Message], *, name: str = "agent", width: int = 200) -> str:
    """The trace of a run's events, a Context, or a list of messages, as text.

    A child run's events (an agent used as a tool) are told under the call that
    delegated to it, indented, in the child agent's name.
    """
    lines: list[str] = []
    for item in run:
        _item(lines, item, name, width, "")
    return "\n".join(lines)


def _item(lines: list[str], item: Event | Message, name: str, width: int, indent: str) -> None:
    if isinstance(item, Message):
        _message(lines, item, name, width, indent)
    elif isinstance(item, ChildEvent):
        _item(lines, item.event, item.agent, width, indent + "    ")
    elif isinstance(item, RunStarted):
        if item.resumed and indent:
            lines.append(f"{indent}  ({name} resumes)")
        for m in item.messages:
            _message(lines, m, name, width, indent)
    elif isinstance(item, ModelReplied):
        _message(lines, item.message, name, width, indent)
    elif isinstance(item, ToolFinished):
        _message(lines, item.result, name, width, indent)
    else:
        _event(lines, item, width, indent)


def _message(lines: list[str], m: Message, name: str, width: int, indent: str) -> None:
    if m.role == "user":
        asker = f"{name} was asked" if indent else "you asked"
        lines.append(f'{indent}{asker}: "{_short(m.text, width)}"')
    elif m.role == "assistant" and m.tool_calls:
        if m.content:
            lines.append(f"{indent}  {name} thought: {_short(m.text, width)}")
        for c in m.tool_calls:
            lines.append(f"{indent}  {name} calls: {c.name}({_short(c.arguments, width)})")
    elif m.role == "assistant":
        who = f"{name} " if indent else ""
        lines.append(f"{indent}  {who}final answer: {_short(m.text, width)}")
    elif m.role == "tool":
        verb = "failed" if m.is_error else "returned"
        lines.append(f"{indent}    -> {m.name or 'tool'} {verb}: {_short(m.text, width)}")


def _event(lines: list[str], ev: Event, width: int, indent: str) -> None:
    if isinstance(ev, ApprovalRequested):
        lines.append(f"{indent}    ?? {ev.call.name} waits for a human decision")
    elif isinstance(ev, QuestionAsked):
        lines.append(f'{indent}    ?? {ev.call.name} asks a person: "{_short(ev.question, width)}"')
    elif isinstance(ev, ApprovalDecided):
        lines.append(f"{indent}    !! a human said {ev.decision.verdict} to {ev.decision.call_id}")
    elif isinstance(ev, Paused):
        lines.append(f"{indent}  (paused: {ev.reason})")
    elif isinstance(ev, Failed):
        lines.append(f"{indent}  (failed: {_short(ev.error, width)})")
    elif isinstance(ev, Cancelled):
        lines.append(f"{indent}  (cancelled)")
    elif isinstance(ev, LimitReached):
        lines.append(f"{indent}  (stopped: the {ev.limit} limit of {ev.value:g} was reached)")
    elif isinstance(ev, Compacted):
        lines.append(f"{indent}  (older notes were summarised)")
    elif isinstance(ev, Noted):
        lines.append(f"{indent}    !! the model was told: {_short(ev.message.text, width)}")
