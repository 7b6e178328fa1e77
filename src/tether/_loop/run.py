"""A run in progress: the loop, read top to bottom.

Decide, act, write it down, repeat. :meth:`Run.events` asks the brain, commits
its reply, settles every call of the reply (run it, write a note, or wait for a
human: :func:`tether._loop.turn.plan`), and goes round again until the reply has no
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
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ..context import Context
from ..events import (
    TERMINAL,
    ApprovalDecided,
    Cancelled,
    ChildEvent,
    ChildStopped,
    Compacted,
    Event,
    Failed,
    Finished,
    HandedOff,
    LimitReached,
    ModelReplied,
    Paused,
    RunStarted,
    Token,
    ToolStarted,
)
from ..exceptions import LeaseConflict, ProviderError, StoreError, UserError
from ..journal import Journal
from ..leases import Holder, late
from ..messages import Message
from ..parts import check_notebook
from ..pending import child_run_id
from ..policy import ask, unique_call_ids
from ..state import RunState
from ..tools import Tool, missing_deps
from . import crash
from .answers import screened, text_ending
from .budgets import Budget, Parent, cost_of
from .calls import fit_result, run_call
from .children import child_input, child_output, finished_child, previous_notebook, settle
from .pausing import asks, reason_of
from .resuming import check_against_store, check_resumable, driver, resumed, shown, stored_journal
from .session import continue_session
from .settings import Input, Observer, Settings, Watcher, instructions_of, labels, model_of, require_deps
from .streams import CancelRequested, interleave
from .turn import Execute, Note, Step, Wait, asked_by, ended_by, plan

__all__ = ["Input", "Observer", "Parent", "Run", "Settings", "Watcher"]


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
        session: str | None = None,
        deps: Any = None,
    ) -> None:
        if session is not None and (input is None or isinstance(input, RunState)):
            raise UserError("session= starts a new run of the session: give a task (resume a run by its id or state)")
        self.session = session
        self.agent = agent  # the agent driving the run now (a handoff changes it)
        self.deps = deps  # handed to tools and dynamic instructions; never persisted
        self.root = agent
        self.fingerprint = agent.fingerprint
        self.input, self.prior, self.run_id = input, context, run_id
        self.cancel = cancel
        self.meta = labels(meta)
        self.parent = parent
        # A child run lives in its parent's store (or in memory with it) under its parent's key.
        self.store = parent.store if parent is not None else agent.store
        self.key = parent.key if parent is not None else agent.signing_key
        self.journal = Journal()
        self.budget = Budget(parent)
        self.holder = Holder(self.store, agent.lease_ttl) if self.store is not None else None
        self.ended = False
        self.limit: str | None = None
        self.lock = asyncio.Lock()
        self.fresh: RunStarted | None = None  # a stored run-started this segment begins with (see _load)
        self.failure: Failed | None = None  # the store failed: how the run ended, not committed
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
            if self.holder is not None:
                await self.holder.let_go()
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
            if not reply.tool_calls and (spec := self.agent.output) is not None:  # the answer must be typed
                yield await self.commit(spec.refusal())
                if over := spec.exhausted(self.journal.context):
                    yield await self.commit(over)
                continue
            if not reply.tool_calls:  # the answer, unless a validator sends it back
                for ev in text_ending(self.agent, self.journal, reply.text):
                    yield await self.commit(ev)
                continue
            async for ev in self._act():
                yield ev

    # -- start: new, resume, or load ---------------------------------------

    async def _start(self) -> list[Event]:
        self.budget.start_clock(self.agent)
        require_deps(self.agent, self.deps)
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
        self.ended = bool(missing_deps(self.agent.tool_list, self.deps))  # then nothing is committed
        require_deps(self.agent, self.deps)  # the agent driving a resumed run may be another (a handoff)
        out = [await self.commit(ev) for ev in first] or shown(self.fresh, self.watchers)
        self.budget.start_counting(self.agent, self.journal)
        return out

    async def _new(self, input: Input) -> RunStarted:
        if input is None:
            raise UserError("give the agent a task (a string or Message), a RunState, or a run_id")
        if self.session is not None:  # the notebook the session's last run left
            self.prior, more = await continue_session(self.store, self.session, self.agent.compactor, self.prior)
            self.meta = {**self.meta, **more}
        if self.run_id and self.store is not None and await self.store.get(self.run_id) is not None:
            raise UserError(f"run {self.run_id!r} already exists in the store; resume it with run_id= alone")
        run_id = self.run_id or uuid.uuid4().hex
        notes = list(self.prior or ()) or list(instructions_of(self.agent, run_id, self.deps))
        notes.append(input if isinstance(input, Message) else Message.user(str(input)))
        check_notebook(m.content for m in notes)
        return RunStarted(
            run_id, tuple(notes), False, self.fingerprint, self.agent.name, self.meta, model_of(self.agent)
        )

    async def _resume(self, state: RunState) -> list[Event]:
        check_resumable(state, self.fingerprint, self.key, trusted=False, child=self.parent is not None)
        stored = await check_against_store(self.store, state) if self.store is not None else None
        self.agent = driver(state, self.agent, self.root)
        self.journal = Journal.from_state(state)
        if stored is not None:  # a state keeps the total usage only; the store knows it per model
            self.journal.usage_by_model = stored.usage_by_model
        return [resumed(state.run_id, self.fingerprint, self.agent), *(ApprovalDecided(d) for d in state.decisions)]

    async def _load(self) -> list[Event]:
        assert self.run_id is not None
        journal, self.fresh = await stored_journal(self.store, self.run_id)
        state = journal.snapshot()
        check_resumable(state, self.fingerprint, self.key, trusted=True, child=self.parent is not None)
        self.agent = driver(state, self.agent, self.root)
        self.journal = journal  # a store's journal already holds its decisions
        return [] if self.fresh is not None else [resumed(journal.run_id, self.fingerprint, self.agent)]

    async def _hold(self, run_id: str) -> None:
        """Take the run's lease (with a store) and keep renewing it while the run streams."""
        if self.holder is not None:
            await self.holder.take(run_id)

    # -- commit: the one durability rule -----------------------------------

    async def commit(self, ev: Event) -> Event:
        """Stamp ``ev`` with the time, write it to the store (if any), then fold it into the journal."""
        if not ev.at:  # the loop made it a moment ago and nobody has seen it yet
            object.__setattr__(ev, "at", time.time())
        if crash.armed:
            crash.crash_around("before", ev.kind)
        async with self.lock:
            ev = fit_result(ev, self.journal)  # a tool's images and files: within the notebook's cap
            if self.store is not None:
                await self._write(ev)
            self._apply(ev)
        for w in self.watchers:
            w.event(ev)
        if crash.armed:
            crash.crash_around("after", ev.kind)
        return ev

    async def _write(self, ev: Event) -> None:
        assert self.store is not None
        run_id = ev.run_id if isinstance(ev, RunStarted) else self.journal.run_id
        expected, lease = self.journal.seq, self.holder.lease if self.holder is not None else None
        try:
            if self.holder is not None and self.holder.expired():
                raise self.holder.conflict()  # frozen past its lease: another worker may own the run now
            await self.store.append(run_id, [ev], expected_seq=expected, lease=lease)
        except asyncio.CancelledError:
            # Cancelled mid-write: learn whether it landed, so the journal matches the store.
            info = await self.store.get(run_id)
            if info is not None and info.seq > expected:
                self._apply(ev)
            raise
        except StoreError as exc:
            self.ended = True  # the journal can no longer be trusted to advance
            if isinstance(exc, LeaseConflict) or not self.journal.run_id:
                late(run_id, ev, exc)  # a tool's result after the run was lost: logged, never reported
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
        pieces = ask(self.agent.policy, self.journal.context, self.agent.tool_list, self.journal.run_id)
        try:
            while True:
                try:
                    if (deadline := self.budget.deadline) is None:
                        piece = await anext(pieces)
                    else:
                        async with asyncio.timeout_at(deadline):
                            piece = await anext(pieces)
                except StopAsyncIteration:
                    return
                yield Token(piece) if isinstance(piece, str) else unique_call_ids(piece, self.journal.call_ids)
        except ProviderError as exc:
            yield Failed(str(exc), "ProviderError")
        except TimeoutError:
            if not self.budget.out_of_time():
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
        spec = self.agent.output
        if spec is not None and spec.noted(steps) and (over := spec.exhausted(self.journal.context)):
            yield await self.commit(over)  # the model used up its tries at the output
            return
        todo = [s for s in steps if isinstance(s, Execute)]
        if todo:
            if stop := self._over_budget(new_calls=sum(s.attempt == 1 for s in todo), in_turn=True):
                yield await self.commit(stop)
                return
            by = self.holder.owner if self.holder is not None else ""  # who may still be inside a call that stalls
            for step in todo:
                yield await self.commit(ToolStarted(step.call, step.attempt, by=by))
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
        if why := missing_deps(target.tool_list, self.deps):
            raise UserError(f"run {self.journal.run_id!r} cannot hand off to {target.name!r}: {why}")
        notes = instructions_of(target, self.journal.run_id, self.deps)
        ev = await self.commit(HandedOff(target.name, notes, model_of(target)))
        self.agent = target
        return ev

    def _transfer(self) -> Settings | None:
        """The agent a transfer of the turn that just ended hands the run to (the first one wins)."""
        if not self.agent.ends_turns or (ended := ended_by(self.journal.context, self.agent.tools, "handoff")) is None:
            return None
        target: Settings = ended[0].handoff
        return target

    def _plan(self) -> list[Step]:
        j, agent = self.journal, self.agent
        ctx = j.context

        approvers = (*(self.parent.approvers if self.parent else ()), *((agent.approver,) if agent.approver else ()))

        def gate(tool: Tool, args: dict[str, Any]) -> bool | str:  # the tool's gate, then every approver up the tree
            return tool.needs_approval(args, ctx) or (approvers != () and asked_by(approvers, tool, args, ctx))

        steps = [plan(p, agent.tools, j.decisions.get(p.call.id), gate) for p in j.pending.values()]
        return screened(agent, j, steps) if agent.output_validators else steps  # validators see the journal

    async def _pause(self, waits: list[Wait]) -> list[Event]:
        """Ask for what the turn waits for, then pause with every open item of the run tree."""
        out = [await self.commit(ev) for ev in asks(self.journal, waits)]
        items = self.journal.snapshot().items()
        reason = reason_of(items)
        state = self._stamped(self.journal.snapshot(pausing=reason))
        out.append(await self.commit(Paused(reason, tuple(i.id for i in items), state)))
        return out

    async def _execute(self, todo: list[Execute]) -> AsyncIterator[Event]:
        """Run the calls (concurrently when several); each result is committed and yielded as it lands."""
        if len(todo) == 1 and self.cancel is None:
            async for ev in self._call(todo[0]):
                yield ev
            return
        try:
            async for ev in interleave([self._call(step) for step in todo], self.cancel):
                yield ev
        except CancelRequested:
            if not self.ended:
                yield await self.commit(Cancelled("cancel requested"))

    async def _call(self, step: Execute) -> AsyncIterator[Event]:
        if step.tool.agent is not None:
            async for ev in self._delegate(step):
                yield ev
        else:
            yield await self._run_tool(step)

    async def _run_tool(self, step: Execute) -> Event:
        """Run one tool call; what it returned (or how it failed) is committed as its result."""
        call = run_call(step, self.journal.run_id, self.budget.deadline, self.deps)
        return await self.commit(await (call if self.holder is None else self.holder.guard(call)))

    # -- runs inside runs --------------------------------------------------

    async def _delegate(self, step: Execute) -> AsyncIterator[Event]:
        """Run (or resume) the call's child run; its events show here, its ending settles the call."""
        child_agent: Settings = step.tool.agent
        call = step.call
        child_id = child_run_id(self.journal.run_id, call.id)
        if (finished := await finished_child(self.store, child_id)) is not None:  # then its parent was killed
            yield await self.commit(settle(call, child_agent.name, finished, child_output(child_agent, finished)))
            return
        task = await child_input(self.journal, self.store, child_id, str(step.args.get("task", "")), call.id)
        prior = None
        if isinstance(task, str) and step.tool.continues:
            prior = await previous_notebook(self.journal, self.store, self._notebooks, step.tool.name, call.id)
        left = self.budget.left(self.agent, self.journal, call.id, self.store, self.key)
        # A child run gets its parent's deps: the same application asks, for the same user.
        child = Run(child_agent, task, context=prior, run_id=child_id, cancel=self.cancel, parent=left, deps=self.deps)
        try:
            async for ev in child.events():
                yield ChildEvent(call.id, child_agent.name, ev)
        except asyncio.CancelledError:
            with contextlib.suppress(StoreError, OSError):  # keep the child's state with the parent's
                await self.commit(ChildStopped(call.id, child.snapshot()))
            raise
        if child.journal.status == "finished" and step.tool.continues:
            self._notebooks[child_id] = child.journal.context  # the next call of this tool goes on from here
        ended = child.snapshot()
        yield await self.commit(settle(call, child_agent.name, ended, child_output(child_agent, ended)))

    # -- budgets and answers -----------------------------------------------

    def _over_budget(self, new_calls: int = 0, *, in_turn: bool = False) -> Event | None:
        if self.cancel is not None and self.cancel.is_set():
            return Cancelled("cancel requested")
        return self.budget.over(self.agent, self.journal, new_calls, in_turn=in_turn)

    def _committed_output(self) -> str | None:
        """A final answer or terminal tool result already in the notebook (then the run is done)."""
        last = self.journal.context.last()
        if last is not None and last.role == "assistant" and not last.tool_calls:
            return last.text if self.agent.output is None else None  # typed: a text reply is no answer
        return self._terminal_output()

    def _terminal_output(self) -> str | None:
        """The result of the first terminal tool of the turn that just ended, if any."""
        if not self.agent.ends_turns or (ended := ended_by(self.journal.context, self.agent.tools, "terminal")) is None:
            return None
        return ended[1]

    def cost(self) -> float | None:
        """What the run's replies cost so far in US dollars (None when a model has no price)."""
        return cost_of(self.agent, self.journal)

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


class _StoreDown(Exception):
    """The store refused a commit: the run stops where its store says it is."""
