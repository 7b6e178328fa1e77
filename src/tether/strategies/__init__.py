"""Patterns built from the same five pieces: Plan-and-Execute and Reflection (and CRITIC).

ReAct is the default loop itself; multi-agent is ``Agent.as_tool`` (child runs)
and handoffs; memory is :mod:`tether.memory`. Each strategy here is a run of its
own: a small deterministic brain that drives ordinary agents as child runs, so
a strategy pauses, resumes and survives a crash like any run. Nothing forks the loop.
"""

from __future__ import annotations

from .plan_execute import PlanAndExecute, PlanResult, parse_plan, plan_and_execute, plan_execute_agent
from .reflection import Reflect, reflect, reflection_agent

__all__ = [
    "PlanAndExecute",
    "PlanResult",
    "Reflect",
    "parse_plan",
    "plan_and_execute",
    "plan_execute_agent",
    "reflect",
    "reflection_agent",
]
