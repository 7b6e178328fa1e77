"""What a run may still spend: its agent's limits, bounded by what its parent had left.

A run counts steps, tool calls, tokens, cost and wall time in its journal. A
child run (an agent used as a tool) starts with a :class:`Parent`: what the
delegating run had left when it delegated, itself bounded by its own ancestors,
so no run in a tree can spend more than the root allows.

>>> left = Parent("c1", None, None, None, steps=3, tool_calls=None, tokens=None)
>>> _least(left.steps, _less(5, 4)), _least(None, 2), _less(None, 9)
(1, 2, None)
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from ..context import Context
from ..cost import Price, price_of, total_cost, unpriced_models
from ..events import Event, Failed, LimitReached
from ..exceptions import UserError
from ..journal import Journal
from ..policy import Policy
from ..store import RunStore
from ..tools import Tool
from .settings import Settings

__all__ = ["Budget", "Parent", "check_cost", "check_limits", "cost_of"]


@dataclasses.dataclass(frozen=True, slots=True)
class Parent:
    """What a child run inherits from the call that delegated to it: where it is journaled,
    under which key, and what its parent had left to spend."""

    call_id: str
    store: RunStore | None
    key: bytes | None
    deadline: float | None
    steps: int | None
    tool_calls: int | None
    tokens: int | None
    cost: float | None = None
    approvers: tuple[Callable[[Tool, dict[str, Any], Context], bool | str], ...] = ()  # every ancestor's, root first


def cost_of(agent: Settings, j: Journal) -> float | None:
    """What a run's replies cost so far in US dollars (None when a model has no price)."""
    return total_cost(j.usage_by_model, agent.prices, default_model=j.model)


class Budget:
    """One run's limits: its agent's, its parent's share, and its deadline on the event loop's clock."""

    def __init__(self, parent: Parent | None) -> None:
        self.parent = parent
        self.deadline: float | None = None
        self._steps0 = self._tools0 = self._tokens0 = 0  # a child's counters when it (re)started
        self._cost0 = 0.0

    def start_clock(self, agent: Settings) -> None:
        if agent.max_seconds is not None:
            self.deadline = asyncio.get_running_loop().time() + agent.max_seconds
        if self.parent is not None and self.parent.deadline is not None:
            self.deadline = min(self.deadline or self.parent.deadline, self.parent.deadline)

    def start_counting(self, agent: Settings, j: Journal) -> None:
        """Count a child's spending from here (what it spent before a restart was counted then)."""
        self._steps0, self._tools0, self._tokens0 = j.steps, j.tool_calls, j.usage.total_tokens
        if self.parent is not None and self.parent.cost is not None:
            self._cost0 = cost_of(agent, j) or 0.0

    def out_of_time(self) -> bool:
        return self.deadline is not None and asyncio.get_running_loop().time() >= self.deadline

    def over(self, agent: Settings, j: Journal, new_calls: int = 0, *, in_turn: bool = False) -> Event | None:
        """The event that ends the run if going on (with ``new_calls`` more calls) breaks a limit."""
        if self.out_of_time():
            return LimitReached("seconds", agent.max_seconds or 0)
        if not in_turn and j.steps >= agent.max_steps:
            return LimitReached("steps", agent.max_steps)
        if agent.max_tokens is not None and j.usage.total_tokens >= agent.max_tokens:
            return LimitReached("tokens", agent.max_tokens)
        if agent.max_cost is not None and (over := _over_cost(agent, j, agent.max_cost)):
            return over
        if agent.max_tool_calls is not None and j.tool_calls + new_calls > agent.max_tool_calls:
            return LimitReached("tool_calls", agent.max_tool_calls)
        return self._over_parent(agent, j, new_calls, in_turn)

    def _over_parent(self, agent: Settings, j: Journal, new_calls: int, in_turn: bool) -> Event | None:
        """A child may spend no more than what its parent had left when it delegated."""
        left = self.parent
        if left is None:
            return None
        if not in_turn and left.steps is not None and j.steps - self._steps0 >= left.steps:
            return LimitReached("steps", left.steps)
        if left.tokens is not None and j.usage.total_tokens - self._tokens0 >= left.tokens:
            return LimitReached("tokens", left.tokens)
        if left.tool_calls is not None and j.tool_calls - self._tools0 + new_calls > left.tool_calls:
            return LimitReached("tool_calls", left.tool_calls)
        if left.cost is not None:
            return _over_cost(agent, j, self._cost0 + left.cost)
        return None

    def left(self, agent: Settings, j: Journal, call_id: str, store: RunStore | None, key: bytes | None) -> Parent:
        """What this run has left (bounded by its own ancestors), to bound the child it delegates to."""
        up, spent = self.parent, cost_of(agent, j)
        own = Parent(
            call_id=call_id,
            store=store,
            key=key,
            deadline=self.deadline,
            steps=max(agent.max_steps - j.steps, 0),
            tool_calls=None if agent.max_tool_calls is None else max(agent.max_tool_calls - j.tool_calls, 0),
            tokens=None if agent.max_tokens is None else max(agent.max_tokens - j.usage.total_tokens, 0),
            cost=None if agent.max_cost is None else max(agent.max_cost - (spent or 0.0), 0.0),
            approvers=(*(up.approvers if up else ()), *((agent.approver,) if agent.approver else ())),
        )
        if up is None:
            return own
        return dataclasses.replace(
            own,
            steps=_least(own.steps, _less(up.steps, j.steps - self._steps0)),
            tool_calls=_least(own.tool_calls, _less(up.tool_calls, j.tool_calls - self._tools0)),
            tokens=_least(own.tokens, _less(up.tokens, j.usage.total_tokens - self._tokens0)),
            cost=_least(own.cost, _less(up.cost, (spent or 0.0) - self._cost0)),
        )


def _over_cost(agent: Settings, j: Journal, budget: float) -> Event | None:
    """The cost budget; a reply from a model without a price fails the run (the budget cannot be kept)."""
    unpriced = unpriced_models(j.usage_by_model, agent.prices, default_model=j.model)
    if unpriced:
        names = ", ".join(f"model {m!r}" if m else "a brain without a model name" for m in unpriced)
        return Failed(f"max_cost cannot be kept: no price for {names} (give Agent(prices=...))", "UserError")
    spent = cost_of(agent, j) or 0.0
    return LimitReached("cost", budget) if spent >= budget else None


def _less(left: Any, used: Any) -> Any:
    return None if left is None else max(left - used, 0)


def _least(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else min(a, b)


def check_limits(steps: Any, tool_calls: Any, tokens: Any, seconds: Any) -> None:
    """Refuse limits that are not positive numbers (``UserError`` naming the argument)."""

    def positive_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v > 0

    if not positive_int(steps):
        raise UserError(f"max_steps must be a positive integer, got {steps!r}")
    for name, v in (("max_tool_calls", tool_calls), ("max_tokens", tokens)):
        if v is not None and not positive_int(v):
            raise UserError(f"{name} must be a positive integer or None, got {v!r}")
    if seconds is not None and not (isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds > 0):
        raise UserError(f"max_seconds must be a positive number or None, got {seconds!r}")


def check_cost(max_cost: Any, policy: Policy, prices: Mapping[str, Price]) -> None:
    """A cost budget needs a number and a price for the brain's model, or it could never stop a run."""
    if not all(isinstance(p, Price) for p in prices.values()):
        raise UserError(f"prices must map model names to tether.cost.Price values, got {prices!r}")
    if max_cost is None:
        return
    if not (isinstance(max_cost, int | float) and not isinstance(max_cost, bool) and max_cost > 0):
        raise UserError(f"max_cost must be a positive number of US dollars or None, got {max_cost!r}")
    model = getattr(policy, "model", None)  # without one, each reply must name its model (Message.model)
    if isinstance(model, str) and price_of(model, prices) is None:
        raise UserError(f"max_cost needs the price of model {model!r}: give prices={{{model!r}: Price(...)}}")
