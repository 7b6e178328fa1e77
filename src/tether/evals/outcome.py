"""What a trial did, as graders see it: built from the run's committed events.

An :class:`Outcome` is derived from the events a store holds for the run, the
same whether the run just happened or is read back after an interruption:
the final status and answer, every tool call with its reply number, result and
error kind, the number of model replies, and the tokens spent.

>>> from tether.events import RunStarted, ModelReplied, Finished
>>> from tether import Message
>>> events = [RunStarted("r1", (Message.user("hi"),)), ModelReplied(Message.assistant("hello")), Finished("hello")]
>>> outcome_of(events).output
'hello'
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..context import Context
from ..events import Event, Failed, Finished, LimitReached, ModelReplied, Paused, RunStarted, ToolFinished
from ..journal import replay
from ..messages import Usage
from ..pending import child_run_id

if TYPE_CHECKING:
    from ..store import RunStore


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call the agent made: ``reply`` is the number of the model reply that asked for it (from 0)."""

    name: str
    arguments: Any
    reply: int
    id: str = ""
    result: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    """A finished trial, for graders: status, answer, calls, counters, and where it worked.

    ``case_id`` and ``data`` come from the case graded (its free-form ``data``).
    """

    run_id: str
    status: str
    output: str | None
    calls: tuple[Call, ...] = ()
    replies: int = 0
    usage: Usage = Usage()
    error: str | None = None
    context: Context = field(default_factory=Context, repr=False)
    workdir: Path | None = None
    case_id: str = ""
    data: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def task(self) -> str:
        """The user's message that started the run."""
        return next((m.text for m in self.context if m.role == "user"), "")


def outcome_of(
    events: Sequence[Event], *, workdir: Path | None = None, case_id: str = "", data: Mapping[str, Any] | None = None
) -> Outcome:
    """The :class:`Outcome` a run's committed events describe."""
    calls: list[Call] = []
    results: dict[str, ToolFinished] = {}
    usage, replies, run_id, status, output, error = Usage(), 0, "", "running", None, None
    for ev in events:
        if isinstance(ev, RunStarted):
            run_id, status = ev.run_id, "running"
        elif isinstance(ev, ModelReplied):
            usage = usage + (ev.message.usage or Usage())
            calls += [Call(c.name, _parsed(c.arguments), replies, c.id) for c in ev.message.tool_calls]
            replies += 1
        elif isinstance(ev, ToolFinished):
            results[ev.call_id] = ev
            usage = usage + (ev.result.usage or Usage())  # a child run's usage comes back with its answer
        elif isinstance(ev, Paused):
            status = "needs-decision" if ev.reason == "outcome-unknown" else "paused"
        elif isinstance(ev, Finished | Failed | LimitReached) or ev.kind == "cancelled":
            status = ev.kind
            output = ev.output if isinstance(ev, Finished) else None
            error = (
                ev.error if isinstance(ev, Failed) else (f"limit {ev.limit}" if isinstance(ev, LimitReached) else None)
            )
    done = tuple(_with_result(c, results.get(c.id)) for c in calls)
    return Outcome(
        run_id, status, output, done, replies, usage, error, replay(events), workdir, case_id, dict(data or {})
    )


def _with_result(call: Call, finished: ToolFinished | None) -> Call:
    if finished is None:
        return call
    return Call(call.name, call.arguments, call.reply, call.id, finished.result.text, finished.error)


def _parsed(arguments: str) -> Any:
    try:
        return json.loads(arguments or "{}")
    except ValueError:
        return arguments


async def with_child_calls(outcome: Outcome, store: RunStore) -> Outcome:
    """``outcome`` with each delegating call replaced by the calls its child run made.

    A pattern (plan-and-execute, reflection, an agent used as a tool) makes its
    real tool calls in child runs, journaled as ``<run id>/<call id>``; graders
    of tool calls see those. Reply numbers stay distinct per child run (the
    parent's reply times 1,000 plus the child's), so "in one reply" still means
    one model reply.
    """
    calls = await _calls_of_tree(store, outcome.run_id, outcome.calls)
    return dataclasses.replace(outcome, calls=calls) if calls != outcome.calls else outcome


async def _calls_of_tree(store: RunStore, run_id: str, calls: Sequence[Call]) -> tuple[Call, ...]:
    out: list[Call] = []
    for call in calls:
        child_id = child_run_id(run_id, call.id)
        events = await store.load(child_id) if call.id and await store.get(child_id) is not None else []
        if not events:
            out.append(call)
            continue
        child = outcome_of(events).calls
        nested = await _calls_of_tree(store, child_id, child)
        out += [dataclasses.replace(c, reply=call.reply * 1000 + c.reply) for c in nested]
    return tuple(out)
