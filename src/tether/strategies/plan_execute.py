"""Plan-and-Execute: a planner writes numbered steps; an executor agent works through them.

The planner is any :class:`~tether.policy.Policy` (a model, a function, a
script): it is asked for a plan as a numbered list. Each step runs as a task of
the executor agent, continuing one notebook, so later steps see earlier work.
When a step does not finish, the planner is asked again with what happened
(re-planning), up to ``max_replans`` times.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..agent import Agent, RunResult
from ..context import Context
from ..messages import Message
from ..policy import Policy

PLANNER_PROMPT = (
    "You plan work for an assistant that has tools. Reply with a short numbered list of steps, "
    "one per line, each a task the assistant can do on its own. The last step gives the final answer."
)


@dataclass(frozen=True)
class PlanResult:
    """How the plan went: ``status`` and ``output`` of the last step, every plan and every step run."""

    status: str
    output: str | None
    plans: list[list[str]] = field(default_factory=list)
    runs: list[RunResult] = field(default_factory=list)


def parse_plan(text: str) -> list[str]:
    """The steps of a numbered (or bulleted) list; a text without a list is one step.

    >>> parse_plan("1. find the order\\n2) check the policy\\n- reply")
    ['find the order', 'check the policy', 'reply']
    """
    steps = [m.group(1).strip() for m in re.finditer(r"^\s*(?:\d+[.)]|[-*])\s+(.+)$", text, flags=re.M)]
    return steps or ([text.strip()] if text.strip() else [])


async def _ask_plan(planner: Policy, task: str, history: str) -> list[str]:
    notes = [Message.system(PLANNER_PROMPT), Message.user(task)]
    if history:
        notes.append(Message.user(f"What happened so far:\n{history}\nWrite a new plan for the remaining work."))
    reply = await planner.decide(Context(notes), ())
    return parse_plan(reply.content)


async def plan_and_execute(planner: Policy, executor: Agent, task: str, *, max_replans: int = 2) -> PlanResult:
    """Plan ``task``, run each step with ``executor``, re-plan when a step does not finish."""
    plans: list[list[str]] = []
    runs: list[RunResult] = []
    context: Context | None = None
    history = ""
    for _ in range(max_replans + 1):
        steps = await _ask_plan(planner, task, history)
        plans.append(steps)
        for step in steps:
            result = await executor.run(step, context=context)
            runs.append(result)
            if result.status != "finished":
                if result.status == "paused":  # a human decides; the caller resumes the step
                    return PlanResult("paused", None, plans, runs)
                history += f"- step {step!r} ended {result.status}: {result.error or result.limit or ''}\n"
                break
            context = result.context
            history += f"- step {step!r} done: {result.output}\n"
        else:
            return PlanResult("finished", runs[-1].output if runs else None, plans, runs)
    return PlanResult(runs[-1].status if runs else "failed", None, plans, runs)
