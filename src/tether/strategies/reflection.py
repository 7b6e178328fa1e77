"""Reflection (Self-Refine): a critic reads the answer; if it objects, the agent goes round again.

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
from collections.abc import Awaitable, Callable

from ..agent import Agent, RunResult
from ..context import Context

Critic = Callable[[str, Context], str | Awaitable[str | None] | None]


async def reflect(agent: Agent, task: str, critic: Critic, *, rounds: int = 2) -> RunResult:
    """Run ``task``; while the critic returns feedback (and rounds remain), continue with it.

    The critic gets the answer and the notebook and returns ``None`` (accept)
    or feedback text, which is added as a new note and the same conversation
    continues. A run that does not finish (paused, failed, limit) is returned as it is.
    """
    result = await agent.run(task)
    for _ in range(rounds):
        if result.status != "finished":
            break
        feedback = critic(result.output or "", result.context)
        if inspect.isawaitable(feedback):
            feedback = await feedback
        if not feedback:
            break
        note = f"A reviewer read your answer and says: {feedback}\nRevise your answer."
        result = await agent.run(note, context=result.context)
    return result
