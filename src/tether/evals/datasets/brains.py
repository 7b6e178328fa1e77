"""Plain-Python brains for the shipped bodies: baselines, and teachers for a trained brain.

:func:`refund_desk_brain` runs the refund desk by rules, for any order and
phrasing: look the order up, check the policy when a refund is asked for,
refund the order's price, and tell the customer what happened (including a
denied refund or an unknown order). It is the teacher of
``examples/train_refund_brain.py``.

>>> from tether import Agent
>>> from tether.evals.datasets.bodies import check_policy, issue_refund, look_up_order
>>> agent = Agent(refund_desk_brain(), [look_up_order, check_policy, issue_refund])
>>> agent.run_sync("Where is my order C9012?").output
'Order C9012 is in transit, expected Friday.'
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...context import Context
from ...messages import Message
from ...policy import Action, FunctionPolicy, Move
from ...tools import Tool

_ORDER = re.compile(r"\b([A-Z]\d{4})\b")
_WANTS_REFUND = re.compile(r"refund|money back|return|broken|reimburse", re.I)


def refund_desk_brain() -> FunctionPolicy:
    """The refund desk's rule-based brain (see the module docstring)."""
    return FunctionPolicy(_refund_desk)


def _refund_desk(context: Context, tools: Sequence[Tool]) -> Move:
    notes = list(context)
    start = max(i for i, m in enumerate(notes) if m.role == "user")
    user, done = notes[start].text, {m.name: m for m in notes[start:] if m.role == "tool"}
    found = _ORDER.search(user)
    if found is None:
        return "Which order is it? Please give me the order number (like A1234)."
    oid = found.group(1)
    lookup = done.get("look_up_order")
    if lookup is None:
        return Action("look_up_order", {"order_id": oid}, "let me pull up the order first")
    if lookup.is_error:
        return f"I could not find an order {oid}. Could you check the order number?"
    if not _WANTS_REFUND.search(user):
        return f"Order {oid} is {lookup.text.split(', ', 3)[3]}."
    return _refund(oid, lookup, done)


def _refund(oid: str, lookup: Message, done: dict[str | None, Message]) -> Move:
    policy = done.get("check_policy")
    if policy is None:
        return Action("check_policy", {"order_id": oid}, "now check if it qualifies")
    if policy.text.startswith("not eligible"):
        return f"I'm sorry, {oid} is not eligible for a refund: {policy.text.removeprefix('not eligible: ')}."
    amount = int(lookup.text.split("$", 1)[1].split(",", 1)[0])
    refund = done.get("issue_refund")
    if refund is None:
        return Action(
            "issue_refund", {"order_id": oid, "amount": amount}, "it qualifies, and a refund needs a human to sign off"
        )
    if refund.is_error:
        return f"I'm sorry, I could not refund {oid}: the refund was not approved."
    return f"Good news, {oid} qualifies. I refunded ${amount} to your card; expect it in 3 to 5 days."
