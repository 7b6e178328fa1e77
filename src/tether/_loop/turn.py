"""What to do with each open call of a turn: run it, write a note, or wait for a human.

:func:`plan` is pure: no I/O, no clock, no store. Given one open call, the
agent's tools, the human decision recorded for it (if any) and the agent's gate,
it says exactly one of three things:

* :class:`Execute`: run the tool now with these validated arguments;
* :class:`Note`: do not run it; this result goes into the notebook (an unknown
  tool, arguments that are not JSON or fail validation, a denial, a skip);
* :class:`Wait`: a human must decide first (an approval, an answer to a
  question tool, or a ``once`` call whose outcome is unknown after a crash).

>>> from tether.tools import tool
>>> from tether.state import PendingCall
>>> from tether.messages import ToolCall
>>> @tool(effect="none")
... def add(a: int, b: int) -> int:
...     return a + b
>>> step = plan(PendingCall(ToolCall("c1", "add", '{"a": 1, "b": "2"}')), {"add": add}, None, lambda t, a: False)
>>> type(step).__name__, step.args
('Execute', {'a': 1, 'b': 2})
>>> plan(PendingCall(ToolCall("c2", "nope", "{}")), {"add": add}, None, lambda t, a: False).event.error
'unknown-tool'
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Never, NoReturn

from ..context import Context
from ..events import ErrorKind, ToolFinished
from ..exceptions import StateError
from ..messages import Message, ToolCall
from ..pending import VERBS, CallStatus
from ..state import Decision, PendingCall, strict_loads
from ..tools import ArgumentsInvalid, Tool

__all__ = ["Execute", "Gate", "Note", "Step", "Wait", "asked_by", "ended_by", "plan", "question_text", "turn_results"]

Gate = Callable[[Tool, dict[str, Any]], bool | str]  # True, or why as text: a human decides
"""Whether a call needs a human: the tool and the call's validated arguments -> True to ask.

The gate sees exactly the values the tool would receive (coerced, defaults
filled); a gate that raises makes the call wait for a human (fail closed)."""


@dataclass(frozen=True, slots=True)
class Execute:
    """Run ``tool`` with ``args`` now; ``call`` records the arguments it runs with."""

    call: ToolCall
    tool: Tool
    args: dict[str, Any]
    attempt: int = 1
    prefix: str = ""  # said before the result, e.g. that a human edited the arguments


@dataclass(frozen=True, slots=True)
class Note:
    """Do not run the call; ``event`` is the result the model reads (an error, or a person's answer)."""

    event: ToolFinished


@dataclass(frozen=True, slots=True)
class Wait:
    """A human must decide on ``call`` first; ``note`` says why when it is not the plain case."""

    call: ToolCall
    reason: Literal["approval", "outcome-unknown", "question"]
    note: str = ""


Step = Execute | Note | Wait


def plan(open: PendingCall, tools: Mapping[str, Tool], decision: Decision | None, gate: Gate) -> Step:
    """Decide what to do with one open call, without side effects."""
    call = open.call
    tool = tools.get(call.name)
    if tool is None:
        names = ", ".join(sorted(tools)) or "(none)"
        return note(call, f"unknown tool {call.name!r}; available tools: {names}", "unknown-tool")
    parsed = _parse_args(call, tool)
    if isinstance(parsed, Note):
        return parsed
    args, attempt = parsed, open.attempts + 1
    wait = _waits(open, tool, args, gate)
    if wait is None:
        return Execute(call, tool, args, attempt)
    return wait if decision is None else _decided(wait, tool, args, attempt, decision)


def _waits(open: PendingCall, tool: Tool, args: dict[str, Any], gate: Gate) -> Wait | None:
    """What the call waits for before it may run, or None: nothing, run it now."""
    call = open.call
    if tool.is_question:
        return Wait(call, "question")  # no function runs: a person's answer is the result
    if tool.agent is not None and open.status in ("started", "delegated"):
        return None  # resume the same child run: its journal settles its effects
    if open.status == "started":  # it started and never finished; ``call`` holds the arguments it started with
        # Safe to repeat (with the same idempotency key), unless the world may or may not have changed.
        return Wait(call, "outcome-unknown") if tool.effect == "once" else None
    # A call asked about once stays gated: the gates of the agent that resumes it cannot waive it.
    gated, why = (True, "") if open.status == "awaiting-approval" else _ask_gate(gate, tool, args)
    return Wait(call, "approval", why) if gated else None


# The status of an item waiting for each reason: a verdict decides the items whose status it fits.
_WAITS_AS: dict[str, CallStatus] = {
    "approval": "awaiting-approval",
    "question": "awaiting-answer",
    "outcome-unknown": "started",
}


def _decided(wait: Wait, tool: Tool, args: dict[str, Any], attempt: int, decision: Decision) -> Step:
    """What a person's decision makes of a call that waits for one (see :data:`~tether.pending.VERBS`)."""
    call = wait.call
    verb = VERBS.get(decision.verdict)
    if verb is not None and _WAITS_AS[wait.reason] not in verb.fits:
        return wait  # it does not decide what the call waits for (an approval of a call now asking a question)
    match decision.verdict:
        case "approve":
            edited = decision.args
            return Execute(call, tool, args, attempt) if edited is None else _edited(call, tool, edited, attempt)
        case "deny":
            return note(call, _said("a human denied this call", decision), "denied")
        case "retry":
            return Execute(call, tool, args, attempt)
        case "skip":
            text = "this call was interrupted and its outcome is unknown; a human chose not to run it again"
            return note(call, _said(text, decision), "skipped")
        case "answer":
            return _answered(call, tool, decision)
        case unknown:
            _unknown(call, unknown)


def _unknown(call: ToolCall, verdict: Never) -> NoReturn:
    """Every verdict has its case above (mypy checks it); a decision from elsewhere may still name none."""
    raise StateError(f"the decision for call {call.id!r} has an unknown verdict {verdict!r}: nothing was run")


def _answered(call: ToolCall, tool: Tool, decision: Decision) -> Note:
    """A question's answer, checked against its schema, is the call's result."""
    try:
        value = tool.check_answer(decision.answer)
    except ArgumentsInvalid as exc:
        raise StateError(f"the answer for call {call.id!r} is invalid: {exc}") from None
    return Note(ToolFinished(Message.tool_result(call.id, tool.answer_text(value), name=call.name)))


def asked_by(approvers: Sequence[Callable[..., Any]], tool: Tool, args: dict[str, Any], ctx: Context) -> bool | str:
    """The first approver's wish to ask a person about this call (its reason, or True), else False."""
    return next((s for a in approvers if (s := a(tool, args, ctx))), False)


def _ask_gate(gate: Gate, tool: Tool, args: dict[str, Any]) -> tuple[bool, str]:
    """The gate's answer on the validated arguments (with its reason, when it gave one as text);
    a gate that raises asks a human (fail closed)."""
    try:
        answer = gate(tool, dict(args))
        return bool(answer), answer if isinstance(answer, str) else ""
    except Exception as exc:
        return True, f"the approval gate of {tool.name!r} raised {type(exc).__name__}: {exc}; a human must decide"


def _edited(call: ToolCall, tool: Tool, edited: dict[str, Any], attempt: int) -> Execute:
    try:
        args = tool.validate(edited)
    except ArgumentsInvalid as exc:
        raise StateError(f"the edited arguments for call {call.id!r} are invalid: {exc}") from None
    text = json.dumps(edited, sort_keys=True, ensure_ascii=False)
    # The started call records the edited arguments, so a re-run after a crash uses them too.
    said = f"(a human edited the arguments to {text})\n"
    return Execute(ToolCall(call.id, call.name, text), tool, args, attempt, said)


def _said(text: str, decision: Decision) -> str:
    return f"{text}: {decision.message}" if decision.message else text


def _parse_args(call: ToolCall, tool: Tool) -> dict[str, Any] | Note:
    """The call's validated arguments (coerced, defaults filled), or a note telling the model what is wrong."""
    try:
        raw = strict_loads(call.arguments or "{}")
        if not isinstance(raw, dict):
            raise ValueError(f"expected a JSON object, got {type(raw).__name__}")
    except (ValueError, RecursionError) as exc:
        schema = json.dumps(tool.parameters, sort_keys=True)
        text = f"arguments for tool {call.name!r} are not a JSON object ({exc}); "
        return note(call, f"{text}send an object matching this schema: {schema}", "bad-json")
    try:
        return tool.validate(raw)
    except ArgumentsInvalid as exc:
        return note(call, str(exc), "invalid-arguments")


def note(call: ToolCall, text: str, kind: ErrorKind) -> Note:
    """A note for ``call``: an error result the model reads instead of the tool running."""
    return Note(ToolFinished(Message.tool_result(call.id, text, name=call.name, is_error=True), kind))


def turn_results(ctx: Context) -> list[tuple[ToolCall, Message | None]]:
    """The calls of the turn that just ended (the last reply's), each with its result so far."""
    results: dict[str | None, Message] = {}
    i = len(ctx) - 1
    while i >= 0 and ctx[i].role == "tool":
        results[ctx[i].tool_call_id] = ctx[i]
        i -= 1
    return [(call, results.get(call.id)) for call in (ctx[i].tool_calls if i >= 0 else ())]


def ended_by(ctx: Context, tools: Mapping[str, Tool], kind: Literal["terminal", "handoff"]) -> tuple[Tool, str] | None:
    """The first call of the turn that just ended that succeeded with a terminal (or handoff) tool,
    with its result: such a call ends the run (or hands it over)."""
    for call, res in turn_results(ctx):
        tool = tools.get(call.name)
        ends = tool is not None and (tool.terminal if kind == "terminal" else tool.handoff is not None)
        if ends and tool is not None and res is not None and not res.is_error:
            return tool, res.text
    return None


def question_text(call: ToolCall) -> str:
    """What a question tool's call asks a person (its ``question`` argument, or the raw arguments)."""
    try:
        args = json.loads(call.arguments)
    except ValueError:
        return call.arguments
    return str(args.get("question", call.arguments)) if isinstance(args, dict) else call.arguments
