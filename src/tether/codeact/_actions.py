"""An agent that acts in code: the model writes one Python program per turn.

:func:`code_agent` builds two agents. The outer one holds the model, wrapped
in :class:`CodePolicy`, and one tool, ``python``: a reply with a fenced Python
block becomes a call of it. The ``python`` tool is the inner agent as a child
run whose brain is the program (:class:`~tether.codeact._program.ProgramPolicy`)
and whose tools are the ones you gave. So every call the program makes is the
child run's call: validated, gated, journaled, run under its effect, paused
and resumed by the loop that already does all of that.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from ..agent import Agent
from ..context import Context
from ..exceptions import ProviderError, UserError
from ..messages import Message, ToolCall
from ..output import OUTPUT_TOOL, OutputTool
from ..policy import Policy, ask
from ..toolkits import Sandbox, SandboxLimits
from ..tools import Tool
from . import _api
from ._program import DIVERGED, FINAL, ProgramPolicy

__all__ = ["CODE_TOOL", "CodePolicy", "ReplayDiverged", "code_agent", "instructions_for"]

CODE_TOOL = "python"
_BLOCK = re.compile(r"```(?:python|py)[ \t]*\n(.*?)```", re.DOTALL)

_HOW = """\
You act by writing Python. Reply with exactly one fenced ```python block: a complete program.
It runs in a sandbox (no network; the workspace is the current directory), and the functions
below call the tools for you; use their return values directly, in variables. print() what
you want to read: what the program prints, and the repr of its last expression, is all you
see of it. A failing tool call raises ToolError (catch it to go on). When you have the answer,
call final_answer(value) in the program, or reply with plain text and no code block."""

_SERVERS = """\
MCP servers are modules under `servers`: print(servers.list()) names them, and
print(servers.describe("name")) shows one module's functions; call them as
servers.name.function(...)."""


class ReplayDiverged(ProviderError):
    """A code action's program, run again from the top, made another call than its journal holds."""


class CodePolicy:
    """A model that answers with a program, as a policy that calls the ``python`` tool.

    It asks ``model`` only when there is something to decide: after a program
    called ``final_answer(value)`` it ends the run with that value (through
    ``final_result`` when the agent has an output type, which validates it); a
    program whose replay diverged fails the run (:class:`ReplayDiverged`).
    """

    def __init__(self, model: Policy) -> None:
        self.inner = model
        self.model = getattr(model, "model", None)  # what replies are priced by

    async def decide(self, context: Context, tools: Sequence[Tool]) -> Message:
        if (settled := _after_action(context, tools)) is not None:
            return settled
        return _as_action(await self.inner.decide(context, tools), len(context))

    async def stream(self, context: Context, tools: Sequence[Tool]) -> AsyncIterator[str | Message]:
        """The model's text as it comes (when it streams), then the reply as :meth:`decide` gives it."""
        if (settled := _after_action(context, tools)) is not None:
            yield settled
            return
        async for piece in ask(self.inner, context, tools):
            yield _as_action(piece, len(context)) if isinstance(piece, Message) else piece


def _after_action(context: Context, tools: Sequence[Tool]) -> Message | None:
    """What follows a code action without asking the model: its ``final_answer``, or a failed replay."""
    last = context.last()
    if last is None or last.role != "tool" or last.name != CODE_TOOL or last.is_error:
        return None
    head = last.text.split("\n", 1)[0]
    if head.startswith(DIVERGED):
        raise ReplayDiverged(f"code action {last.tool_call_id}: {head}")
    if head.startswith(FINAL):
        return _answer(json.loads(head[len(FINAL) :]), tools, last.tool_call_id or "")
    return None


def _as_action(reply: Message, n: int) -> Message:
    """A reply with a fenced Python block as a call of the ``python`` tool."""
    if reply.tool_calls or (found := _BLOCK.search(reply.text)) is None:
        return reply  # a plain answer, or a call made the JSON way
    call = ToolCall.of(CODE_TOOL, {"task": found.group(1)}, id=f"act_{n}")
    return dataclasses.replace(reply, tool_calls=(call,))


def _answer(value: Any, tools: Sequence[Tool], after: str) -> Message:
    """The run's end with a program's ``final_answer(value)``: the output tool's call, or the text."""
    output = next((t for t in tools if isinstance(t, OutputTool)), None)
    if output is None:
        return Message.assistant(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
    args = {"value": value} if output.spec.wrapped or not isinstance(value, dict) else value
    return Message.assistant("", [ToolCall.of(OUTPUT_TOOL, args, id=f"final_{after}")])


def instructions_for(tools: Sequence[Tool], servers: Mapping[str, Sequence[Tool]]) -> str:
    """What the model is told about acting in code: how, and the functions (never the servers' catalogue)."""
    parts = [_HOW]
    if tools:
        parts.append("The functions:\n\n" + _api.listing([_api.spec_of(t) for t in tools]))
    if servers:
        parts.append(_SERVERS)
    return "\n\n".join(parts)


def code_agent(
    model: Policy,
    tools: Sequence[Tool] = (),
    *,
    sandbox: Sandbox,
    servers: Mapping[str, Sequence[Tool]] | None = None,
    instructions: str | None = None,
    limits: SandboxLimits | None = None,
    max_calls: int = 50,
    **agent: Any,
) -> Agent:
    """An :class:`~tether.Agent` whose model acts by writing Python that calls ``tools``.

    ``servers`` maps a module name to an MCP server's tools (``client.tools_sync()``
    of one server): the program finds them as ``servers.<name>.<tool>(...)``, and
    the model is told only how to list and describe them. ``limits`` bound each
    program (wall time covers the whole program, calls included); ``max_calls``
    bounds the calls one program may make; each is a step of the run too, so
    ``max_steps`` defaults to ``20 + max_calls``. The rest (``store``, ``signing_key``,
    ``approver``, ``output_type``, ``max_steps``...) configure the returned agent;
    its ``approver`` gates every call made from code too (a child run's calls
    pass every approver up the tree). Raises
    :class:`~tether.exceptions.SandboxUnavailable` now when no sandbox can run.
    """
    sandbox.check()  # no sandbox: SandboxUnavailable now, not at the first action
    servers = dict(servers or {})
    # A child run's steps are bounded by what its parent has left: room for a program's calls.
    agent.setdefault("max_steps", 20 + max_calls)
    every = [*tools, *(t for group in servers.values() for t in group)]
    if clash := {t.name for t in every if t.name == OUTPUT_TOOL}:
        raise UserError(f"a tool named {clash.pop()!r} cannot be called from code")
    program = ProgramPolicy(sandbox, servers, limits)
    inner = Agent(program, every, name="code", max_steps=max_calls + 1, max_tool_calls=max_calls, observers=[program])
    python = inner.as_tool(CODE_TOOL, "Run a Python program whose functions call the tools.")
    schema = python.parameters
    task = {**schema["properties"]["task"], "description": "the complete Python program"}
    python = dataclasses.replace(python, parameters={**schema, "properties": {**schema["properties"], "task": task}})
    told = instructions_for(tools, servers)
    return Agent(
        CodePolicy(model), [python], instructions=f"{instructions}\n\n{told}" if instructions else told, **agent
    )
