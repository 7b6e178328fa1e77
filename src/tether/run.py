"""A run in progress: the loop, read top to bottom.

Decide, act, write it down, repeat. :meth:`Run.events` asks the brain, commits
its reply, settles every call of the reply (run it, write a note, or wait for a
human: :func:`tether.turn.plan`), and goes round again until the reply has no
calls, a terminal tool ran, a budget ran out or a human is needed.

Everything the loop learns goes through :meth:`Run.commit`, the one durability
rule: an event is written to the store (when there is one) *before* it is
folded into the :class:`~tether.journal.Journal` and before the loop moves on.
So the model's reply is durable before any of its tools run, ``tool-started``
before a tool's first side effect, ``tool-finished`` before the next model call.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol

from . import _crash
from .context import Context
from .cost import Price, total_cost, unpriced_models
from .events import (
    TERMINAL,
    ApprovalDecided,
    ApprovalRequested,
    Cancelled,
    ChildEvent,
    ChildStopped,
    Compacted,
    ErrorKind,
    Event,
    Failed,
    Finished,
    HandedOff,
    LimitReached,
    ModelReplied,
    Paused,
    PauseReason,
    QuestionAsked,
    RunStarted,
    Token,
    ToolFinished,
    ToolStarted,
)
from .exceptions import (
    LeaseConflict,
    ProviderError,
    StateError,
    StateIncompatible,
    StateTampered,
    StoreError,
    UserError,
)
from .journal import Journal, state_of
from .messages import Message, ToolCall
from .policy import Policy, ask
from .state import RunState, args_hash
from .store import Lease, RunStore
from .tools import ArgumentsInvalid, Invocation, Tool, ToolTimedOut, result_text
from .turn import Execute, Note, Step, Wait, plan

__all__ = ["Input", "Observer", "Parent", "Run", "Settings", "Watcher"]

Input = str | Message | RunState | None


class Settings(Protocol):
    """What the loop reads from the agent it runs (an :class:`~tether.agent.Agent`)."""

    @property
    def fingerprint(self) -> str: ...

    def reachable(self, name: str) -> Settings | None: ...

    name: str
    instructions: str | None
    policy: Policy
    tools: dict[str, Tool]
    tool_list: tuple[Tool, ...]
    ends_turns: bool  # some tool is terminal or hands the run over
    max_steps: int
    max_tool_calls: int | None
    max_tokens: int | None
    max_seconds: float | None
    max_cost: float | None
    prices: Mapping[str, Price]
    store: RunStore | None
    signing_key: bytes | None
    approver: Callable[[Tool, dict[str, Any], Context], bool] | None
    compactor: Callable[[Context], Context] | None
    lease_ttl: float
    observers: tuple[Observer, ...]


class Watcher(Protocol):
    """Watches one run: sees each event right after it is committed, then ``close()`` when the
    run's stream ends, however it ends (even without a closing event: a crash, a lost lease)."""

    def event(self, ev: Event) -> None: ...

    def close(self) -> None: ...


class Observer(Protocol):
    """Watches the runs of an agent (``Agent(observers=[...])``): one :class:`Watcher` per run,
    e.g. :class:`tether.telemetry.Tracing`."""

    def watch(self, agent: Settings) -> Watcher: ...


class Run:
    """One run of an agent: its journal, its store, its budgets, and the loop."""

    def __init__(
        self,
        agent: Settings,
        input: Input,
        *,
        context: Context | None = None,
        run_id: str | None = None,
        cancel: asyncio.Event | None = None,
        meta: Mapping[str, str] | None = None,
        parent: Parent | None = None,
    ) -> None:
        self.agent = agent  # the agent driving the run now (a handoff changes it)
        self.root = agent
        self.fingerprint = agent.fingerprint
        self.input, self.prior, self.run_id = input, context, run_id
        self.cancel = cancel
        self.meta = _labels(meta)
        self.parent = parent
        # A child run lives in its parent's store (or in memory with it) under its parent's key.
        self.store = parent.store if parent is not None else agent.store
        self.key = parent.key if parent is not None else agent.signing_key
        self.journal = Journal()
        self._steps0 = self._tools0 = self._tokens0 = 0  # a child's counters when it (re)started
        self._cost0 = 0.0
        self.ended = False
        self.limit: str | None = None
        self.lock = asyncio.Lock()
        self.deadline: float | None = None
        self.lease: Lease | None = None
        self.failure: Failed | None = None  # the store failed: how the run ended, not committed
        self._renewal: asyncio.Task[None] | None = None
        self._notebooks: dict[str, Context] = {}  # finished children's notebooks, for tools that continue them
        self.watchers = [o.watch(agent) for o in agent.observers]  # none, unless observers were given

    async def events(self) -> AsyncIterator[Event]:
        """The run as a stream of events; how it ends is committed whenever the store can take it."""
        try:
            async for ev in self._loop():
                yield ev
        except _StoreDown:
            assert self.failure is not None
            yield self.failure
        except asyncio.CancelledError:
            await self._end(Cancelled("the task running the agent was cancelled"))
            raise
        except Exception as exc:
            await self._end(Failed(f"{type(exc).__name__}: {exc}", type(exc).__name__))
            raise
        finally:
            await self._end(Cancelled("the event stream was closed"))  # the consumer stopped early
            await self._let_go()
            for w in self.watchers:
                w.close()

    async def _loop(self) -> AsyncIterator[Event]:
        """Decide, act, write it down, repeat."""
        for ev in await self._start():
            yield ev
        if self.journal.pending:  # resumed in the middle of a turn
            async for ev in self._act():
                yield ev
        elif (output := self._committed_output()) is not None:  # resumed after the answer was written
            yield await self.commit(Finished(output, self.journal.usage))
        elif (target := self._transfer()) is not None:  # resumed after a transfer was written
            yield await self._hand_off(target)
        while not self.ended:
            if stop := self._over_budget():
                yield await self.commit(stop)
                return
            if shorter := self._compacted():
                yield await self.commit(shorter)
            reply: Message | Event | None = None
            async for piece in self._ask():
                if isinstance(piece, Token):
                    yield piece
                else:
                    reply = piece
            if not isinstance(reply, Message):  # the brain failed or the time ran out
                assert reply is not None
                yield await self.commit(reply)
                return
            yield await self.commit(ModelReplied(reply))
            if not reply.tool_calls:
                yield await self.commit(Finished(reply.content, self.journal.usage))
                return
            async for ev in self._act():
                yield ev

    # -- start: new, resume, or load ---------------------------------------

    async def _start(self) -> list[Event]:
        if self.agent.max_seconds is not None:
            self.deadline = asyncio.get_running_loop().time() + self.agent.max_seconds
        if self.parent is not None and self.parent.deadline is not None:
            self.deadline = min(self.deadline or self.parent.deadline, self.parent.deadline)
        input = self.input
        if input is None and self.run_id is not None:
            await self._hold(self.run_id)
            first = await self._load()
        elif isinstance(input, RunState):
            await self._hold(input.run_id)
            first = await self._resume(input)
        else:
            started = await self._new(input)
            await self._hold(started.run_id)
            first = [started]
        out = [await self.commit(ev) for ev in first]
        j = self.journal
        self._steps0, self._tools0, self._tokens0 = j.steps, j.tool_calls, j.usage.total_tokens
        if self.parent is not None and self.parent.cost is not None:
            self._cost0 = self.cost() or 0.0
        return out

    async def _new(self, input: Input) -> RunStarted:
        if input is None:
            raise UserError("give the agent a task (a string or Message), a RunState, or a run_id")
        notes = list(self.prior or ())
        if not notes and self.agent.instructions:
            notes.append(Message.system(self.agent.instructions))
        notes.append(input if isinstance(input, Message) else Message.user(str(input)))
        if self.run_id and self.store is not None and await self.store.get(self.run_id) is not None:
            raise UserError(f"run {self.run_id!r} already exists in the store; resume it with run_id= alone")
        run_id = self.run_id or uuid.uuid4().hex
        return RunStarted(
            run_id, tuple(notes), False, self.fingerprint, self.agent.name, self.meta, _model_of(self.agent)
        )

    async def _resume(self, state: RunState) -> list[Event]:
        self._check_resumable(state, trusted=False)
        stored = await self._check_against_store(state) if self.store is not None else None
        self._follow(state)
        self.journal = Journal.from_state(state)
        if stored is not None:  # a state keeps the total usage only; the store knows it per model
            self.journal.usage_by_model = stored.usage_by_model
        resumed = RunStarted(state.run_id, (), True, self.fingerprint, self.agent.name, model=_model_of(self.agent))
        return [resumed, *(ApprovalDecided(d) for d in state.decisions)]

    async def _load(self) -> list[Event]:
        assert self.run_id is not None
        if self.store is None:
            raise UserError("resuming by run_id needs an agent with a store")
        events = await self.store.load(self.run_id)
        if not events:
            raise StateError(f"no run {self.run_id!r} in the store")
        journal = Journal.of(events)
        if journal.closed:
            raise StateError(f"run {self.run_id!r} was cancelled for good and cannot be resumed")
        state = journal.snapshot()
        self._check_resumable(state, trusted=True)
        self._follow(state)
        self.journal = journal  # a store's journal already holds its decisions
        return [RunStarted(journal.run_id, (), True, self.fingerprint, self.agent.name, model=_model_of(self.agent))]

    def _check_resumable(self, state: RunState, *, trusted: bool) -> None:
        if state.fingerprint != self.fingerprint:
            raise StateIncompatible(
                f"run {state.run_id!r} was paused with other tool definitions "
                f"(fingerprint {state.fingerprint!r}, this agent has {self.fingerprint!r})"
            )
        if state.status == "finished" or (state.status == "running" and not trusted):
            raise StateError(f"run {state.run_id!r} is {state.status!r} and cannot be resumed")
        key = self.key
        if key is not None:
            # Loaded from our own store, or a child state its verified parent carried: decisions still
            # need their signatures.
            if trusted or self.parent is not None:
                state.verify_decisions(key)
            else:
                state.verify(key)
        state.check_decisions()

    def _follow(self, state: RunState) -> None:
        """Drive the run with the agent its journal says drives it (after a handoff), once the
        decisions it holds fit that agent's tools (so a bad one leaves the run as it was)."""
        name = state.agent
        agent = self.agent if not name or name == self.agent.name else self.root.reachable(name)
        if agent is None:
            raise StateIncompatible(
                f"run {state.run_id!r} is driven by agent {name!r}, which {self.root.name!r} cannot hand off to"
            )
        _check_edits(state, agent.tools)
        self.agent = agent

    async def _check_against_store(self, state: RunState) -> Journal:
        """With a store, its journal is the truth: a state that says otherwise is refused."""
        assert self.store is not None
        events = await self.store.load(state.run_id)
        if not events:
            raise StateTampered(f"run {state.run_id!r} is not in this agent's store; it cannot be resumed here")
        journal = Journal.of(events)
        if journal.closed:
            raise StateError(f"run {state.run_id!r} was cancelled for good and cannot be resumed")
        truth = journal.snapshot()
        if state.seq != truth.seq:
            raise LeaseConflict(
                f"run {state.run_id!r} is at position {truth.seq} in the store, this state at {state.seq}: "
                "it was resumed or decided elsewhere (load it again from the store)"
            )

        def claims(s: RunState) -> RunState:  # what the state says happened; decisions are checked apart
            # Child runs are checked against their own journals when they resume.
            return dataclasses.replace(s, decisions=(), signature="", status="paused", children=(), parent_call="")

        if claims(state) != claims(truth):
            raise StateTampered(
                f"run state {state.run_id!r} differs from the store's journal (its calls, arguments or notes); "
                "nothing was run"
            )
        return journal

    # -- the lease: one worker advances a run --------------------------------

    async def _hold(self, run_id: str) -> None:
        """Take the run's lease (with a store) and keep renewing it while the run streams."""
        if self.store is None:
            return
        ttl, owner = self.agent.lease_ttl, _owner()
        try:
            self.lease = await self.store.acquire(run_id, owner, ttl)
        except LeaseConflict as exc:
            if exc.holder is None or not _gone(exc.holder):
                raise
            self.lease = await self.store.acquire(run_id, owner, ttl, take_over=exc.holder)
        _LIVE.add(owner)
        self._renewal = asyncio.create_task(self._renew(ttl))

    async def _renew(self, ttl: float) -> None:
        assert self.store is not None and self.lease is not None
        while True:
            await asyncio.sleep(ttl / 3)
            with contextlib.suppress(StoreError):  # lost: the next append with it is refused
                renewed = await self.store.acquire(self.lease.run_id, self.lease.owner, ttl)
                if renewed.token != self.lease.token:  # lost to another worker, then taken back: stay refused
                    await self.store.release(renewed)
                    return
                self.lease = renewed

    async def _let_go(self) -> None:
        if self.lease is not None:
            _LIVE.discard(self.lease.owner)
        if self._renewal is not None:
            self._renewal.cancel()
            # wait() does not raise the renewal's CancelledError, so a cancellation of this task
            # arriving meanwhile still propagates (suppressing it here lost it: LocalPool.aclose hung).
            await asyncio.wait([self._renewal])
        if self.lease is not None and self.store is not None:
            with contextlib.suppress(StoreError, OSError):  # it expires by itself anyway
                await self.store.release(self.lease)

    # -- commit: the one durability rule -----------------------------------

    async def commit(self, ev: Event) -> Event:
        """Stamp ``ev`` with the time, write it to the store (if any), then fold it into the journal."""
        if not ev.at:  # the loop made it a moment ago and nobody has seen it yet
            object.__setattr__(ev, "at", time.time())
        if _crash.armed:
            _crash.crash_around("before", ev.kind)
        async with self.lock:
            if self.store is not None:
                await self._write(ev)
            self._apply(ev)
        for w in self.watchers:
            w.event(ev)
        if _crash.armed:
            _crash.crash_around("after", ev.kind)
        return ev

    async def _write(self, ev: Event) -> None:
        assert self.store is not None
        run_id = ev.run_id if isinstance(ev, RunStarted) else self.journal.run_id
        expected = self.journal.seq
        try:
            await self.store.append(run_id, [ev], expected_seq=expected, lease=self.lease)
        except asyncio.CancelledError:
            # Cancelled mid-write: learn whether it landed, so the journal matches the store.
            info = await self.store.get(run_id)
            if info is not None and info.seq > expected:
                self._apply(ev)
            raise
        except StoreError as exc:
            self.ended = True  # the journal can no longer be trusted to advance
            if isinstance(exc, LeaseConflict) or not self.journal.run_id:
                raise  # another worker owns the run, or there is no run to resume yet
            self.failure = Failed(
                f"the run store failed, so the run stopped at its last commit (resume it once the store "
                f"works again): {exc}",
                "StoreError",
            )
            raise _StoreDown from exc
        except BaseException:
            self.ended = True
            raise

    def _apply(self, ev: Event) -> None:
        self.journal.apply(ev)
        if ev.kind in TERMINAL:
            self.ended = True
            if isinstance(ev, LimitReached):
                self.limit = ev.limit

    async def _end(self, ev: Event) -> None:
        """Commit a closing event unless the run has already ended."""
        if not self.ended and self.journal.run_id:
            with contextlib.suppress(StoreError, OSError):  # the original error matters more
                await self.commit(ev)

    # -- decide ------------------------------------------------------------

    async def _ask(self) -> AsyncIterator[Token | Message | Event]:
        """The brain's reply: tokens, then the Message, or the event that ends the run instead.

        Each piece is awaited within the run's time budget (the budget never spans a yield).
        """
        pieces = ask(self.agent.policy, self.journal.context, self.agent.tool_list)
        try:
            while True:
                try:
                    if self.deadline is None:
                        piece = await anext(pieces)
                    else:
                        async with asyncio.timeout_at(self.deadline):
                            piece = await anext(pieces)
                except StopAsyncIteration:
                    return
                yield Token(piece) if isinstance(piece, str) else _unique_call_ids(piece, self.journal.call_ids)
        except ProviderError as exc:
            yield Failed(str(exc), "ProviderError")
        except TimeoutError:
            if not self._out_of_time():
                raise  # the policy's own timeout: a failure, not our budget
            yield LimitReached("seconds", self.agent.max_seconds or 0)

    def _compacted(self) -> Compacted | None:
        if self.agent.compactor is None:
            return None
        ctx = self.journal.context
        shorter = self.agent.compactor(ctx)
        return Compacted(shorter.messages) if shorter is not ctx and shorter != ctx else None

    # -- act ---------------------------------------------------------------

    async def _act(self) -> AsyncIterator[Event]:
        """Settle every open call of the turn: note, run, or wait for a human."""
        steps = self._plan()
        for step in steps:
            if isinstance(step, Note):
                yield await self.commit(step.event)
        todo = [s for s in steps if isinstance(s, Execute)]
        if todo:
            if stop := self._over_budget(new_calls=sum(s.attempt == 1 for s in todo), in_turn=True):
                yield await self.commit(stop)
                return
            for step in todo:
                yield await self.commit(ToolStarted(step.call, step.attempt))
            if len(todo) == 1 and self.cancel is None and todo[0].tool.agent is None:
                yield await self._run_tool(todo[0])  # the common case, without a generator per call
            else:
                async for ev in self._execute(todo):
                    yield ev
            if self.ended:
                return
        waits = [s for s in steps if isinstance(s, Wait)]
        if waits or any(p.status == "delegated" for p in self.journal.pending.values()):
            for ev in await self._pause(waits):
                yield ev
        elif (output := self._terminal_output()) is not None:
            yield await self.commit(Finished(output, self.journal.usage))
        elif (target := self._transfer()) is not None:
            yield await self._hand_off(target)

    async def _hand_off(self, target: Settings) -> Event:
        notes = (Message.system(target.instructions),) if target.instructions else ()
        ev = await self.commit(HandedOff(target.name, notes, _model_of(target)))
        self.agent = target
        return ev

    def _transfer(self) -> Settings | None:
        """The agent a transfer of the turn that just ended hands the run to (the first one wins)."""
        for call, result in self._turn_results():
            tool = self.agent.tools.get(call.name)
            if tool is not None and tool.handoff is not None and result is not None and not result.is_error:
                target: Settings = tool.handoff
                return target
        return None

    def _plan(self) -> list[Step]:
        j, agent = self.journal, self.agent
        ctx = j.context

        approvers = (*(self.parent.approvers if self.parent else ()), *((agent.approver,) if agent.approver else ()))

        def gate(tool: Tool, args: dict[str, Any]) -> bool:  # the tool's gate, then every approver up the tree
            return tool.needs_approval(args, ctx) or any(approve(tool, args, ctx) for approve in approvers)

        return [plan(p, agent.tools, j.decisions.get(p.call.id), gate) for p in j.pending.values()]

    async def _pause(self, waits: list[Wait]) -> list[Event]:
        """Ask for what the turn waits for, then pause with every open item of the run tree."""
        out = []
        for w in waits:
            if self.journal.pending[w.call.id].status != "proposed":
                continue  # asked before this pause
            if w.reason == "approval":
                out.append(await self.commit(ApprovalRequested(w.call, args_hash(w.call.arguments), w.note)))
            elif w.reason == "question":
                asked = QuestionAsked(w.call, args_hash(w.call.arguments), _question_text(w.call))
                out.append(await self.commit(asked))
        items = self.journal.snapshot().items()
        reasons = {_REASONS.get(i.status, "approval") for i in items}
        reason: PauseReason = next(r for r in ("outcome-unknown", "approval", "question") if r in reasons)
        state = self._stamped(self.journal.snapshot(pausing=reason))
        out.append(await self.commit(Paused(reason, tuple(i.id for i in items), state)))
        return out

    async def _execute(self, todo: list[Execute]) -> AsyncIterator[Event]:
        """Run the calls (concurrently when several); each result is committed and yielded as it lands."""
        if len(todo) == 1 and self.cancel is None:
            async for ev in self._call(todo[0]):
                yield ev
            return
        landed: asyncio.Queue[Event | None] = asyncio.Queue()

        async def one(step: Execute) -> None:
            async for ev in self._call(step):
                landed.put_nowait(ev)

        async def every_call() -> None:
            try:
                async with asyncio.TaskGroup() as tg:
                    calls = [tg.create_task(one(step)) for step in todo]
                    if self.cancel is not None:
                        watcher = tg.create_task(_watch(self.cancel))
                        await asyncio.wait(calls)
                        watcher.cancel()
            finally:
                landed.put_nowait(None)

        runner = asyncio.create_task(every_call())
        try:
            while (item := await landed.get()) is not None:
                yield item
            await runner
        except BaseExceptionGroup as group:
            real = group.subgroup(lambda e: not isinstance(e, _CancelRequested | BaseExceptionGroup))
            if real is not None:
                raise real.exceptions[0] from None
            if not self.ended:
                yield await self.commit(Cancelled("cancel requested"))
        finally:
            if not runner.done():  # the consumer left: stop the calls
                runner.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await runner

    async def _call(self, step: Execute) -> AsyncIterator[Event]:
        if step.tool.agent is not None:
            async for ev in self._delegate(step):
                yield ev
        else:
            yield await self._run_tool(step)

    async def _run_tool(self, step: Execute) -> Event:
        """Run one tool call; what it returned (or how it failed) is committed as its result."""
        tool, call = step.tool, step.call
        invocation = Invocation(self.journal.run_id, call.id, tool.name)
        error: ErrorKind | None = None
        budget = asyncio.timeout_at(self.deadline) if self.deadline is not None else None
        unknown = "" if tool.is_async else "; it runs in a thread and may still finish"
        try:
            if budget is None:
                value = await tool.invoke(step.args, invocation)
            else:
                async with budget:
                    value = await tool.invoke(step.args, invocation)
            text = result_text(value)
        except ToolTimedOut as exc:
            text, error = f"{exc}{unknown}", "timeout"
        except TimeoutError as exc:
            if budget is None or not budget.expired():  # the tool's own timeout error, not one of ours
                text, error = f"tool {tool.name!r} failed: TimeoutError: {exc}", "raised"
            else:
                text, error = f"tool {tool.name!r} was stopped: the run's time budget ran out{unknown}", "timeout"
        except Exception as exc:
            text, error = f"tool {tool.name!r} failed: {type(exc).__name__}: {exc}", "raised"
        result = Message.tool_result(call.id, step.prefix + text, name=tool.name, is_error=error is not None)
        return await self.commit(ToolFinished(result, error))

    # -- runs inside runs --------------------------------------------------

    async def _delegate(self, step: Execute) -> AsyncIterator[Event]:
        """Run (or resume) the call's child run; its events show here, its ending settles the call."""
        child_agent: Settings = step.tool.agent
        call = step.call
        child_id = f"{self.journal.run_id}/{call.id}"
        if (finished := await self._finished_child(child_id)) is not None:  # then its parent was killed
            yield await self.commit(self._settle(call, child_agent.name, finished))
            return
        task = await self._child_input(child_id, str(step.args.get("task", "")), call.id)
        prior = await self._previous_notebook(step) if isinstance(task, str) and step.tool.continues else None
        child = Run(child_agent, task, context=prior, run_id=child_id, cancel=self.cancel, parent=self._left(call.id))
        try:
            async for ev in child.events():
                yield ChildEvent(call.id, child_agent.name, ev)
        except asyncio.CancelledError:
            with contextlib.suppress(StoreError, OSError):  # keep the child's state with the parent's
                await self.commit(ChildStopped(call.id, child.snapshot()))
            raise
        if child.journal.status == "finished" and step.tool.continues:
            self._notebooks[child_id] = child.journal.context  # the next call of this tool goes on from here
        yield await self.commit(self._settle(call, child_agent.name, child.snapshot()))

    async def _previous_notebook(self, step: Execute) -> Context | None:
        """For a tool whose calls continue one notebook: where the last finished call's child left it."""
        for msg in reversed(self.journal.context.messages):
            if msg.role != "tool" or msg.name != step.tool.name or msg.is_error or msg.tool_call_id == step.call.id:
                continue
            child_id = f"{self.journal.run_id}/{msg.tool_call_id}"
            if child_id in self._notebooks:
                return self._notebooks[child_id]
            if self.store is not None and (events := await self.store.load(child_id)):
                return Journal.of(events).context
            return None
        return None

    async def _finished_child(self, child_id: str) -> RunState | None:
        """The stored state of a child run that finished before its parent wrote the call's result."""
        if self.store is None or (info := await self.store.get(child_id)) is None or info.status != "finished":
            return None
        return state_of(await self.store.load(child_id))

    async def _child_input(self, child_id: str, task: str, call_id: str) -> Input:
        saved = self.journal.children.get(call_id)
        if saved is not None and saved.decisions:
            return saved  # decided in the state the caller passed in
        if self.store is not None and await self.store.get(child_id) is not None:
            return None  # resume the child from its own journal
        return saved if saved is not None else task

    def _left(self, call_id: str) -> Parent:
        """What this run has left (bounded by its own ancestors), to bound the child it delegates to."""
        agent, j, up = self.agent, self.journal, self.parent
        spent = self.cost()
        own = Parent(
            call_id=call_id,
            store=self.store,
            key=self.key,
            deadline=self.deadline,
            steps=max(agent.max_steps - j.steps, 0),
            tool_calls=None if agent.max_tool_calls is None else max(agent.max_tool_calls - j.tool_calls, 0),
            tokens=None if agent.max_tokens is None else max(agent.max_tokens - j.usage.total_tokens, 0),
            cost=None if agent.max_cost is None else max(agent.max_cost - (spent or 0.0), 0.0),
            approvers=(*(up.approvers if up else ()), *((agent.approver,) if agent.approver else ())),
        )
        if up is None:
            return own
        return dataclasses.replace(
            own,
            steps=_least(own.steps, _less(up.steps, j.steps - self._steps0)),
            tool_calls=_least(own.tool_calls, _less(up.tool_calls, j.tool_calls - self._tools0)),
            tokens=_least(own.tokens, _less(up.tokens, j.usage.total_tokens - self._tokens0)),
            cost=_least(own.cost, _less(up.cost, (spent or 0.0) - self._cost0)),
        )

    def _settle(self, call: ToolCall, name: str, state: RunState) -> Event:
        """How a child's ending becomes its parent's call result (or leaves the call waiting)."""
        if state.status in ("paused", "needs-decision", "cancelled"):
            return ChildStopped(call.id, state)  # it waits for a person, or it was interrupted: it resumes
        usage = state.total_usage
        last = state.messages[-1] if state.messages else None
        if state.status == "finished":
            answer = _child_answer(state)
            return ToolFinished(dataclasses.replace(Message.tool_result(call.id, answer, name=call.name), usage=usage))
        said = f": {last.content}" if last is not None and last.role == "assistant" and last.content else ""
        text = f"sub-agent {name!r} ended {state.status} before it finished{said}"
        note = Message.tool_result(call.id, text, name=call.name, is_error=True)
        return ToolFinished(dataclasses.replace(note, usage=usage), "stopped")

    # -- budgets and answers -----------------------------------------------

    def _out_of_time(self) -> bool:
        return self.deadline is not None and asyncio.get_running_loop().time() >= self.deadline

    def _over_budget(self, new_calls: int = 0, *, in_turn: bool = False) -> Event | None:
        agent, j = self.agent, self.journal
        if self.cancel is not None and self.cancel.is_set():
            return Cancelled("cancel requested")
        if self._out_of_time():
            return LimitReached("seconds", agent.max_seconds or 0)
        if not in_turn and j.steps >= agent.max_steps:
            return LimitReached("steps", agent.max_steps)
        if agent.max_tokens is not None and j.usage.total_tokens >= agent.max_tokens:
            return LimitReached("tokens", agent.max_tokens)
        if agent.max_cost is not None and (over := self._over_cost(agent.max_cost)):
            return over
        if agent.max_tool_calls is not None and j.tool_calls + new_calls > agent.max_tool_calls:
            return LimitReached("tool_calls", agent.max_tool_calls)
        return self._over_parent_budget(new_calls, in_turn)

    def _over_cost(self, budget: float) -> Event | None:
        """The cost budget; a reply from a model without a price fails the run (the budget cannot be kept)."""
        j = self.journal
        unpriced = unpriced_models(j.usage_by_model, self.agent.prices, default_model=j.model)
        if unpriced:
            names = ", ".join(f"model {m!r}" if m else "a brain without a model name" for m in unpriced)
            return Failed(f"max_cost cannot be kept: no price for {names} (give Agent(prices=...))", "UserError")
        spent = self.cost() or 0.0
        return LimitReached("cost", budget) if spent >= budget else None

    def _over_parent_budget(self, new_calls: int, in_turn: bool) -> Event | None:
        """A child may spend no more than what its parent had left when it delegated."""
        left, j = self.parent, self.journal
        if left is None:
            return None
        if not in_turn and left.steps is not None and j.steps - self._steps0 >= left.steps:
            return LimitReached("steps", left.steps)
        if left.tokens is not None and j.usage.total_tokens - self._tokens0 >= left.tokens:
            return LimitReached("tokens", left.tokens)
        if left.tool_calls is not None and j.tool_calls - self._tools0 + new_calls > left.tool_calls:
            return LimitReached("tool_calls", left.tool_calls)
        if left.cost is not None:
            return self._over_cost(self._cost0 + left.cost)
        return None

    def _committed_output(self) -> str | None:
        """A final answer or terminal tool result already in the notebook (then the run is done)."""
        last = self.journal.context.last()
        if last is not None and last.role == "assistant" and not last.tool_calls:
            return last.content
        return self._terminal_output()

    def _terminal_output(self) -> str | None:
        """The result of the first terminal tool of the turn that just ended, if any."""
        for call, res in self._turn_results():
            tool = self.agent.tools.get(call.name)
            if tool is not None and tool.terminal and res is not None and not res.is_error:
                return res.content
        return None

    def _turn_results(self) -> list[tuple[ToolCall, Message | None]]:
        """The calls of the turn that just ended, each with its result (when a tool can end a turn)."""
        if not self.agent.ends_turns:
            return []
        ctx = self.journal.context
        results: dict[str | None, Message] = {}
        i = len(ctx) - 1
        while i >= 0 and ctx[i].role == "tool":
            results[ctx[i].tool_call_id] = ctx[i]
            i -= 1
        return [(call, results.get(call.id)) for call in (ctx[i].tool_calls if i >= 0 else ())]

    def cost(self) -> float | None:
        """What the run's replies cost so far in US dollars (None when a model has no price)."""
        j = self.journal
        return total_cost(j.usage_by_model, self.agent.prices, default_model=j.model)

    def snapshot(self) -> RunState:
        """The run's state now (signed when the agent has a key)."""
        state = self.journal.snapshot()
        if self.failure is not None:
            state = dataclasses.replace(state, status="failed")
        return self._stamped(state)

    def _stamped(self, state: RunState) -> RunState:
        """A child's state names its parent call (its root signs the tree); a root's is signed."""
        if self.parent is not None:
            return dataclasses.replace(state, parent_call=self.parent.call_id)
        return state.sign(self.key) if self.key else state


def _unique_call_ids(message: Message, seen: set[str]) -> Message:
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


@dataclasses.dataclass(frozen=True, slots=True)
class Parent:
    """What a child run inherits from the call that delegated to it: where it is journaled,
    under which key, and what its parent had left to spend."""

    call_id: str
    store: RunStore | None
    key: bytes | None
    deadline: float | None
    steps: int | None
    tool_calls: int | None
    tokens: int | None
    cost: float | None = None
    approvers: tuple[Callable[[Tool, dict[str, Any], Context], bool], ...] = ()  # every ancestor's, root first


def _less(left: Any, used: Any) -> Any:
    return None if left is None else max(left - used, 0)


def _least(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else min(a, b)


_REASONS: dict[str, PauseReason] = {
    "started": "outcome-unknown",
    "awaiting-answer": "question",
    "awaiting-approval": "approval",
}


def _child_answer(state: RunState) -> str:
    """A finished child's answer: its last assistant note, or the result of its terminal tool."""
    last = state.messages[-1] if state.messages else None
    return last.content if last is not None else ""


class _CancelRequested(Exception):
    pass


class _StoreDown(Exception):
    """The store refused a commit: the run stops where its store says it is."""


def _check_edits(state: RunState, tools: Mapping[str, Tool]) -> None:
    """Edited arguments and answers must fit their tools before anything is committed."""
    calls = {p.call.id: p.call for p in state.pending}
    for d in state.decisions:
        tool = tools.get(calls[d.call_id].name) if d.call_id in calls else None
        try:
            if tool is not None and d.verdict == "approve" and d.args is not None:
                tool.validate(d.args)
            elif tool is not None and d.verdict == "answer":
                tool.check_answer(d.answer)
        except ArgumentsInvalid as exc:
            what = "answer" if d.verdict == "answer" else "edited arguments"
            raise StateError(
                f"the {what} for call {d.call_id!r} do not fit: {exc} (decide again with replace)"
            ) from None


def _question_text(call: ToolCall) -> str:
    try:
        args = json.loads(call.arguments)
    except ValueError:
        return call.arguments
    return str(args.get("question", call.arguments)) if isinstance(args, dict) else call.arguments


def _model_of(agent: Settings) -> str:
    """The model name of an agent's brain, when it has one (``policy.model``)."""
    model = getattr(agent.policy, "model", None)
    return model if isinstance(model, str) else ""


def _labels(meta: Mapping[str, str] | None) -> dict[str, str]:
    labels = dict(meta or {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        raise UserError(f"meta must map strings to strings, got {labels!r}")
    return labels


_LIVE: set[str] = set()  # lease owners of the runs this process is advancing now


def _owner() -> str:
    """A lease owner name unique to this run in this process: host, pid namespace, pid and a nonce."""
    return f"{socket.gethostname()}:{_PID_NAMESPACE}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _pid_namespace() -> str:
    """This process's pid namespace (containers on one host may share a hostname, never this)."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "?"  # unknown: never judged gone


_PID_NAMESPACE = _pid_namespace()


def _gone(owner: str) -> bool:
    """Whether a lease's owner is known to be gone: a run of this process that ended, or a process of
    this host and pid namespace that no longer exists. Anything else may be alive: wait for expiry."""
    parts = owner.rsplit(":", 3)
    if len(parts) != 4 or _PID_NAMESPACE == "?" or not parts[2].isdigit():
        return False
    host, namespace, pid = parts[0], parts[1], int(parts[2])
    if host != socket.gethostname() or namespace != _PID_NAMESPACE:
        return False
    if pid == os.getpid():
        return owner not in _LIVE
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # it exists (another user's process): not ours to judge
    return False
    pid = int(parts[1])
    if pid == os.getpid():
        return owner not in _LIVE
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # it exists (another user's process): not ours to judge
    return False


async def _watch(cancel: asyncio.Event) -> None:
    await cancel.wait()
    raise _CancelRequested
