"""Helpers shared by the whole suite (``tests/`` is on the path: ``from support import add``)."""

from __future__ import annotations

from tether import tool


@tool(effect="none")
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


@tool(effect="none", name="add")
def add_numbers(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b
