"""The journal: a run's committed events, folded into the state the loop runs on.

A run's events are its truth. :class:`Journal` folds them one at a time into
what the loop needs: the notebook, the calls still open, the decisions taken,
counters and usage. The live loop folds each event it commits, and loading a
run from a store folds the same events again, so both paths agree by
construction. :meth:`Journal.snapshot` gives the frozen, resumable
:class:`~tether.state.RunState`; :func:`status_of` is the one rule that says
which status an event leaves a run in (the stores use it too).

Tool results join the notebook in the order of the calls that asked for them
(whatever order the tools finished in) once the turn is settled. A run that
stops mid-turn (it pauses, or it crashed and resumes) writes the results that
are in at that point, in call order; the rest follow when they come.

>>> from tether.events import RunStarted, ModelReplied, Finished
>>> from tether.messages import Message
>>> j = Journal.of([RunStarted("r1", (Message.user("hi"),)), ModelReplied(Message.assistant("hello")),
...                 Finished("hello")])
>>> j.status, len(j.context), j.steps
('finished', 2, 1)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from .context import Context
from .events import (
    TERMINAL,
    ApprovalDecided,
    ApprovalRequested,
    Cancelled,
    ChildStopped,
    Compacted,
    Event,
    HandedOff,
    ModelReplied,
    Noted,
    Paused,
    PauseReason,
    QuestionAsked,
    RunStarted,
    ToolFinished,
    ToolStarted,
)
from .grounding import Outcome, RanCall
from .messages import Message, ToolCall, Usage
from .parts import part_bytes
from .state import Decision, PendingCall, RunState, Status

__all__ = ["Journal", "next_status", "pause_status", "replay", "state_of", "status_of"]

_ENDINGS: dict[str, Status] = {  # the kinds that set a status of their own (a pause: see pause_status)
    "run-started": "running",
    "finished": "finished",
    "failed": "failed",
    "cancelled": "cancelled",
    "limit-reached": "limit-reached",
}


def pause_status(reason: PauseReason) -> Status:
    """The status a pause leaves a run in: a lost outcome needs a decision, the rest is paused."""
    return "needs-decision" if reason == "outcome-unknown" else "paused"


def next_status(ev: Event) -> Status | None:
    """The status ``ev`` leaves a run in, or None when it keeps the status it had."""
    status = _ENDINGS.get(ev.kind)
    if status is None and isinstance(ev, Paused):
        return pause_status(ev.reason)
    return status


def status_of(current: str, events: Iterable[Event]) -> str:
    """The status of a run in status ``current`` once ``events`` are appended.

    >>> status_of("running", [Cancelled("stop")])
    'cancelled'
    """
    for ev in events:
        current = next_status(ev) or current
    return current


class Journal:
    """Folds committed events into the state the loop runs on.

    Mutable and private to one run; only :meth:`apply` changes it, and
    :meth:`snapshot` gives the frozen :class:`RunState`.
    """

    def __init__(self) -> None:
        self.run_id = ""
        self.fingerprint = ""
        self.agent = ""  # the name of the agent driving the run
        self.meta: dict[str, str] = {}  # the labels the run was started with
        self.seq = 0
        self.steps = 0
        self.tool_calls = 0
        self.usage = Usage()
        self.model = ""  # the model name of the brain driving the run from here ("" when it has none)
        self.usage_by_model: dict[str, Usage] = {}  # what each model spent; "" = model not recorded
        self.status: Status = "running"
        self.closed = False  # cancelled for good by a person
        self.paused_at = 0  # seq of the latest pause: decisions must be at least this new
        self.pending: dict[str, PendingCall] = {}  # insertion order = call order
        self.decisions: dict[str, Decision] = {}  # recorded in the journal
        self.call_ids: set[str] = set()  # every call id of the run: ids are unique within a run
        # Every call that started or ended, with how it ended (None: not yet): what validators see (ran_calls).
        self.ran: dict[str, tuple[ToolCall, ToolFinished | None]] = {}
        self.children: dict[str, RunState] = {}  # delegated call id -> the state its child run stopped in
        self.context = Context()  # the notebook, with every result written in call order
        self._results: dict[str, Message] = {}  # results of this turn not yet written
        self._order: list[str] = []  # call ids of this turn whose results are not written

    @classmethod
    def of(cls, events: Iterable[Event]) -> Journal:
        """The journal of a run's committed events."""
        journal = cls()
        for ev in events:
            journal.apply(ev)
        return journal

    @classmethod
    def from_state(cls, state: RunState) -> Journal:
        """A journal that continues from a snapshot; its decisions are recorded by the loop."""
        j = cls()
        j.run_id, j.fingerprint, j.seq = state.run_id, state.fingerprint, state.seq
        j.steps, j.tool_calls, j.usage, j.status = state.steps, state.tool_calls, state.usage, state.status
        j.usage_by_model = {"": state.usage} if state.usage != Usage() else {}  # a state keeps the total only
        j.paused_at = state.paused_at
        j.pending = {p.call.id: p for p in state.open_calls}
        j.call_ids = {c.id for m in state.messages for c in m.tool_calls}
        j.ran = ran_in(state)
        j.decisions = {d.call_id: d for d in state.decisions}
        j.context = Context(state.messages)
        j._order = list(j.pending)
        j.agent = state.agent
        j.children = {c.parent_call: c for c in state.children}
        return j

    def apply(self, ev: Event) -> None:
        """Fold one committed event (``token`` and ``child`` events are not part of the journal)."""
        if ev.kind == "token" or ev.kind == "child":
            return
        self.seq += 1
        self.status = next_status(ev) or self.status
        fold = _FOLDS.get(ev.kind)
        if fold is not None:
            fold(self, ev)
        if ev.kind in TERMINAL:  # a run that stops mid-turn writes the results that are in
            self._write_results()

    def _run_started(self, ev: RunStarted) -> None:
        self._write_results()  # a resumed run goes on from what was written before it stopped
        self.run_id = ev.run_id
        self.fingerprint = ev.fingerprint or self.fingerprint
        self.agent = ev.agent or self.agent
        self.model = ev.model
        if not ev.resumed:
            self.meta = dict(ev.meta)
        self.context = self.context.add(*ev.messages)

    def _model_replied(self, ev: ModelReplied) -> None:
        calls = ev.message.tool_calls
        self.context = self.context.add(ev.message)
        self._order = [c.id for c in calls]
        self.pending = {c.id: PendingCall(c) for c in calls}
        self.call_ids.update(self.pending)
        self.decisions = {}
        self.steps += 1
        if (usage := ev.message.usage) is not None:
            self.usage = self.usage + usage
            model = ev.message.model or self.model  # the model that answered, when the brain says
            self.usage_by_model[model] = self.usage_by_model.get(model, Usage()) + usage

    def _tool_started(self, ev: ToolStarted) -> None:
        p = self.pending.get(ev.call.id)
        if p is not None:  # the started call carries the arguments it really ran with
            note = still_inside(ev) if ev.by else p.note  # who may still be inside it, if it never reports back
            self.pending[ev.call.id] = PendingCall(ev.call, "started", ev.attempt, note, p.path, p.where)
        # A decision is spent once its call starts: a retry allows one attempt, and an
        # approval was for the arguments shown, which the started call now records.
        self.decisions.pop(ev.call.id, None)
        self.ran[ev.call.id] = (ev.call, None)
        if ev.attempt == 1:
            self.tool_calls += 1

    def _tool_finished(self, ev: ToolFinished) -> None:
        cid = ev.call_id
        if (started := self.ran.get(cid)) is not None:  # the arguments it ran with
            self.ran[cid] = (started[0], ev)
        elif (p := self.pending.get(cid)) is not None:  # it never started: a note, a denial, a skip
            self.ran[cid] = (p.call, ev)
        self.pending.pop(cid, None)
        self.decisions.pop(cid, None)
        self.children.pop(cid, None)
        if (usage := ev.result.usage) is not None:  # a child run's usage rolls up with its answer
            self.usage = self.usage + usage
            self.usage_by_model[""] = self.usage_by_model.get("", Usage()) + usage  # priced as this run's model
        self._results[cid] = ev.result
        if not self.pending:  # the turn is settled: its results join the notebook in call order
            self._write_results()

    def _approval_requested(self, ev: ApprovalRequested) -> None:
        p = self.pending.get(ev.call.id)
        if p is not None and p.status == "proposed":
            self.pending[ev.call.id] = replace(p, status="awaiting-approval", note=ev.note)

    def _question_asked(self, ev: QuestionAsked) -> None:
        p = self.pending.get(ev.call.id)
        if p is not None and p.status == "proposed":
            self.pending[ev.call.id] = replace(p, status="awaiting-answer")

    def _handed_off(self, ev: HandedOff) -> None:
        self.agent = ev.agent
        self.model = ev.model
        self.context = self.context.add(*ev.messages)

    def _child_stopped(self, ev: ChildStopped) -> None:
        p = self.pending.get(ev.call_id)
        if p is not None:
            self.pending[ev.call_id] = replace(p, status="delegated")
            self.children[ev.call_id] = ev.state

    def _approval_decided(self, ev: ApprovalDecided) -> None:
        self.decisions[ev.decision.call_id] = ev.decision

    def _compacted(self, ev: Compacted) -> None:
        self.context = Context(ev.messages)
        self._results.clear()

    def _noted(self, ev: Noted) -> None:
        self.context = self.context.add(ev.message)

    def _paused(self, ev: Paused) -> None:
        self.paused_at = self.seq

    def _cancelled(self, ev: Cancelled) -> None:
        self.closed = ev.final

    def part_bytes(self) -> int:
        """The bytes of the images and files in the notebook, results not yet written in it included."""
        return part_bytes(m.content for m in (*self.context, *self._results.values()))

    def _write_results(self) -> None:
        """Write every result that is in, in the order of the calls that asked for them."""
        if self._results:
            self.context = self.context.add(*self._pending_results())
            self._order = [cid for cid in self._order if cid not in self._results]
            self._results.clear()

    def _pending_results(self) -> list[Message]:
        return [self._results[cid] for cid in self._order if cid in self._results]

    def snapshot(self, pausing: PauseReason | None = None) -> RunState:
        """The state now; ``pausing`` gives the state a ``paused`` event about to be committed carries."""
        seq = self.seq + 1 if pausing else self.seq
        messages = self.context.messages
        if self._results:
            messages = (*messages, *self._pending_results())
        return RunState(
            run_id=self.run_id,
            messages=messages,
            open_calls=tuple(self.pending.values()),
            decisions=tuple(self.decisions.values()),
            steps=self.steps,
            tool_calls=self.tool_calls,
            usage=self.usage,
            fingerprint=self.fingerprint,
            seq=seq,
            status=pause_status(pausing) if pausing else self.status,
            paused_at=seq if pausing else self.paused_at,
            agent=self.agent,
            children=tuple(self.children.values()),
        )


_FOLDS: dict[str, Callable[[Journal, Any], None]] = {
    "run-started": Journal._run_started,
    "model-replied": Journal._model_replied,
    "tool-started": Journal._tool_started,
    "tool-finished": Journal._tool_finished,
    "approval-requested": Journal._approval_requested,
    "question-asked": Journal._question_asked,
    "approval-decided": Journal._approval_decided,
    "child-stopped": Journal._child_stopped,
    "handed-off": Journal._handed_off,
    "compacted": Journal._compacted,
    "noted": Journal._noted,
    "paused": Journal._paused,
    "cancelled": Journal._cancelled,
}


def still_inside(ev: ToolStarted) -> str:
    """What a person deciding on a call that never reported back must know: the first attempt may
    not be over. A worker that froze (SIGSTOP, a paused VM) past its lease and wakes up later can
    still finish it, so a retry may make its effect happen twice.

    >>> from tether.messages import ToolCall
    >>> still_inside(ToolStarted(ToolCall("c1", "send", "{}"), 1, 0.0, "h:m:42:ab"))[:60]
    'attempt 1 was started at 1970-01-01 00:00:00 UTC by worker h'
    """
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ev.at))
    return (
        f"attempt {ev.attempt} was started at {when} by worker {ev.by} and never reported back: if that "
        "worker is stalled rather than dead, it may still complete this attempt, so a retry may repeat the effect"
    )


_OUTCOMES: dict[str, Outcome] = {"": "finished", "denied": "denied", "skipped": "skipped"}  # else failed


def ran_in(state: RunState) -> dict[str, tuple[ToolCall, ToolFinished | None]]:
    """The calls a snapshot shows (its notebook and started calls); the events tell more, e.g. a denial."""
    results = {m.tool_call_id: m for m in state.messages if m.role == "tool"}
    ran: dict[str, tuple[ToolCall, ToolFinished | None]] = {}
    for call in (c for m in state.messages for c in m.tool_calls):
        if (res := results.get(call.id)) is not None:
            ran[call.id] = (call, ToolFinished(res, "raised" if res.is_error else None))
    for p in state.open_calls:
        if p.status == "started":
            ran[p.call.id] = (p.call, None)
    return ran


def ran_calls(journal: Journal) -> tuple[RanCall, ...]:
    """Every call of the run so far, in order, with how it ended: what output validators see."""
    out = [RanCall(call, "unknown") if ev is None else _ran(call, ev) for call, ev in journal.ran.values()]
    waits = ("awaiting-approval", "awaiting-answer", "delegated")
    out += [RanCall(p.call, "waiting") for p in journal.pending.values() if p.status in waits]
    return tuple(out)


def _ran(call: ToolCall, ev: ToolFinished) -> RanCall:
    return RanCall(call, _OUTCOMES.get(ev.error or "", "failed"), ev.result.text)


def state_of(events: Iterable[Event]) -> RunState:
    """The state a run's committed events describe (what a store's journal says now)."""
    return Journal.of(events).snapshot()


def replay(events: Iterable[Event]) -> Context:
    """Rebuild a run's Context from its committed events.

    Tool results join the notebook in the order of the calls that asked for
    them, as the live loop writes them, whatever order the tools finished in.
    """
    journal = Journal.of(events)
    journal._write_results()
    return journal.context
