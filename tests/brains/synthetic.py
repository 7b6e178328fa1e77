"""A synthetic task family for the trained brain, and the rule-based teacher that solves it.

Four kinds of request, each with fresh values: the weather in a city (one
call, then an answer quoting the result), a currency conversion (three
arguments copied from the message), the weather in two cities (two calls in
one reply), and small talk no tool fits (answer at once). The teacher is a
plain-Python brain (FunctionPolicy); its runs are the training data.
"""

from __future__ import annotations

import random
import re

from tether import Action, FunctionPolicy, tool
from tether.evals import Case, ExpectedCall

TRAIN_CITIES = [
    "Paris",
    "Tokyo",
    "Delhi",
    "Lima",
    "Oslo",
    "Cairo",
    "Rome",
    "Berlin",
    "Madrid",
    "Dublin",
    "Vienna",
    "Prague",
    "Lisbon",
    "Athens",
    "Warsaw",
    "Moscow",
    "Seoul",
    "Bangkok",
    "Hanoi",
    "Nairobi",
]
TEST_CITIES = ["Quito", "Accra", "Riga", "Tunis", "Manila", "Havana", "Bogota", "Zagreb", "Sofia", "Tallinn"]
CURRENCIES = ["USD", "EUR", "JPY", "GBP", "CHF", "CAD"]
WEATHER_ASKS = [
    "What's the weather in {c}?",
    "How is the weather in {c} today?",
    "Weather in {c} please",
    "Tell me the weather for {c}.",
    "Is it warm in {c}?",
]
PAIR_ASKS = ["What's the weather in {a} and in {b}?", "Compare the weather in {a} and {b}."]
CONVERT_ASKS = ["Convert {n} {x} to {y}.", "How much is {n} {x} in {y}?", "Please change {n} {x} into {y}"]
SMALL_TALK = ["Hello there!", "Thanks a lot!", "Who are you?", "Good morning", "Tell me about yourself."]


def temperature(city: str) -> int:
    return 10 + sum(map(ord, city)) % 20


@tool(effect="none")
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city.
    """
    return f"{city}: {temperature(city)} degrees"


@tool(effect="none")
def convert(amount: int, source: str, target: str) -> str:
    """Convert money.

    Args:
        amount: how much.
        source: currency code to convert from.
        target: currency code to convert to.
    """
    return f"{amount} {source} is {amount * 2} {target}"


TOOLS = [get_weather, convert]


def teacher(context, tools):
    """Solve every request of the family by rules (the demonstrations)."""
    user = next(m.content for m in reversed(list(context)) if m.role == "user")
    results = [m for m in context if m.role == "tool"]
    cities = re.findall(r"\b(?:in|for|and) ([A-Z][a-z]+)", user)
    money = re.search(r"(\d+) ([A-Z]{3}) (?:to|in|into) ([A-Z]{3})", user)
    if money:
        if not results:
            n, x, y = money.groups()
            return Action("convert", {"amount": int(n), "source": x, "target": y}, "convert it")
        return f"That is {results[-1].content.split(' is ')[1]}."
    if cities:
        if not results:
            return [Action("get_weather", {"city": c}) for c in cities]
        return " ".join(f"It is {r.content.split(': ')[1]} in {r.content.split(':')[0]}." for r in results)
    return "Hello! I can tell you the weather or convert money."


def brain() -> FunctionPolicy:
    return FunctionPolicy(teacher)


def tasks(n: int, cities: list[str], seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        kind = rng.randrange(4)
        if kind == 0:
            out.append(rng.choice(WEATHER_ASKS).format(c=rng.choice(cities)))
        elif kind == 1:
            a, b = rng.sample(cities, 2)
            out.append(rng.choice(PAIR_ASKS).format(a=a, b=b))
        elif kind == 2:
            x, y = rng.sample(CURRENCIES, 2)
            out.append(rng.choice(CONVERT_ASKS).format(n=rng.randrange(2, 999), x=x, y=y))
        else:
            out.append(rng.choice(SMALL_TALK))
    return out


def cases(n: int, cities: list[str], seed: int) -> list[Case]:
    """Held-out cases, graded against what the teacher does: same calls (in order) and same answer."""
    import json

    from tether import Agent

    out = []
    for i, task in enumerate(tasks(n, cities, seed)):
        result = Agent(brain(), TOOLS).run_sync(task)
        calls = [ExpectedCall(c.name, json.loads(c.arguments)) for m in result.context for c in m.tool_calls]
        out.append(Case(f"t{i}", task, expected=result.output, tool_calls=tuple(calls), order="exact"))
    return out
