"""Plan-and-Execute: a planner writes numbered steps; an executor agent works through them.

The strategy is a run of its own (:func:`plan_execute_agent` builds the agent
that drives it): its brain asks the planner (any :class:`~tether.policy.Policy`)
for a numbered plan and writes the plan into its reply, then calls the executor
once per step as a child run (each step continues the notebook the previous step
left, so later steps see earlier work). When a step does not finish, the planner
is asked again with what happened (re-planning), up to ``max_replans`` times.
A plan longer than ``max_plan_steps`` keeps its first steps and its last one (the
step that gives the answer): a small model asked for "a short list" once wrote 29.

Because the plan, every step's child run and every re-plan are in the run's
journal, a step that pauses for a person pauses the whole strategy run; deciding
it continues the plan where it stopped, and a crash resumes it, without running
a finished step again.

>>> import asyncio
>>> from tether import Agent
>>> from tether.testing import ScriptedModel
>>> planner = ScriptedModel(["1. find the order\\n2. answer"])
>>> executor = Agent(ScriptedModel(["A1 costs $79", "You paid $79."]))
>>> asyncio.run(plan_and_execute(planner, executor, "What did I pay?")).output
'You paid $79.'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..agent import Agent, RunResult
from ..context import Context
from ..exceptions import UserError
from ..messages import Message, ToolCall
from ..policy import Policy
from ..tools import Tool

PLANNER_PROMPT = (
    "You plan work for an assistant that has tools. Reply with a short numbered list of steps, "
    "one per line, each a task the assistant can do on its own. The last step gives the final answer."
)
PLAN_HEADING = "Plan:"
MAX_PLAN_STEPS = 8
STEP_TOOL = "run_step"


@dataclass(frozen=True)
class PlanResult:
    """How the plan went: ``status`` and ``output`` of the strategy run, every plan, and the run itself.

    ``run`` is the strategy's :class:`~tether.agent.RunResult`: when ``status`` is
    ``"paused"``, decide ``run.items`` and resume it like any run.
    """

    status: str
    output: str | None
    plans: list[list[str]] = field(default_factory=list)
    run: RunResult | None = None


def parse_plan(text: str) -> list[str]:
    """The steps of a numbered (or bulleted) list; a text without a list is one step.

    >>> parse_plan("1. find the order\\n2) check the policy\\n- reply")
    ['find the order', 'check the policy', 'reply']
    """
    steps = [m.group(1).strip() for m in re.finditer(r"^\s*(?:\d+[.)]|[-*])\s+(.+)$", text, flags=re.M)]
    return steps or ([text.strip()] if text.strip() else [])


class PlanAndExecute:
    """The strategy run's brain: plan, run each step as a child run, re-plan when one fails.

    It decides from the notebook alone (the plans it wrote, the steps' results),
    so a resumed run asks the planner again only where it has not answered yet.
    """

    def __init__(self, planner: Policy, *, max_replans: int = 2, max_plan_steps: int = MAX_PLAN_STEPS) -> None:
        if not isinstance(max_plan_steps, int) or isinstance(max_plan_steps, bool) or max_plan_steps < 1:
            raise UserError(f"max_plan_steps must be an integer of at least 1, got {max_plan_steps!r}")
        self.planner = planner
        self.max_replans = max_replans
        self.max_plan_steps = max_plan_steps

    async def decide(self, context: Context, tools: Sequence[Tool]) -> Message:
        task = next((m.text for m in context if m.role == "user"), "")
        plans = _plans(context)
        if not plans:
            return await self._plan(task, "", len(context))
        steps, results = plans[-1], _results_since_last_plan(context)
        if results and results[-1].is_error:  # the last step did not finish
            if len(plans) > self.max_replans:
                return Message.assistant(f"The plan failed: {results[-1].content}")
            return await self._plan(task, _history(context), len(context))
        if len(results) < len(steps):
            return _step(steps, len(results), len(context))
        return Message.assistant(results[-1].text if results else "")

    async def _plan(self, task: str, history: str, n: int) -> Message:
        notes = [Message.system(PLANNER_PROMPT), Message.user(task)]
        if history:
            notes.append(Message.user(f"What happened so far:\n{history}\nWrite a new plan for the remaining work."))
        reply = await self.planner.decide(Context(notes), ())
        steps = parse_plan(reply.text)
        if not steps:
            return Message.assistant("The planner gave no steps.")
        if len(steps) > self.max_plan_steps:  # the first steps, then the one that answers
            steps = steps[: self.max_plan_steps - 1] + steps[-1:]
        text = PLAN_HEADING + "\n" + "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))
        return Message("assistant", text, _step(steps, 0, n).tool_calls, usage=reply.usage)


def plan_execute_agent(
    planner: Policy,
    executor: Agent,
    *,
    max_replans: int = 2,
    max_plan_steps: int = MAX_PLAN_STEPS,
    name: str = "plan-and-execute",
) -> Agent:
    """The agent whose runs are Plan-and-Execute runs (journaled in the executor's store)."""
    step = executor.as_tool(STEP_TOOL, "Do one step of the plan.", continues=True)
    return Agent(
        PlanAndExecute(planner, max_replans=max_replans, max_plan_steps=max_plan_steps),
        [step],
        name=name,
        max_steps=4 * (max_replans + 1) * (max_plan_steps + 1),
        store=executor.store,
        signing_key=executor.signing_key,
    )


async def plan_and_execute(
    planner: Policy,
    executor: Agent,
    task: str,
    *,
    max_replans: int = 2,
    max_plan_steps: int = MAX_PLAN_STEPS,
    run_id: str | None = None,
    deps: Any = None,
) -> PlanResult:
    """Plan ``task``, run each step with ``executor``, re-plan when a step does not finish.

    ``deps`` reach the executor's tools (each step is a child run, which gets its parent's deps)."""
    agent = plan_execute_agent(planner, executor, max_replans=max_replans, max_plan_steps=max_plan_steps)
    result = await agent.run(task, run_id=run_id, deps=deps)
    return PlanResult(result.status, result.output, _plans(result.context), result)


def _plans(context: Context) -> list[list[str]]:
    return [parse_plan(m.text) for m in context if m.role == "assistant" and m.text.startswith(PLAN_HEADING)]


def _results_since_last_plan(context: Context) -> list[Message]:
    results: list[Message] = []
    for m in reversed(context.messages):
        if m.role == "assistant" and m.text.startswith(PLAN_HEADING):
            break
        if m.role == "tool":
            results.append(m)
    return results[::-1]


def _history(context: Context) -> str:
    lines, asked = [], {c.id: c for m in context if m.role == "assistant" for c in m.tool_calls}
    for m in context:
        if m.role == "tool" and (call := asked.get(m.tool_call_id or "")) is not None:
            step = _step_text(call)
            verb = "did not finish" if m.is_error else "done"
            lines.append(f"- step {step!r} {verb}: {m.content}")
    return "\n".join(lines)


def _step(steps: list[str], i: int, n: int) -> Message:
    total = len(steps)
    call = ToolCall.of(STEP_TOOL, {"task": f"Step {i + 1} of {total}: {steps[i]}"}, id=f"step_{n}_{i + 1}")
    return Message.assistant("", [call])


def _step_text(call: ToolCall) -> str:
    import json

    try:
        return str(json.loads(call.arguments).get("task", ""))
    except ValueError:
        return call.arguments
