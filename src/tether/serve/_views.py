"""What a person or a client is shown of a run: a pure view of its committed events.

:func:`view_of` folds a run's events (with :class:`~tether.journal.Journal`,
the one fold) into a :class:`RunView`: status, task, answer or error, usage,
and its open **items**, each an :class:`ItemView` with the full arguments, the
hash a decision must name, the tool's schema, and the decision recorded for it
(who, when, what). The API renders views as JSON (:func:`run_json`), the
pages as HTML; both show the same thing.

>>> from tether.events import RunStarted, ModelReplied, Finished
>>> from tether.messages import Message
>>> v = view_of([RunStarted("r1", (Message.user("hi"),), agent="greeter"), ModelReplied(Message.assistant("hello")),
...              Finished("hello")], {})
>>> v.status, v.agent, v.task, v.output, v.items
('finished', 'greeter', 'hi', 'hello', ())
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..agent import Agent
from ..events import ApprovalDecided, ApprovalRequested, Event, Failed, Finished, Paused, QuestionAsked, RunStarted
from ..journal import Journal
from ..pending import CallStatus, Decision, PendingCall, item_path, verdicts_for
from ..state import MAX_DEPTH, RunState, strict_json
from ..store import RunInfo, RunStore, load_tree
from ..tools import Tool

__all__ = ["ItemKind", "ItemView", "RunView", "Views", "item_json", "run_json", "summary_json", "view_of"]

ItemKind = Literal["approval", "question", "outcome-unknown"]
KINDS: dict[CallStatus, ItemKind] = {
    "awaiting-approval": "approval",
    "awaiting-answer": "question",
    "started": "outcome-unknown",
}
WAITING = frozenset(("paused", "needs-decision"))


@dataclass(frozen=True, slots=True)
class ItemView:
    """One open item of a paused run: what a person decides on."""

    run_id: str
    call_id: str
    kind: ItemKind
    tool: str
    arguments_text: str
    args_hash: str
    note: str
    question: str | None
    since: float
    parameters: dict[str, Any] | None
    answer_schema: dict[str, Any] | None
    decision: Decision | None
    decided_at: float | None
    label: str = ""  # where an item of a child run waits: "support › billing › issue_refund"
    tool_ref: Tool | None = field(default=None, repr=False, compare=False)  # the tool, when it is served here

    @property
    def arguments(self) -> Any:
        """The arguments as JSON values (the text itself when it is not JSON, or not JSON every reader
        takes: NaN, duplicate keys, nesting deeper than states may)."""
        try:
            return strict_json(self.arguments_text or "{}", MAX_DEPTH)
        except ValueError:
            return self.arguments_text

    @property
    def verdicts(self) -> tuple[str, ...]:
        status: CallStatus = next(s for s, k in KINDS.items() if k == self.kind)
        return verdicts_for(status)


@dataclass(frozen=True, slots=True)
class RunView:
    """A run as the API and the inbox show it."""

    run_id: str
    agent: str
    status: str
    seq: int
    created_at: float
    updated_at: float
    task: str
    meta: dict[str, str]
    usage: dict[str, int]
    output: str | None
    error: str | None
    closed: bool
    items: tuple[ItemView, ...]
    events: tuple[Event, ...]
    tree: bool = False  # some of its items wait in child runs (their journals are read each time)

    @property
    def waiting(self) -> tuple[ItemView, ...]:
        """The items nobody has decided yet."""
        return tuple(i for i in self.items if i.decision is None)

    def item(self, call_id: str) -> ItemView | None:
        return next((i for i in self.items if i.call_id == call_id), None)

    def decided(self, call_id: str) -> Decision | None:
        """The last decision recorded for a call, even once it is spent."""
        found = [e.decision for e in self.events if isinstance(e, ApprovalDecided) and e.decision.call_id == call_id]
        return found[-1] if found else None

    def ever_called(self, call_id: str) -> bool:
        """Whether the run ever had a call with this id (decided, finished or open); a path names its first call."""
        head = item_path(call_id)[0]
        return any(head in (c.id for c in m.tool_calls) for m in _messages(self.events))


def view_of(events: Sequence[Event], agents: Mapping[str, Agent], tree: RunState | None = None) -> RunView:
    """The view of a run whose committed events are ``events`` (``agents`` give the tools' schemas).

    ``tree`` is the run's state with its child runs as their own journals say
    (:func:`tether.store.load_tree`): the items of a run tree wait in its children.
    """
    journal = Journal.of(events)
    first = next((e for e in events if isinstance(e, RunStarted)), None)
    last = events[-1] if events else None
    state = tree or journal.snapshot()
    name = first.agent if first else ""
    items = () if state.status not in WAITING else _items(state, events, agents, name)
    return RunView(
        run_id=journal.run_id,
        agent=first.agent if first else "",
        status=state.status,
        seq=len(events),
        created_at=first.at if first else 0.0,
        updated_at=last.at if last else 0.0,
        task=_task(first),
        meta=dict(first.meta) if first else {},
        usage=journal.usage.to_dict(),
        output=last.output if isinstance(last, Finished) else None,
        error=last.error if isinstance(last, Failed) else None,
        closed=journal.closed,
        items=items,
        events=tuple(events),
        tree=bool(state.children),
    )


class Views:
    """The latest view of each run, computed again only when the run's length changes."""

    def __init__(self, store: RunStore, agents: Mapping[str, Agent], size: int = 2000) -> None:
        self.store, self.agents, self.size = store, agents, size
        self._cache: OrderedDict[str, RunView] = OrderedDict()

    async def get(self, run_id: str, info: RunInfo | None = None) -> RunView | None:
        """The run's view now, or None if the store has no such run (``info``: what a listing just said)."""
        info = info or await self.store.get(run_id)
        if info is None:
            self._cache.pop(run_id, None)
            return None
        cached = self._cache.get(run_id)
        if cached is not None and cached.seq == info.seq and not cached.tree:
            self._cache.move_to_end(run_id)
            return cached
        events = list(cached.events) if cached is not None and cached.seq == info.seq else await self.store.load(run_id)
        tree = await load_tree(self.store, run_id) if info.status in WAITING and "/" not in run_id else None
        view = view_of(events, self.agents, tree)
        self._cache[run_id] = view
        if len(self._cache) > self.size:
            self._cache.popitem(last=False)
        return view


def _task(first: RunStarted | None) -> str:
    users = [m.text for m in (first.messages if first else ()) if m.role == "user"]
    return str(users[-1]) if users else ""


def _messages(events: Sequence[Event]) -> list[Any]:
    from ..events import ModelReplied

    return [e.message for e in events if isinstance(e, ModelReplied)]


def _items(state: RunState, events: Sequence[Event], agents: Mapping[str, Agent], name: str) -> tuple[ItemView, ...]:
    times = _times(events)
    out = []
    for p in state.items():
        kind = KINDS.get(p.status)
        if kind is None:
            continue
        tool = find_tool(agents, name, p)
        out.append(
            ItemView(
                run_id=state.run_id,
                call_id=p.id,
                kind=kind,
                tool=p.call.name,
                arguments_text=p.call.arguments,
                args_hash=p.args_hash,
                note=p.note,
                question=times.questions.get(p.call.id) if not p.path else _question(p),
                since=times.asked.get(p.call.id, times.paused) if not p.path else times.paused,
                parameters=tool.parameters if tool is not None else None,
                answer_schema=tool.answer if tool is not None else None,
                decision=state.decision(p.id),
                decided_at=times.decided.get(p.call.id) if not p.path else None,
                label=p.label if p.path else "",
                tool_ref=tool,
            )
        )
    return tuple(out)


def find_tool(agents: Mapping[str, Agent], name: str, item: PendingCall) -> Tool | None:
    """The tool an open item calls: the root agent's, or that of the agent used as a tool down its path."""
    agent = agents.get(name)
    for inner in item.where[1:]:
        if agent is None:
            return None
        agent = next(
            (t.agent for t in agent.tool_list if getattr(t, "agent", None) is not None and t.agent.name == inner), None
        )
    return agent.tools.get(item.call.name) if agent is not None else None


def _question(p: PendingCall) -> str | None:
    if p.status != "awaiting-answer":
        return None
    try:
        args = strict_json(p.call.arguments, MAX_DEPTH)
    except ValueError:
        return p.call.arguments
    return str(args.get("question", p.call.arguments)) if isinstance(args, dict) else p.call.arguments


@dataclass
class _Times:
    asked: dict[str, float]
    decided: dict[str, float]
    questions: dict[str, str]
    paused: float


def _times(events: Sequence[Event]) -> _Times:
    t = _Times({}, {}, {}, 0.0)
    for ev in events:
        if isinstance(ev, ApprovalRequested | QuestionAsked):
            t.asked[ev.call.id] = ev.at
            if isinstance(ev, QuestionAsked):
                t.questions[ev.call.id] = ev.question
        elif isinstance(ev, ApprovalDecided):
            t.decided[ev.decision.call_id] = ev.at
        elif isinstance(ev, Paused):
            t.paused = ev.at
    return t


# -- JSON ------------------------------------------------------------------------------


def decision_json(d: Decision, at: float | None) -> dict[str, Any]:
    return {
        "verdict": d.verdict,
        "by": d.by,
        "at": at or None,
        "args_hash": d.args_hash,
        "args": d.args,
        "message": d.message,
        "answer": d.answer,
    }


def item_json(i: ItemView) -> dict[str, Any]:
    return {
        "run_id": i.run_id,
        "call_id": i.call_id,
        "kind": i.kind,
        "tool": i.tool,
        "label": i.label,
        "arguments": i.arguments,
        "arguments_text": i.arguments_text,
        "args_hash": i.args_hash,
        "note": i.note,
        "question": i.question,
        "since": i.since or None,
        "verdicts": list(i.verdicts),
        "parameters": i.parameters,
        "answer_schema": i.answer_schema,
        "decision": decision_json(i.decision, i.decided_at) if i.decision else None,
    }


def summary_json(v: RunView) -> dict[str, Any]:
    return {
        "run_id": v.run_id,
        "agent": v.agent,
        "status": v.status,
        "seq": v.seq,
        "created_at": v.created_at or None,
        "updated_at": v.updated_at or None,
        "task": v.task,
        "waiting": len(v.waiting),
    }


def run_json(v: RunView) -> dict[str, Any]:
    from ..trace import render

    return {
        **summary_json(v),
        "meta": v.meta,
        "usage": v.usage,
        "output": v.output,
        "error": v.error,
        "closed": v.closed,
        "trace": render(v.events, name=v.agent or "agent"),
        "items": [item_json(i) for i in v.items],
    }
