"""Patterns built from the same five pieces: Plan-and-Execute and Reflection.

ReAct is the default loop itself; multi-agent is ``Agent.as_tool``; memory is
:mod:`tether.memory`. These strategies drive ordinary agents and policies:
nothing here forks the loop.
"""

from __future__ import annotations

from .plan_execute import PlanResult, parse_plan, plan_and_execute
from .reflection import reflect

__all__ = ["PlanResult", "parse_plan", "plan_and_execute", "reflect"]
