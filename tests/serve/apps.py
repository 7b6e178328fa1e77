"""The agents the serve tests put behind a real server (``tether serve tests.serve.apps:NAME``).

Brains are plain functions of the notebook (``FunctionPolicy``), so every run
is deterministic. Side-effecting tools append a line to the oracle file named
by ``TETHER_TEST_ORACLE`` before they return: the ground truth of how often
each one really ran.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from tether import Action, Agent, FunctionPolicy, Invocation, ask_human, tool

ORDERS = {
    "A1234": ("Wireless Headphones", 79),
    "B777": ("Espresso Machine", 249),
    "C555": ("Desk Lamp", 35),
    "D900": ("Hiking Boots", 140),
}


def oracle(*fields: Any) -> None:
    path = os.environ.get("TETHER_TEST_ORACLE")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(fields) + "\n")
            f.flush()
            os.fsync(f.fileno())


@tool(effect="none")
def look_up_order(order_id: str) -> str:
    """Find an order by its id.

    Args:
        order_id: the order number, like A1234.
    """
    item, price = ORDERS.get(order_id, ("unknown item", 0))
    return f"{order_id}, {item}, ${price}, delivered, reported defective"


# Not support.refund: the oracle counts executions by run and call id (Invocation) to prove exactly once.
@tool(approval=True, effect="once")
def issue_refund(order_id: str, amount: int, call: Invocation, note: str = "") -> str:
    """Refund an order to the original card (a person must approve).

    Args:
        order_id: the order number.
        amount: dollars to refund.
        note: a note for the customer.
    """
    oracle("issue_refund", call.run_id, call.call_id, order_id, amount)
    return f"${amount} refunded to the original card for {order_id}"


def _order_in(text: str) -> str | None:
    found = re.search(r"\b([A-Z]\d{3,4})\b", text)
    return found.group(1) if found else None


def support_brain(context: Any, tools: Any) -> Any:
    """Look the order up (asking which one if the task does not say), refund it, answer."""
    results = {m.name: m for m in context if m.role == "tool"}
    task = next(m.content for m in context if m.role == "user")
    order = _order_in(task) or (_order_in(results["ask_human"].content) if "ask_human" in results else None)
    if order is None:
        return Action("ask_human", {"question": "Which order is this about?"}, "the customer did not say")
    if "look_up_order" not in results:
        return Action("look_up_order", {"order_id": order}, "let me pull up the order first")
    if "issue_refund" not in results:
        note = task if "<" in task else ""
        args = {"order_id": order, "amount": ORDERS.get(order, ("", 10))[1], "note": note}
        return Action("issue_refund", args, "it qualifies, and a refund needs a person to sign off")
    refund = results["issue_refund"]
    if refund.is_error:
        return f"I could not refund {order}: {refund.content}"
    return f"Done: {refund.content}."


def support() -> Agent:
    return Agent(FunctionPolicy(support_brain), [look_up_order, issue_refund, ask_human()], name="support")


# -- a run that can be killed in the middle ----------------------------------------------


@tool(effect="once")
def charge(amount: int, call: Invocation) -> str:
    """Charge a card (must never happen twice).

    Args:
        amount: dollars.
    """
    oracle("charge", call.run_id, call.call_id, amount)
    return f"charged ${amount}"


@tool(effect="none")
def wait_for(name: str) -> str:
    """Wait until a file named ``name`` exists in TETHER_TEST_GATES.

    Args:
        name: the file to wait for.
    """
    gate = Path(os.environ["TETHER_TEST_GATES"]) / name
    oracle("waiting", name)
    while not gate.exists():
        time.sleep(0.02)
    return f"{name} is there"


@tool(effect="once")
def charge_slowly(gate: str, call: Invocation) -> str:
    """Start a charge, and finish it only once a file named ``gate`` exists.

    Args:
        gate: the file to wait for.
    """
    oracle("charge", call.run_id, call.call_id, 5)
    oracle("waiting", gate)
    while not (Path(os.environ["TETHER_TEST_GATES"]) / gate).exists():
        time.sleep(0.02)
    return "charged $5, slowly"


def slow_brain(context: Any, tools: Any) -> Any:
    """``gate-N``: charge, then wait in a read-only tool; ``inside-N``: wait inside the charge."""
    done = [m.name for m in context if m.role == "tool"]
    task = next(m.content for m in context if m.role == "user").strip()
    if task.startswith("inside"):
        return Action("charge_slowly", {"gate": task}) if not done else f"all done: {context.last().content}"
    if "charge" not in done:
        return Action("charge", {"amount": 5}, "charge first")
    if "wait_for" not in done:
        return Action("wait_for", {"name": task}, "then wait for the gate")
    return "all done"


def slow() -> Agent:
    return Agent(FunctionPolicy(slow_brain), [charge, charge_slowly, wait_for], name="slow", lease_ttl=30)


def echo() -> Agent:
    return Agent(FunctionPolicy(lambda context, tools: f"echo: {context.last().content[:50]}"), name="echo")


# -- a run tree: the desk delegates refunds to billing, whose refund needs approval ----------


def billing_brain(context: Any, tools: Any) -> Any:
    results = [m for m in context if m.role == "tool"]
    if not results:
        return Action("issue_refund", {"order_id": "A1234", "amount": 79})
    return f"billing: {results[-1].content}"


billing = Agent(FunctionPolicy(billing_brain), [issue_refund], name="billing")


def desk_brain(context: Any, tools: Any) -> Any:
    results = [m for m in context if m.role == "tool"]
    return Action("billing", {"task": "refund A1234"}) if not results else f"desk: {results[-1].content}"


def desk() -> Agent:
    return Agent(FunctionPolicy(desk_brain), [billing.as_tool(description="Ask billing.")], name="desk")


# -- hostile text: a model and a tool that hand over lone surrogates (issue 25, item 3) -------------


@tool(effect="none")
def echo_text(text: str) -> str:
    """Say the text back (and add a lone surrogate, as a broken tool might).

    Args:
        text: what to say back.
    """
    return text + "\udfff"


@tool(approval=True, effect="once")
def send_note(text: str) -> str:
    """Send a note to the customer (a person must approve).

    Args:
        text: what the customer reads.
    """
    oracle("send_note", text)
    return f"sent: {text}"


def hostile_brain(context: Any, tools: Any) -> Any:
    """A reply and a tool result holding lone surrogates, then a gated call whose JSON spells one as an escape."""
    from tether import Message, ToolCall

    done = [m.name for m in context if m.role == "tool"]
    if not done:
        return Message.assistant("thinking \ud800 hard", [ToolCall("c1", "echo_text", '{"text": "a\ud800b"}')])
    if "send_note" not in done:
        return ToolCall("c2", "send_note", '{"text": "hello \\ud800 there"}')
    return "done \udc00"


def hostile() -> Agent:
    return Agent(FunctionPolicy(hostile_brain), [echo_text, send_note], name="hostile")


# -- one reply with many gated calls (issue 25, item 10) ----------------------------------------------


def many_brain(context: Any, tools: Any) -> Any:
    """One reply asking for 600 gated refunds at once (the task says how many: "refund 600")."""
    if any(m.role == "tool" for m in context):
        return "all decided"
    task = next(m.content for m in context if m.role == "user")
    count = int(task.split()[-1])
    return [Action("issue_refund", {"order_id": f"A{n:04d}", "amount": 1 + n % 90}) for n in range(count)]


def many() -> Agent:
    return Agent(FunctionPolicy(many_brain), [issue_refund], name="many")


# -- a desk a non-developer approves for: money, choices, yes/no (issue 22, item 3) ------------------


@tool(approval=True, effect="once")
def refund_order(
    order_id: str,
    amount: Annotated[float, Field(gt=0, le=500, json_schema_extra={"format": "money"})],
    reason: Literal["damaged", "late", "wrong item", "other"],
    call: Invocation,
    notify_customer: bool = True,
    note: str = "",
) -> str:
    """Refund an order to the customer's card. Money leaves the company: check the amount against the order.

    Args:
        order_id: The order number, like A1234.
        amount: How much to refund, in dollars (at most $500 without a manager).
        reason: Why the customer gets money back.
        notify_customer: Email the customer once the refund is done.
        note: A note the customer reads.
    """
    oracle("refund_order", call.run_id, order_id, amount, reason, notify_customer)
    return f"${amount:.2f} refunded for {order_id} ({reason})"


def shop_brain(context: Any, tools: Any) -> Any:
    results = {m.name: m for m in context if m.role == "tool"}
    task = next(m.content for m in context if m.role == "user")
    order = _order_in(task) or "A1234"
    if "look_up_order" not in results:
        return Action("look_up_order", {"order_id": order}, "let me pull up the order first")
    if "refund_order" not in results:
        price = ORDERS.get(order, ("", 10))[1]
        args = {"order_id": order, "amount": price, "reason": "damaged", "notify_customer": True, "note": ""}
        return Action("refund_order", args, "it arrived broken: a refund needs a person to sign off")
    refund = results["refund_order"]
    return f"Sorry about that: {refund.content}." if not refund.is_error else f"No refund: {refund.content}"


def shop() -> Agent:
    return Agent(FunctionPolicy(shop_brain), [look_up_order, refund_order], name="shop")
