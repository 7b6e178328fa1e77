"""Policies: the brain that decides the next move.

A :class:`Policy` reads the notebook (a :class:`~tether.context.Context`) and the
tools on offer and returns an assistant :class:`~tether.messages.Message`:
optional reasoning text and zero or more tool calls. A reply without tool calls
is the final answer. The loop never knows which kind of brain it talks to: a
scripted list, a plain function (:class:`FunctionPolicy`), an LLM provider, or a
small trained network all fit.

A policy may also offer ``stream(context, tools)``: an async iterator of text
pieces (``str``) ending with the complete Message. The loop turns the pieces
into ``token`` events.

While a run's policy decides, :func:`deciding_run` names that run: a policy
shared by many runs (one agent serving many users) keeps per-run state under it.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .context import Context
from .exceptions import UserError
from .messages import Message, ToolCall
from .tools import Tool

__all__ = [
    "Action",
    "FunctionPolicy",
    "Move",
    "Policy",
    "ask",
    "deciding_run",
    "to_message",
    "unique_call_ids",
]


@runtime_checkable
class Policy(Protocol):
    """Anything with ``async decide(context, tools) -> Message``."""

    async def decide(self, context: Context, tools: Sequence[Tool]) -> Message: ...


@dataclass(frozen=True, slots=True)
class Action:
    """A plain-Python way to say "call this tool with these arguments".

    >>> Action("look_up_order", {"order_id": "A1234"}, reasoning="pull up the order")
    Action(tool='look_up_order', args={'order_id': 'A1234'}, reasoning='pull up the order')
    """

    tool: str
    args: dict[str, Any] = field(default_factory=dict)
    reasoning: str = ""


Move = str | Message | Action | ToolCall | Sequence[Action | ToolCall]
"""What a plain-Python brain may return: a final answer, a whole Message, or actions."""


def to_message(decision: Move, call_prefix: str = "call") -> Message:
    """Turn what a brain returned into an assistant Message.

    Actions get ids ``{call_prefix}_{i}`` so that scripted runs are reproducible.

    >>> to_message("done").content
    'done'
    >>> to_message([Action("a"), Action("b")], "call_3").tool_calls[1].id
    'call_3_1'
    """
    if isinstance(decision, Message):
        if decision.role != "assistant":
            raise UserError(f"a policy must reply with an assistant message, not {decision.role!r}")
        return decision
    if isinstance(decision, str):
        return Message.assistant(decision)
    items = [decision] if isinstance(decision, Action | ToolCall) else list(decision)
    calls: list[ToolCall] = []
    thoughts: list[str] = []
    for i, item in enumerate(items):
        if isinstance(item, ToolCall):
            calls.append(item)
        elif isinstance(item, Action):
            calls.append(ToolCall.of(item.tool, item.args, id=f"{call_prefix}_{i}"))
            if item.reasoning:
                thoughts.append(item.reasoning)
        else:
            raise UserError(f"a policy returned {type(item).__name__}; expected an Action or ToolCall")
    return Message.assistant("\n".join(thoughts), calls)


class FunctionPolicy:
    """A brain written as a plain Python function (sync or async).

    ``fn(context, tools)`` returns a final answer (``str``), an :class:`Action`, a
    list of Actions (called in parallel), a ToolCall or a whole Message.

    >>> def brain(ctx, tools):
    ...     return "hello" if len(ctx) > 1 else Action("greet")
    >>> policy = FunctionPolicy(brain)
    """

    def __init__(self, fn: Callable[[Context, Sequence[Tool]], Move | Awaitable[Move]]) -> None:
        self.fn = fn

    async def decide(self, context: Context, tools: Sequence[Tool]) -> Message:
        out = self.fn(context, tools)
        if inspect.isawaitable(out):
            out = await out
        return to_message(out, f"call_{len(context)}")

    def __repr__(self) -> str:
        return f"FunctionPolicy({getattr(self.fn, '__name__', self.fn)!r})"


async def ask(
    policy: Policy, context: Context, tools: Sequence[Tool], run_id: str | None = None
) -> AsyncIterator[str | Message]:
    """Drive any policy as a stream: text pieces, then exactly one Message.

    With ``run_id`` (the loop gives its run's), :func:`deciding_run` names that
    run while the policy works; between pieces it names nothing new.
    """
    stream = getattr(policy, "stream", None)
    if stream is None:
        token = None if run_id is None else _RUN.set(run_id)  # set and reset inline: this is every step's path
        try:
            reply = await policy.decide(context, tools)
        finally:
            if token is not None:
                _RUN.reset(token)
        yield reply
        return
    final = None
    pieces = stream(context, tools)
    try:
        while True:
            token = None if run_id is None else _RUN.set(run_id)
            try:
                piece = await anext(pieces, None)
            finally:
                if token is not None:
                    _RUN.reset(token)
            if piece is None:
                break
            if isinstance(piece, Message):
                final = piece
            else:
                yield piece
    finally:
        if (close := getattr(pieces, "aclose", None)) is not None:
            await close()
    if final is None:
        raise UserError(f"{type(policy).__name__}.stream ended without a final Message")
    yield final


_RUN: ContextVar[str] = ContextVar("tether_deciding_run", default="")


def deciding_run() -> str:
    """The id of the run whose policy is deciding now (a child run's ``<run id>/<call id>``), or ""
    outside a run's decision."""
    return _RUN.get()


def unique_call_ids(message: Message, seen: set[str]) -> Message:
    """``message`` with a fresh id for any call whose id is empty or already used in the run.

    Some servers number calls per reply or repeat ids; one result per call and
    idempotency keys (``run_id:call_id``) need ids unique within the run.
    """
    ids = [c.id for c in message.tool_calls]
    if all(cid and cid not in seen for cid in ids) and len(set(ids)) == len(ids):
        return message
    calls, used = [], set(seen)
    for c in message.tool_calls:
        if not c.id or c.id in used:
            n = len(used)
            while f"call_{n}" in used:
                n += 1
            c = ToolCall(f"call_{n}", c.name, c.arguments)
        used.add(c.id)
        calls.append(c)
    return dataclasses.replace(message, tool_calls=tuple(calls))
