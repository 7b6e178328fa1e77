"""The bodies of the shipped tasks: tools and instructions, around whatever brain is evaluated.

Each case of :mod:`tether.evals.datasets` names its body in ``data["body"]``:

* ``refund``: the seed article's support desk (``look_up_order``,
  ``check_policy``, ``issue_refund`` which needs a human);
* ``weather``: the second seed's assistant (``get_weather``, ``send_email``
  which needs a human);
* ``toolbox``: six unrelated tools (weather, currency, stocks, time, add,
  multiply) for tool choice and several calls in one reply;
* ``finance``: finance tools only, for questions no tool fits;
* ``workspace``: the built-in :func:`~tether.toolkits.workspace_tools` in the
  trial's fresh working directory (writes need a human).

Every tool is deterministic (fixed tables), so a case's expected answer holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from ... import Agent, Tool, tool
from ...exceptions import UserError

if TYPE_CHECKING:
    from ..cases import Setup

T = TypeVar("T")
ORDERS = {
    "A1234": ("Wireless Headphones", 79, "delivered 6 days ago, reported defective"),
    "B5678": ("Desk Lamp", 35, "delivered 45 days ago"),
    "C9012": ("USB-C Cable", 12, "in transit, expected Friday"),
    "D3456": ("Mechanical Keyboard", 120, "delivered 10 days ago, reported defective"),
}
WEATHER = {
    "delhi": "31°C, sunny",
    "paris": "18°C, cloudy",
    "tokyo": "22°C, light rain",
    "london": "14°C, drizzle",
    "new york": "25°C, clear",
    "sydney": "16°C, windy",
}
RATES = {"USD": 1.0, "EUR": 0.925, "JPY": 150.0, "GBP": 0.8}
STOCKS = {"AAPL": 189.5, "MSFT": 415.25, "GOOG": 142.1, "TSLA": 248.0}
CLOCKS = {"tokyo": "21:00", "london": "13:00", "new york": "08:00", "paris": "14:00"}


def _row(table: dict[str, T], key: str, what: str) -> T:
    """The table's entry for ``key`` (a LookupError the model reads when there is none)."""
    found = table.get(key)
    if found is None:
        raise LookupError(f"no {what} {key!r}")
    return found


# -- refund desk (the first seed) ----------------------------------------------------


@tool(effect="none")
def look_up_order(order_id: str) -> str:
    """Find an order by its id.

    Args:
        order_id: the order number, like A1234.
    """
    name, price, status = _row(ORDERS, order_id.strip().upper(), "order")
    return f"{order_id.upper()}, {name}, ${price}, {status}"


@tool(effect="none")
def check_policy(order_id: str) -> str:
    """Check whether an order qualifies for a refund.

    Args:
        order_id: the order number.
    """
    status = _row(ORDERS, order_id.strip().upper(), "order")[2]
    if "in transit" in status:
        return "not eligible: the order has not been delivered yet"
    days = int(status.split(" days")[0].split()[-1])
    if days > 30:
        return f"not eligible: delivered {days} days ago, outside the 30 day window"
    return "eligible, within the 30 day window and reported defective"


@tool(approval=True, effect="once")
def issue_refund(order_id: str, amount: int) -> str:
    """Refund an order to the original card (a human must approve).

    Args:
        order_id: the order number.
        amount: the amount in dollars.
    """
    return f"${amount} refunded to the original card for {order_id}"


# -- weather and email (the second seed), and the toolbox -------------------------------


@tool(effect="none")
def get_weather(city: str) -> str:
    """The current weather in a city.

    Args:
        city: the city name, like Paris.
    """
    return f"{city.strip().title()}: {_row(WEATHER, city.strip().lower(), 'weather station for')}"


@tool(approval=True, effect="once")
def send_email(to: str, subject: str, body: str) -> str:
    """Send an email (a human must approve).

    Args:
        to: the recipient's address.
        subject: the subject line.
        body: the message.
    """
    return f"email sent to {to}"


@tool(effect="none")
def convert_currency(amount: float, from_currency: str, to_currency: str) -> str:
    """Convert an amount of money between currencies.

    Args:
        amount: how much money.
        from_currency: the currency code to convert from, like USD.
        to_currency: the currency code to convert to, like EUR.
    """
    src, dst = from_currency.strip().upper(), to_currency.strip().upper()
    if src not in RATES or dst not in RATES:
        raise LookupError(f"unknown currency; known: {', '.join(RATES)}")
    value = amount / RATES[src] * RATES[dst]
    return f"{amount:g} {src} = {value:.2f} {dst}"


@tool(effect="none")
def get_stock_price(symbol: str) -> str:
    """The latest price of a stock.

    Args:
        symbol: the ticker symbol, like AAPL.
    """
    return f"{symbol.upper()}: ${_row(STOCKS, symbol.strip().upper(), 'stock symbol'):.2f}"


@tool(effect="none")
def get_time(city: str) -> str:
    """The local time in a city.

    Args:
        city: the city name.
    """
    return f"{city.strip().title()}: {_row(CLOCKS, city.strip().lower(), 'clock for')}"


@tool(effect="none")
def add(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


@tool(effect="none")
def multiply(a: float, b: float) -> float:
    """Multiply two numbers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a * b


@tool(effect="none")
def compound_interest(principal: float, rate_percent: float, years: int) -> str:
    """The value of a deposit after compound interest.

    Args:
        principal: the amount deposited.
        rate_percent: the yearly interest rate in percent.
        years: how many years.
    """
    return f"{principal * (1 + rate_percent / 100) ** years:.2f}"


SUPPORT = (
    "You are a support agent for an online shop. Look the order up and check the refund policy "
    "before refunding; refund only eligible orders, for the price of the order. Refunds need a human's approval."
)
ASSISTANT = "You are a helpful assistant. Use a tool only when it helps; answer directly otherwise."
WORKSPACE = (
    "You work in a folder of files. Answer questions with the read-only tools; "
    "change files only when asked. Respect a denial."
)


def _workspace_tools(setup: Setup) -> list[Tool]:
    from ...toolkits import workspace_tools

    return workspace_tools(setup.workdir, approval=True)


BODIES: dict[str, tuple[Callable[[Setup], list[Tool]], str]] = {
    "refund": (lambda s: [look_up_order, check_policy, issue_refund], SUPPORT),
    "weather": (lambda s: [get_weather, send_email], ASSISTANT),
    "toolbox": (lambda s: [get_weather, convert_currency, get_stock_price, get_time, add, multiply], ASSISTANT),
    "finance": (lambda s: [convert_currency, get_stock_price, compound_interest], ASSISTANT),
    "workspace": (_workspace_tools, WORKSPACE),
}


def make_agent(setup: Setup) -> Agent:
    """The agent of one shipped case: its body's tools and instructions around ``setup.brain``.

    >>> from tether.evals.datasets import load
    >>> ds = load("refund-desk")  # its agent is this function
    """
    body = setup.case.data.get("body")
    if body not in BODIES:
        raise UserError(f"case {setup.case.id!r} names no known body (data.body one of {sorted(BODIES)})")
    if setup.brain is None:
        raise UserError("the shipped datasets need a brain to evaluate (brain=...)")
    tools, instructions = BODIES[body]
    return Agent(setup.brain, tools(setup), instructions=instructions, store=setup.store, max_steps=10)
