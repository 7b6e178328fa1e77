"""Runs inside runs: the tool an agent becomes, where its child run starts from, how its ending settles the call.

An agent used as a tool (:func:`agent_tool`, behind ``Agent.as_tool``) runs as
a child run ``<run id>/<call id>`` in its parent's store. When the parent
resumes, the child resumes from its own journal (or from the decided state the
caller passed in); a child that finished before its parent wrote the call's
result is not run again. :func:`settle` turns the
child's ending into the parent's call result, or leaves the call waiting.

>>> from tether.messages import ToolCall
>>> from tether.state import RunState
>>> done = RunState("r/c1", (Message.assistant("42"),), status="finished")
>>> settle(ToolCall("c1", "ask_expert", "{}"), "expert", done).result.content
'42'
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..context import Context
from ..events import ChildStopped, Event, ToolFinished
from ..journal import Journal, state_of
from ..messages import Message, ToolCall
from ..output import OutputSpec
from ..pending import child_run_id
from ..state import RunState
from ..store import RunStore
from ..tools import Tool, tool
from .settings import Input, Settings

__all__ = ["agent_tool", "child_answer", "child_input", "child_output", "finished_child", "previous_notebook", "settle"]


def agent_tool(agent: Any, name: str | None, description: str | None, *, continues: bool, **contract: Any) -> Tool:
    """``agent`` as a tool that takes a ``task``: the loop runs it as a child run (see ``Agent.as_tool``)."""

    async def delegate(task: str) -> Any:  # a typed output is written as JSON, like any tool's value
        result = await agent.run(task)  # used only when called outside a run
        if result.status != "finished":
            raise RuntimeError(f"sub-agent {agent.name!r} stopped with status {result.status!r}")
        return "" if result.output is None else result.output

    delegate.__doc__ = (
        f"{description or f'Ask the {agent.name} agent to do a task.'}\n\n"
        "Args:\n    task: what the agent should do, in plain words."
    )
    # Re-running it after a crash resumes the same child run (its own journal settles its effects).
    contract.setdefault("effect", "idempotent")
    made = tool(name=name or agent.name, **contract)(delegate)
    return dataclasses.replace(made, agent=agent, continues=continues)


async def finished_child(store: RunStore | None, child_id: str) -> RunState | None:
    """The stored state of a child run that finished before its parent wrote the call's result."""
    if store is None or (info := await store.get(child_id)) is None or info.status != "finished":
        return None
    return state_of(await store.load(child_id))


async def child_input(j: Journal, store: RunStore | None, child_id: str, task: str, call_id: str) -> Input:
    """What the child run starts from: a decided state, its own journal (None), or the task."""
    saved = j.children.get(call_id)
    if saved is not None and saved.decisions:
        return saved  # decided in the state the caller passed in
    if store is not None and await store.get(child_id) is not None:
        return None  # resume the child from its own journal
    return saved if saved is not None else task


async def previous_notebook(
    j: Journal, store: RunStore | None, kept: dict[str, Context], tool: str, call_id: str
) -> Context | None:
    """For a tool whose calls continue one notebook: where the last finished call's child left it."""
    for msg in reversed(j.context.messages):
        if msg.role != "tool" or msg.name != tool or msg.is_error or msg.tool_call_id == call_id:
            continue
        child_id = child_run_id(j.run_id, msg.tool_call_id or "")
        if child_id in kept:
            return kept[child_id]
        if store is not None and (events := await store.load(child_id)):
            return Journal.of(events).context
        return None
    return None


def settle(call: ToolCall, name: str, state: RunState, output: OutputSpec | None = None) -> Event:
    """How a child's ending becomes its parent's call result (or leaves the call waiting);
    with the child's ``output`` type, a finished child answers with the value's JSON."""
    if state.status in ("paused", "needs-decision", "cancelled"):
        return ChildStopped(call.id, state)  # it waits for a person, or it was interrupted: it resumes
    usage = state.total_usage
    last = state.messages[-1] if state.messages else None
    if state.status == "finished":
        answer = child_answer(state, output)
        return ToolFinished(dataclasses.replace(Message.tool_result(call.id, answer, name=call.name), usage=usage))
    said = f": {last.text}" if last is not None and last.role == "assistant" and last.content else ""
    text = f"sub-agent {name!r} ended {state.status} before it finished{said}"
    note = Message.tool_result(call.id, text, name=call.name, is_error=True)
    return ToolFinished(dataclasses.replace(note, usage=usage), "stopped")


def child_output(child: Settings, state: RunState) -> OutputSpec | None:
    """The output type of the agent that drove a child run to its end (after a handoff, that one)."""
    return ((child.reachable(state.agent) if state.agent else None) or child).output


def child_answer(state: RunState, output: OutputSpec | None = None) -> str:
    """A finished child's answer: its last assistant note, or the result of its terminal tool
    (with an output type, its output tool's result: the value's JSON)."""
    if output is not None and (answer := output.answer_in(state.messages)) is not None:
        return answer
    last = state.messages[-1] if state.messages else None
    return last.text if last is not None else ""
