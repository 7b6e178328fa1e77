"""Reflection (Self-Refine, and CRITIC): a critic reads the answer; if it objects, the writer revises.

The strategy is a run of its own (:func:`reflection_agent` builds the agent that
drives it). Its brain calls the writer agent as a child run, shows the answer to
the critic, and while the critic objects (and rounds remain) calls the writer
again with the feedback, continuing the writer's notebook. The critic is either
a function ``critic(answer, context) -> feedback or None`` (``context`` is the
strategy run's notebook) or, for CRITIC, an :class:`~tether.agent.Agent` that
verifies with its own tools in a child run and replies ``OK`` to accept.

Every answer, verdict and revision is in the run's journal: a pause inside the
writer or the critic pauses the strategy, and a crash resumes it.

>>> import asyncio
>>> from tether import Agent
>>> from tether.testing import ScriptedModel
>>> def critic(answer, context):
...     return None if "$" in answer else "say the amount in dollars"
>>> writer = Agent(ScriptedModel(["It was refunded.", "$79 was refunded."]))
>>> asyncio.run(reflect(writer, "How much was refunded?", critic)).output
'$79 was refunded.'
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..agent import Agent, RunResult
from ..context import Context
from ..messages import Message, ToolCall
from ..tools import Tool

Critic = Callable[[str, Context], str | Awaitable[str | None] | None]
WRITE, CRITIQUE = "write", "critique"
VERDICT = "critic says:"


class Reflect:
    """The strategy run's brain: write, critique, revise while the critic objects."""

    def __init__(self, critic: Critic | None, *, rounds: int = 2) -> None:
        self.critic = critic  # None: the critic is an agent behind the ``critique`` tool
        self.rounds = rounds

    async def decide(self, context: Context, tools: Sequence[Tool]) -> Message:
        task = next((m.text for m in context if m.role == "user"), "")
        answers = [m for m in context if m.role == "tool" and m.name == WRITE]
        if not answers:
            return _call(WRITE, task, len(context))
        answer = answers[-1]
        if answer.is_error:
            return Message.assistant(answer.text)
        last = context.last()
        if self.critic is None and not (last is not None and last.name == CRITIQUE):
            return _call(CRITIQUE, f"Check this answer to {task!r}:\n{answer.text}", len(context))
        feedback = await self._feedback(answer.text, context)
        if not feedback or len(answers) > self.rounds:
            return Message.assistant(answer.text)
        revise = f"A reviewer read your answer and says: {feedback}\nRevise your answer."
        reply = _call(WRITE, revise, len(context))
        return Message.assistant(f"{VERDICT} {feedback}", reply.tool_calls)

    async def _feedback(self, answer: str, context: Context) -> str | None:
        if self.critic is None:  # CRITIC: the critic agent's reply, "OK" to accept
            last = context.last()
            said = last.text.strip() if last is not None else ""
            return None if said.upper().startswith("OK") else said
        feedback = self.critic(answer, context)
        if inspect.isawaitable(feedback):
            feedback = await feedback
        return feedback or None


def reflection_agent(writer: Agent, critic: Critic | Agent, *, rounds: int = 2, name: str = "reflection") -> Agent:
    """The agent whose runs are Reflection runs; an Agent critic makes it CRITIC (verify with tools)."""
    tools = [writer.as_tool(WRITE, "Write (or revise) the answer.", continues=True)]
    if isinstance(critic, Agent):
        tools.append(critic.as_tool(CRITIQUE, "Check an answer; reply OK if it is right, else what is wrong."))
    brain = Reflect(None if isinstance(critic, Agent) else critic, rounds=rounds)
    return Agent(brain, tools, name=name, max_steps=4 * rounds + 4, store=writer.store, signing_key=writer.signing_key)


async def reflect(
    agent: Agent,
    task: str,
    critic: Critic | Agent,
    *,
    rounds: int = 2,
    run_id: str | None = None,
    deps: Any = None,
) -> RunResult:
    """Run ``task``; while the critic returns feedback (and rounds remain), revise with it.

    The critic gets the answer and returns ``None`` (accept) or feedback; an
    :class:`~tether.agent.Agent` critic checks the answer with its own tools and
    replies ``OK`` to accept. A run that does not finish (paused, failed, limit)
    is returned as it is and resumes like any run. ``deps`` reach the writer's
    and the critic's tools (they run as child runs).
    """
    return await reflection_agent(agent, critic, rounds=rounds).run(task, run_id=run_id, deps=deps)


def _call(tool: str, task: str, n: int) -> Message:
    return Message.assistant("", [ToolCall(f"{tool}_{n}", tool, json.dumps({"task": task}, ensure_ascii=False))])
