"""The seed's support agent: look up the order, check the policy, refund after a human signs off.

The brain is a plain Python function (no model, no network). Run it:

    python examples/refund_agent.py            # asks you to approve the refund
    python examples/refund_agent.py --yes      # approves without asking
"""

from __future__ import annotations

import sys

from tether import Action, Agent, FunctionPolicy, tool
from tether.trace import render

ORDERS = {"A1234": {"item": "Wireless Headphones", "price": 79, "status": "delivered, reported defective"}}


@tool(effect="none")
def look_up_order(order_id: str) -> str:
    """Find an order by its id.

    Args:
        order_id: the order number, like A1234.
    """
    o = ORDERS[order_id]
    return f"{order_id}, {o['item']}, ${o['price']}, {o['status']}"


@tool(effect="none")
def check_policy(order_id: str) -> str:
    """Check whether an order qualifies for a refund."""
    return "eligible, within the 30 day window and reported defective"


@tool(approval=True, effect="once")
def issue_refund(order_id: str, amount: int) -> str:
    """Refund an order to the original card (a human must approve)."""
    return f"${amount} refunded to the original card"


def support_brain(context, tools):
    """Decide the next move from what is already in the notebook."""
    done = {m.name for m in context if m.role == "tool"}
    if "look_up_order" not in done:
        return Action("look_up_order", {"order_id": "A1234"}, "let me pull up the order first")
    if "check_policy" not in done:
        return Action("check_policy", {"order_id": "A1234"}, "now check if it qualifies")
    if "issue_refund" not in done:
        return Action(
            "issue_refund", {"order_id": "A1234", "amount": 79}, "it qualifies, and a refund needs a human to sign off"
        )
    refund = next(m for m in context if m.name == "issue_refund")
    if refund.is_error:
        return "I'm sorry, I could not refund this order: " + refund.content
    return "Good news, A1234 qualifies. I refunded $79 to your card; expect it in 3 to 5 days."


def make_agent(**kw) -> Agent:
    return Agent(FunctionPolicy(support_brain), [look_up_order, check_policy, issue_refund], name="support", **kw)


def main(argv: list[str]) -> int:
    agent = make_agent()
    result = agent.run_sync("Can I get a refund for order A1234? It arrived broken.")
    events = list(result.events)
    while result.status == "paused":
        state = result.state
        for p in result.items:
            print(f"\n{p.call.name}({p.call.arguments}) needs your approval.")
            yes = "--yes" in argv or input("approve? [y/N] ").strip().lower() == "y"
            state = state.approve(p.call.id) if yes else state.deny(p.call.id, "the supervisor said no")
        result = agent.run_sync(state)
        events += result.events
    print(render(events, name="support"))
    return 0 if result.status == "finished" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
