"""What the server does, without HTTP: start, list, show, cancel and decide on runs.

Both faces of the server (the JSON API and the inbox pages) call these
methods, so they behave alike. Failures are :class:`ApiError` values with an
HTTP status, a stable ``code`` and a message, and, for conflicts, the run as it
is now (so a reviewer who lost a race sees who won).

A decision names the hash of the arguments the person was shown; it is
checked against the open item before anything is recorded, recorded with
:func:`tether.record_decisions` (which refuses a state that moved meanwhile),
and signed with the server's key.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import time
import uuid
from collections.abc import Mapping
from typing import Any, Protocol, cast

from ..agent import Agent
from ..dispatch import INPUTS_LABEL, DepsFactory, inputs_label
from ..events import Cancelled, RunStarted
from ..exceptions import LeaseConflict, StateError
from ..messages import Message
from ..pending import VERBS, Choice, Verdict
from ..store import record_decisions
from ..tools import ArgumentsInvalid, Invocation
from ._views import WAITING, ItemView, RunView, Views
from ._workers import ServedStore, Workers

__all__ = ["ApiError", "Service", "chosen"]

ATTEMPTS = 8  # a decision or a cancel retried when the run moved under it for another reason


class ApiError(Exception):
    """A refusal: HTTP ``status``, a stable ``code``, a message, and the run as it is now."""

    def __init__(self, status: int, code: str, message: str, run: RunView | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.run = status, code, message, run


def chosen(verdict: str, item: str, **payload: Any) -> Choice:
    """A request's choice: 422 when the verdict is unknown or its payload is not what the verdict takes."""
    if verdict not in VERBS:
        raise ApiError(422, "wrong-verdict", f"unknown verdict {verdict!r}; one of {', '.join(VERBS)}")
    try:
        return Choice(cast(Verdict, verdict), item, **payload)
    except StateError as exc:
        raise ApiError(422, "invalid-body", str(exc)) from None


class Judge(Protocol):
    """Who may decide (the people and rules of :mod:`tether.serve._judge`)."""

    def admit(self, run: RunView, item: ItemView, choice: Choice, who: Any, by: str) -> str: ...
    def decided(self, run: RunView, item: ItemView, choice: Choice, by: str) -> None: ...
    def visible(self, who: Any, items: list[ItemView], runs: dict[str, RunView]) -> list[ItemView]: ...
    def may_cancel(self, run: RunView, who: Any) -> None: ...
    def cancelled(self, run: RunView, by: str, reason: str) -> None: ...


class Service:
    """The server's operations over its store, agents and workers."""

    def __init__(
        self,
        agents: Mapping[str, Agent],
        store: ServedStore,
        views: Views,
        workers: Workers,
        key: bytes,
        deps: DepsFactory | None = None,
    ) -> None:
        self.agents, self.store, self.views, self.workers, self.key = agents, store, views, workers, key
        self.judge: Judge | None = None
        self.deps = deps

    # -- runs --------------------------------------------------------------------

    async def view(self, run_id: str) -> RunView:
        view = await self.views.get(run_id)
        if view is None:
            raise ApiError(404, "no-such-run", f"there is no run {run_id!r}")
        return view

    async def start(
        self,
        agent_name: str,
        task: str,
        *,
        run_id: str | None,
        key: str | None,
        meta: dict[str, str],
        inputs: dict[str, Any] | None = None,
    ) -> tuple[RunView, bool]:
        """Start a run (or find the one this id or idempotency key already started); True if new.

        ``inputs`` (JSON) go to the deps factory, now and whenever a worker advances the run."""
        agent = self.agents.get(agent_name)
        if agent is None:
            raise ApiError(422, "no-such-agent", f"no agent {agent_name!r} is served here (see GET /api/agents)")
        if INPUTS_LABEL in meta:
            raise ApiError(422, "invalid-body", f"the label {INPUTS_LABEL!r} is reserved: pass inputs instead")
        if inputs and self.deps is None:
            raise ApiError(422, "invalid-body", "inputs go to a deps factory, and this server has none")
        run_id = run_id or (_keyed_id(key) if key else uuid.uuid4().hex)
        meta = {**meta, **inputs_label(inputs)}
        started = _started(agent, run_id, task, meta, await self._deps(agent, run_id, inputs or {}))
        try:
            await self.store.append(run_id, [started], expected_seq=0)
        except LeaseConflict:
            return await self._existing(run_id, started), False
        await self.workers.submit(run_id, agent.name)
        return await self.view(run_id), True

    async def _deps(self, agent: Agent, run_id: str, inputs: dict[str, Any]) -> Any:
        """The new run's deps, for its instructions (the factory's refusal is the caller's 422)."""
        if self.deps is None:
            return None
        try:
            made = self.deps(run_id, agent.name, inputs)
            return await made if inspect.isawaitable(made) else made
        except Exception as exc:  # the application's factory: whatever it raises refuses these inputs
            said = f"the deps factory refused this run: {type(exc).__name__}: {exc}"
            raise ApiError(422, "deps-refused", said) from None

    async def _existing(self, run_id: str, wanted: RunStarted) -> RunView:
        view = await self.view(run_id)
        first = next((e for e in view.events if isinstance(e, RunStarted)), None)
        if first is None or (first.agent, first.messages, first.meta) != (wanted.agent, wanted.messages, wanted.meta):
            raise ApiError(409, "run-exists", f"run {run_id!r} already exists and was started otherwise", view)
        return view

    async def runs(
        self, *, status: str | None, agent: str | None, limit: int, offset: int
    ) -> tuple[list[RunView], int | None]:
        """A page of runs, most recently updated first, and the offset of the next page (None: last)."""
        infos = await self.store.list_runs(status, limit=100_000 if agent else offset + limit + 1)
        views = []
        for info in infos:
            if "/" in info.run_id:
                continue  # a child run is shown through its root run
            v = await self.views.get(info.run_id, info)
            if v is not None and (agent is None or v.agent == agent):
                views.append(v)
            if len(views) > offset + limit:
                break
        page = views[offset : offset + limit]
        return page, (offset + limit if len(views) > offset + limit else None)

    async def waiting(self, who: Any = None) -> list[ItemView]:
        """Every item waiting for a person across runs, the newest first (with ``who``: the ones they may decide)."""
        items: list[ItemView] = []
        runs: dict[str, RunView] = {}
        for status in WAITING:
            for info in await self.store.list_runs(status, limit=100_000):
                if "/" in info.run_id:
                    continue  # a child run: its items are listed with its root run
                view = await self.views.get(info.run_id, info)
                if view is not None:
                    runs[view.run_id] = view
                    items.extend(view.waiting)
        if who is not None and self.judge is not None:
            items = self.judge.visible(who, items, runs)
        return sorted(items, key=lambda i: (i.since, i.run_id, i.call_id), reverse=True)

    async def cancel(self, run_id: str, *, reason: str, by: str, who: Any = None) -> RunView:
        """End a run for good; a worker advancing it stops at its next commit.

        With a judge, ``who`` must be allowed to decide every item the run waits on (a cancel
        settles them all), and the cancel is logged."""
        for _ in range(ATTEMPTS):
            view = await self.view(run_id)
            if view.status == "finished" or view.closed:
                raise ApiError(409, "already-ended", f"run {run_id!r} is {view.status!r} already", view)
            if self.judge is not None:
                self.judge.may_cancel(view, who)
            said = f"cancelled by {by}" + (f": {reason}" if reason else "")
            try:
                await self.store.append(run_id, [Cancelled(said, final=True, at=time.time())], expected_seq=view.seq)
            except LeaseConflict:
                continue  # a worker committed meanwhile: look again
            if self.judge is not None:
                self.judge.cancelled(view, by, reason)
            return await self.view(run_id)
        raise ApiError(409, "busy", f"run {run_id!r} kept moving; try again", await self.view(run_id))

    # -- decisions ---------------------------------------------------------------

    async def decide(self, run_id: str, choice: Choice, *, by: str, who: Any = None) -> RunView:
        """Record one person's choice on one open item (see the module docstring).

        With a judge, ``who`` must be allowed to decide the item, and the
        decision is signed with the identity the judge gives (every approver's).
        """
        for attempt in range(ATTEMPTS):
            view = await self.view(run_id)
            item = self._open_item(view, choice)
            self._check_values(view, item, choice)
            signed = self.judge.admit(view, item, choice, who, by) if self.judge is not None else by
            try:
                await record_decisions(self.store, run_id, choice, by=signed, key=self.key)
            except LeaseConflict:
                # The run moved (another item was decided), or its worker is still letting go of it.
                await asyncio.sleep(0.02 * attempt)
                continue
            except StateError as exc:
                raise ApiError(409, "already-decided", str(exc), await self.view(run_id)) from None
            if self.judge is not None:
                self.judge.decided(view, item, choice, signed)
            return await self.view(run_id)
        raise ApiError(409, "busy", f"run {run_id!r} kept moving; try again", await self.view(run_id))

    def _open_item(self, view: RunView, choice: Choice) -> ItemView:
        call_id = choice.item
        item = view.item(call_id)
        if item is None:
            if not view.ever_called(call_id):
                raise ApiError(404, "no-such-item", f"run {view.run_id!r} has no call {call_id!r}")
            said = view.decided(call_id)
            who = f": it was decided, {said.verdict} by {said.by or 'someone'}" if said is not None else ""
            raise ApiError(409, "not-waiting", f"call {call_id!r} of run {view.run_id!r} is not waiting{who}", view)
        if item.decision is not None:
            d = item.decision
            who = f" by {d.by}" if d.by else ""
            raise ApiError(409, "already-decided", f"call {call_id!r} was already decided: {d.verdict}{who}", view)
        if choice.args_hash != item.args_hash:
            raise ApiError(
                409, "stale", f"call {call_id!r} is not what you were shown (its arguments' hash differs)", view
            )
        if choice.verdict not in item.verdicts:
            raise ApiError(
                422, "wrong-verdict", f"{_a(item.kind)} item takes {' or '.join(item.verdicts)}, not {choice.verdict}"
            )
        return item

    def _check_values(self, view: RunView, item: ItemView, choice: Choice) -> None:
        """Edited arguments and answers must fit the tool's schema before they are recorded."""
        answers = VERBS[choice.verdict].takes == "answer"
        if choice.args is None and not answers:
            return
        tool = item.tool_ref
        if tool is None:
            raise ApiError(422, "agent-not-served", f"run {view.run_id!r} belongs to an agent not served here")
        try:
            if answers:
                tool.check_answer(choice.answer)
            else:
                tool.validate(choice.args or {})
        except ArgumentsInvalid as exc:
            raise ApiError(422, "invalid-answer" if answers else "invalid-arguments", str(exc)) from None


def _a(word: str) -> str:
    """``word`` with its indefinite article: "an approval", "a question"."""
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def _keyed_id(key: str) -> str:
    """The run id an idempotency key stands for: the same key, the same run."""
    return "k" + hashlib.sha256(key.encode()).hexdigest()[:31]


def _started(agent: Agent, run_id: str, task: str, meta: dict[str, str], deps: Any) -> RunStarted:
    """The first event of a new run of ``agent``, as the loop itself would write it."""
    said = agent.instructions
    if callable(said):  # dynamic instructions: they read the run's deps
        try:
            said = said(Invocation(run_id, "", "", deps))
        except Exception as exc:  # the application's code: say which part failed, not only its type
            message = f"agent {agent.name!r}'s instructions failed: {type(exc).__name__}: {exc}"
            raise ApiError(500, "instructions-failed", message) from None
    notes = [Message.system(said)] if said else []
    notes.append(Message.user(task))
    model = getattr(agent.policy, "model", "")
    return RunStarted(
        run_id, tuple(notes), False, agent.fingerprint, agent.name, dict(meta),
        model if isinstance(model, str) else "", at=time.time(),
    )  # fmt: skip
