"""The seed's support agent, served: refunds wait in a web inbox until a person signs off.

Serve it (``pip install -e '.[serve]'``), from the repository's root:

    tether serve examples.refund_server:support     # or: python examples/refund_server.py

then start a run from anywhere (the token is in .tether/serve.token)::

    curl -X POST http://127.0.0.1:8765/api/runs \\
      -H "Authorization: Bearer $(cat .tether/serve.token)" -H 'content-type: application/json' \\
      -d '{"agent": "support", "input": "Can I get a refund for order A1234? It arrived broken."}'

and open http://127.0.0.1:8765/ to approve, edit or deny the refund. A task
that names no order makes the agent ask which one (a question in the inbox).
The brain is a plain Python function: no model, no network, no key.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from tether import Action, Agent, FunctionPolicy, ask_human, tool

ORDERS = {
    "A1234": ("Wireless Headphones", 79, "delivered, reported defective"),
    "B7788": ("Espresso Machine", 249, "delivered, leaking"),
    "C5150": ("Desk Lamp", 35, "delivered"),
}


@tool(effect="none")
def look_up_order(order_id: str) -> str:
    """Find an order by its id.

    Args:
        order_id: the order number, like A1234.
    """
    if order_id not in ORDERS:
        return f"there is no order {order_id}"
    item, price, status = ORDERS[order_id]
    return f"{order_id}, {item}, ${price}, {status}"


@tool(effect="none")
def check_policy(order_id: str) -> str:
    """Check whether an order qualifies for a refund.

    Args:
        order_id: the order number.
    """
    status = ORDERS.get(order_id, ("", 0, ""))[2]
    return "eligible, within the 30 day window" + (" and reported defective" if "delivered, " in status else "")


@tool(approval=True, effect="once")
def issue_refund(order_id: str, amount: int) -> str:
    """Refund an order to the original card (a person must approve).

    Args:
        order_id: the order number.
        amount: dollars to refund.
    """
    return f"approved by a human, ${amount} refunded to the original card"


def _order(text: str) -> str | None:
    found = re.search(r"\b[A-Z]\d{4}\b", text)
    return found.group(0) if found else None


def support_brain(context: Any, tools: Any) -> Any:
    """Decide the next move from what is already in the notebook."""
    results = {m.name: m for m in context if m.role == "tool"}
    task = next(m.content for m in context if m.role == "user")
    order = _order(task) or (_order(results["ask_human"].content) if "ask_human" in results else None)
    if order is None:
        return Action(
            "ask_human",
            {"question": "Which order is this about? (an order number like A1234)"},
            "the customer did not say which order",
        )
    if "look_up_order" not in results:
        return Action("look_up_order", {"order_id": order}, "let me pull up the order first")
    if "check_policy" not in results:
        return Action("check_policy", {"order_id": order}, "now check if it qualifies")
    if "issue_refund" not in results:
        amount = ORDERS.get(order, ("", 0, ""))[1]
        return Action(
            "issue_refund",
            {"order_id": order, "amount": amount},
            "it qualifies, and a refund needs a human to sign off",
        )
    refund = results["issue_refund"]
    if refund.is_error:
        return f"I'm sorry, I could not refund {order}: {refund.content}"
    found = re.search(r"\$(\d+)", refund.content)
    amount = found.group(1) if found else "?"
    return f"Good news, {order} qualifies. I refunded ${amount} to your card; expect it in 3 to 5 days."


def support() -> Agent:
    """The support agent, named as the API knows it."""
    return Agent(
        FunctionPolicy(support_brain),
        [look_up_order, check_policy, issue_refund, ask_human()],
        instructions="You are a support agent. Refunds need a person's approval.",
        name="support",
    )


if __name__ == "__main__":
    from tether.cli import main

    main(["serve", "examples.refund_server:support", *sys.argv[1:]])
