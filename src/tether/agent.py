"""The Agent and its loop: decide, act, write it down, repeat.

:meth:`Agent.stream` is the loop, written once as an async generator of
:mod:`~tether.events`. Every committed event is folded into the run's
:class:`~tether.state.Journal` and, when a store is given, written to it
*before* the loop moves on: the model's reply before any of its tools run, a
``tool-started`` before a tool's first side effect, a ``tool-finished`` before
the next model call. :meth:`Agent.run` and :meth:`Agent.run_sync` drain the same
generator.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import inspect
import json
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._crash import crash_point
from .context import Context
from .events import (
    TERMINAL,
    ApprovalDecided,
    ApprovalRequested,
    Cancelled,
    Compacted,
    ErrorKind,
    Event,
    Failed,
    Finished,
    LimitReached,
    ModelReplied,
    Paused,
    RunStarted,
    Token,
    ToolFinished,
    ToolStarted,
)
from .exceptions import ProviderError, StateError, StateIncompatible, StoreError, UserError
from .messages import Message, ToolCall, Usage
from .policy import Policy, ask
from .state import Journal, PendingCall, RunState, Status, args_hash
from .tools import ArgumentsInvalid, Invocation, Tool, ToolTimedOut, result_text

if TYPE_CHECKING:
    from .stores import RunStore

Approver = Callable[[Tool, dict[str, Any], Context], bool]


@dataclass(frozen=True)
class RunResult:
    """How a run ended: ``status``, ``output`` (the answer), the notebook and a resumable state."""

    status: Status
    output: str | None
    context: Context
    state: RunState
    usage: Usage
    events: tuple[Event, ...] = field(repr=False)
    limit: str | None = None
    error: str | None = None

    @property
    def run_id(self) -> str:
        return self.state.run_id

    @property
    def pending(self) -> tuple[PendingCall, ...]:
        """Calls waiting for a human decision (when paused)."""
        return self.state.pending


class Agent:
    """An assistant that keeps working until the job is done.

    >>> from tether.testing import ScriptedModel, Action
    >>> @tool(effect="none")
    ... def add(a: int, b: int) -> int:
    ...     return a + b
    >>> agent = Agent(ScriptedModel([Action("add", {"a": 2, "b": 3}), "5"]), [add])
    >>> agent.run_sync("2 + 3?").output
    '5'
    """

    def __init__(
        self,
        policy: Policy,
        tools: Sequence[Tool] = (),
        *,
        instructions: str | None = None,
        name: str = "agent",
        max_steps: int = 20,
        max_tool_calls: int | None = None,
        max_tokens: int | None = None,
        max_seconds: float | None = None,
        store: RunStore | None = None,
        signing_key: bytes | None = None,
        approver: Approver | None = None,
        compactor: Callable[[Context], Context] | None = None,
    ) -> None:
        if not callable(getattr(policy, "decide", None)):
            raise UserError(f"policy {policy!r} has no decide(context, tools) method")
        _check_limits(max_steps, max_tool_calls, max_tokens, max_seconds)
        if signing_key is not None and not (isinstance(signing_key, bytes) and len(signing_key) >= 16):
            raise UserError("signing_key must be at least 16 random bytes (e.g. secrets.token_bytes(32))")
        self.policy = policy
        self.tools: dict[str, Tool] = {}
        for t in tools:
            if not isinstance(t, Tool):
                raise UserError(f"tools must be Tool values (use @tool), got {t!r}")
            if t.name in self.tools:
                raise UserError(f"two tools are named {t.name!r}")
            self.tools[t.name] = t
        self.tool_list = tuple(self.tools.values())
        self.instructions = instructions
        self.name = name
        self.max_steps = max_steps
        self.max_tool_calls = max_tool_calls
        self.max_tokens = max_tokens
        self.max_seconds = max_seconds
        self.store = store
        self.signing_key = signing_key
        self.approver = approver
        self.compactor = compactor
        self.fingerprint = hashlib.sha256(
            ",".join(sorted(f"{t.name}:{t.fingerprint()}" for t in self.tool_list)).encode()
        ).hexdigest()[:16]

    # -- entry points ------------------------------------------------------

    def stream(
        self,
        input: str | Message | RunState | None = None,
        *,
        context: Context | None = None,
        run_id: str | None = None,
        cancel: asyncio.Event | None = None,
    ) -> AsyncIterator[Event]:
        """Run the loop, yielding each event as it happens.

        ``input`` is a task (a new run, continuing ``context`` if given) or a
        :class:`RunState` to resume. With only ``run_id``, the run is loaded
        from the agent's store and resumed. Setting ``cancel`` ends the run at
        the next step with a ``cancelled`` event, cancelling running tools.
        """
        return self._drive(_Run(self, input, context, run_id, cancel))

    async def run(
        self,
        input: str | Message | RunState | None = None,
        *,
        context: Context | None = None,
        run_id: str | None = None,
        cancel: asyncio.Event | None = None,
    ) -> RunResult:
        """Run to the end (or a pause) and return the :class:`RunResult`."""
        run = _Run(self, input, context, run_id, cancel)
        events = [ev async for ev in self._drive(run)]
        return run.result(events)

    def run_sync(
        self,
        input: str | Message | RunState | None = None,
        *,
        context: Context | None = None,
        run_id: str | None = None,
    ) -> RunResult:
        """:meth:`run` for synchronous code (starts its own event loop)."""
        return asyncio.run(self.run(input, context=context, run_id=run_id))

    def as_tool(self, name: str | None = None, description: str | None = None, **contract: Any) -> Tool:
        """This agent as a tool another agent can call with a ``task`` string."""
        from .tools import tool

        async def delegate(task: str) -> str:
            result = await self.run(task)
            if result.status != "finished":
                raise RuntimeError(f"sub-agent {self.name!r} stopped with status {result.status!r}")
            return result.output or ""

        delegate.__doc__ = (
            f"{description or f'Ask the {self.name} agent to do a task.'}\n\n"
            "Args:\n    task: what the agent should do, in plain words."
        )
        contract.setdefault("effect", "once")
        return tool(name=name or self.name, **contract)(delegate)

    # -- the loop ------------------------------------------------------------

    async def _drive(self, run: _Run) -> AsyncIterator[Event]:
        try:
            async for ev in self._loop(run):
                yield ev
        except asyncio.CancelledError:
            await run.end(Cancelled("the task running the agent was cancelled"))
            raise
        except Exception as exc:
            await run.end(Failed(f"{type(exc).__name__}: {exc}", type(exc).__name__))
            raise
        finally:
            # The consumer stopped early (aclose): say so in the journal.
            await run.end(Cancelled("the event stream was closed"))

    async def _loop(self, run: _Run) -> AsyncIterator[Event]:
        for ev in await run.start():
            yield ev
        if run.journal.pending:  # resumed in the middle of a turn
            async for ev in self._act(run):
                yield ev
        elif (output := self._committed_output(run)) is not None:
            # Resumed after the answer was committed but before the run was marked finished.
            yield await run.commit(Finished(output, run.journal.usage))
            crash_point("after_run_complete")
            return
        while not run.ended:
            if stop := run.check_budget():
                yield await run.commit(stop)
                return
            if self.compactor is not None:
                ctx = run.journal.context
                shorter = self.compactor(ctx)
                if shorter is not ctx and shorter != ctx:
                    yield await run.commit(Compacted(shorter.messages))
            message = None
            try:
                async for piece in run.ask():
                    if isinstance(piece, str):
                        yield Token(piece)
                    else:
                        message = piece
            except ProviderError as exc:
                yield await run.commit(Failed(str(exc), "ProviderError"))
                return
            except TimeoutError:
                if not run.out_of_time():
                    raise  # the policy's own timeout: a failure, not our budget
                yield await run.commit(LimitReached("seconds", self.max_seconds or 0))
                return
            assert message is not None
            message = _unique_call_ids(message, run.journal.call_ids)
            crash_point("after_model_response")
            yield await run.commit(ModelReplied(message))
            crash_point("after_proposed_commit")
            if not message.tool_calls:
                yield await run.commit(Finished(message.content, run.journal.usage))
                crash_point("after_run_complete")
                return
            async for ev in self._act(run):
                yield ev

    async def _act(self, run: _Run) -> AsyncIterator[Event]:
        """Settle every open call of the turn: note, run, or wait for a human."""
        plans = [self._plan(run, p) for p in run.journal.pending.values()]
        for plan in plans:
            if plan.note is not None:
                yield await run.commit(plan.note)
        todo = [p for p in plans if p.tool is not None]
        if todo:
            if stop := run.check_budget(new_calls=sum(p.attempt == 1 for p in todo), in_turn=True):
                yield await run.commit(stop)
                return
            for plan in todo:
                crash_point("before_started_commit")
                yield await run.commit(ToolStarted(plan.call, plan.attempt))
                crash_point("after_started_commit")
            for ev in await self._execute(run, todo):
                yield ev
            if run.ended:
                return
        waits = [p for p in plans if p.wait is not None]
        if waits:
            for plan in waits:
                if plan.wait == "approval" and run.journal.pending[plan.call.id].status == "proposed":
                    yield await run.commit(ApprovalRequested(plan.call, args_hash(plan.call.arguments)))
            unknown = any(p.wait == "outcome-unknown" for p in waits)
            reason = "outcome-unknown" if unknown else "approval"
            ids = tuple(p.call.id for p in waits)
            crash_point("mid_state_serialize")
            status: Status = "needs-decision" if unknown else "paused"
            yield await run.commit(Paused(reason, ids, run.snapshot(pausing=status).to_dict()))
            return
        if (output := self._terminal_output(run)) is not None:
            yield await run.commit(Finished(output, run.journal.usage))
            crash_point("after_run_complete")

    def _plan(self, run: _Run, pending: PendingCall) -> _Plan:
        """Decide what to do with one open call, without side effects."""
        call = pending.call
        tool = self.tools.get(call.name)
        if tool is None:
            names = ", ".join(sorted(self.tools)) or "(none)"
            return _note(call, f"unknown tool {call.name!r}; available tools: {names}", "unknown-tool")
        parsed = _parse_args(call, tool)
        if isinstance(parsed, _Plan):
            return parsed
        raw, args = parsed
        decision = run.journal.decisions.get(call.id)
        attempt = pending.attempts + 1
        if pending.status == "started":
            # Interrupted mid-call. ``call`` holds the arguments it was started with.
            if tool.effect != "once":
                return _Plan(call, tool, args, attempt)
            if decision is None or decision.verdict not in ("retry", "skip"):
                return _Plan(call, wait="outcome-unknown")  # the world may or may not have changed
            if decision.verdict == "skip":
                text = "this call was interrupted and its outcome is unknown; a human chose not to run it again"
                return _note(call, f"{text}: {decision.message}" if decision.message else text, "skipped")
            return _Plan(call, tool, args, attempt)
        ctx = run.journal.context
        gated = (
            pending.status == "awaiting-approval"  # asked once: this agent's gates cannot waive it
            or tool.needs_approval(raw, ctx)
            or bool(self.approver and self.approver(tool, raw, ctx))
        )
        if not gated:
            return _Plan(call, tool, args, attempt)
        if decision is None:
            return _Plan(call, wait="approval")
        if decision.verdict != "approve":
            text = "a human denied this call"
            return _note(call, f"{text}: {decision.message}" if decision.message else text, "denied")
        if decision.args is None:
            return _Plan(call, tool, args, attempt)
        try:
            args = tool.validate(decision.args)
        except ArgumentsInvalid as exc:
            raise StateError(f"the edited arguments for call {call.id!r} are invalid: {exc}") from None
        edited = json.dumps(decision.args, sort_keys=True, ensure_ascii=False)
        # The started call records the edited arguments, so a re-run after a crash uses them too.
        return _Plan(
            ToolCall(call.id, call.name, edited),
            tool,
            args,
            attempt,
            prefix=f"(a human edited the arguments to {edited})\n",
        )

    async def _execute(self, run: _Run, todo: list[_Plan]) -> list[Event]:
        """Run the calls (concurrently when several); each result is committed as it lands."""
        if len(todo) == 1 and run.cancel is None:
            return [await self._call(run, todo[0])]
        done: list[Event] = []

        async def one(plan: _Plan) -> None:
            done.append(await self._call(run, plan))

        try:
            async with asyncio.TaskGroup() as tg:
                calls = [tg.create_task(one(plan)) for plan in todo]
                if run.cancel is not None:
                    watcher = tg.create_task(_watch(run.cancel))
                    await asyncio.wait(calls)
                    watcher.cancel()
        except BaseExceptionGroup as group:
            real = group.subgroup(lambda e: not isinstance(e, _CancelRequested | BaseExceptionGroup))
            if real is not None:
                raise real.exceptions[0] from None
            if not run.ended:
                done.append(await run.commit(Cancelled("cancel requested")))
        return done

    async def _call(self, run: _Run, plan: _Plan) -> Event:
        assert plan.tool is not None and plan.args is not None
        tool, call = plan.tool, plan.call
        invocation = Invocation(run.journal.run_id, call.id, tool.name)
        error: ErrorKind | None = None
        budget = asyncio.timeout_at(run.deadline)
        unknown = "" if inspect.iscoroutinefunction(tool.fn) else "; it runs in a thread and may still finish"
        try:
            async with budget:
                value = await tool.invoke(plan.args, invocation)
            text = result_text(value)
        except ToolTimedOut as exc:
            text, error = f"{exc}{unknown}", "timeout"
        except TimeoutError as exc:
            if not budget.expired():  # the tool's own timeout error, not one of ours
                text, error = f"tool {tool.name!r} failed: TimeoutError: {exc}", "raised"
            else:
                text, error = f"tool {tool.name!r} was stopped: the run's time budget ran out{unknown}", "timeout"
        except Exception as exc:
            text, error = f"tool {tool.name!r} failed: {type(exc).__name__}: {exc}", "raised"
        crash_point("after_tool_return")
        result = Message.tool_result(call.id, plan.prefix + text, name=tool.name, is_error=error is not None)
        ev = await run.commit(ToolFinished(result, error))
        crash_point("after_result_commit")
        return ev

    def _committed_output(self, run: _Run) -> str | None:
        """A final answer or terminal tool result already in the notebook (then the run is done)."""
        last = run.journal.context.last()
        if last is not None and last.role == "assistant" and not last.tool_calls:
            return last.content
        return self._terminal_output(run)

    def _terminal_output(self, run: _Run) -> str | None:
        """The result of the first terminal tool of the turn that just ended, if any."""
        ctx = run.journal.context
        results: dict[str | None, Message] = {}
        i = len(ctx) - 1
        while i >= 0 and ctx[i].role == "tool":
            results[ctx[i].tool_call_id] = ctx[i]
            i -= 1
        for call in ctx[i].tool_calls if i >= 0 else ():
            tool, res = self.tools.get(call.name), results.get(call.id)
            if tool is not None and tool.terminal and res is not None and not res.is_error:
                return res.content
        return None


def _check_limits(steps: Any, tool_calls: Any, tokens: Any, seconds: Any) -> None:
    def positive_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v > 0

    if not positive_int(steps):
        raise UserError(f"max_steps must be a positive integer, got {steps!r}")
    for name, v in (("max_tool_calls", tool_calls), ("max_tokens", tokens)):
        if v is not None and not positive_int(v):
            raise UserError(f"{name} must be a positive integer or None, got {v!r}")
    if seconds is not None and not (isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds > 0):
        raise UserError(f"max_seconds must be a positive number or None, got {seconds!r}")


@dataclass(frozen=True, slots=True)
class _Plan:
    call: ToolCall
    tool: Tool | None = None
    args: dict[str, Any] | None = None
    attempt: int = 1
    prefix: str = ""
    note: ToolFinished | None = None
    wait: str | None = None


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


def _parse_args(call: ToolCall, tool: Tool) -> tuple[dict[str, Any], dict[str, Any]] | _Plan:
    """The call's raw and validated arguments, or a note telling the model what is wrong."""
    try:
        raw = json.loads(call.arguments or "{}")
        if not isinstance(raw, dict):
            raise ValueError(f"expected a JSON object, got {type(raw).__name__}")
    except (ValueError, RecursionError) as exc:
        schema = json.dumps(tool.parameters, sort_keys=True)
        text = f"arguments for tool {call.name!r} are not a JSON object ({exc}); "
        return _note(call, f"{text}send an object matching this schema: {schema}", "bad-json")
    try:
        return raw, tool.validate(raw)
    except ArgumentsInvalid as exc:
        return _note(call, str(exc), "invalid-arguments")


def _note(call: ToolCall, text: str, kind: ErrorKind) -> _Plan:
    result = Message.tool_result(call.id, text, name=call.name, is_error=True)
    return _Plan(call, note=ToolFinished(result, kind))


class _CancelRequested(Exception):
    pass


async def _watch(cancel: asyncio.Event) -> None:
    await cancel.wait()
    raise _CancelRequested


class _Run:
    """One run in progress: its journal, its store, its budgets."""

    def __init__(
        self,
        agent: Agent,
        input: str | Message | RunState | None,
        context: Context | None,
        run_id: str | None,
        cancel: asyncio.Event | None,
    ) -> None:
        self.agent = agent
        self.input, self.prior, self.run_id = input, context, run_id
        self.cancel = cancel
        self.store = agent.store
        self.journal = Journal()
        self.ended = False
        self.limit: str | None = None
        self.lock = asyncio.Lock()
        self.deadline: float | None = None

    async def start(self) -> list[Event]:
        agent, input = self.agent, self.input
        from_store = False
        if agent.max_seconds is not None:
            self.deadline = asyncio.get_running_loop().time() + agent.max_seconds
        if input is None and self.run_id is not None:
            if self.store is None:
                raise UserError("resuming by run_id needs an agent with a store")
            events = await self.store.load(self.run_id)
            if not events:
                raise StateError(f"no run {self.run_id!r} in the store")
            journal = Journal()
            for ev in events:
                journal.apply(ev)
            if journal.closed:
                raise StateError(f"run {self.run_id!r} was cancelled for good and cannot be resumed")
            input, from_store = journal.snapshot(), True
            self._check_resumable(input, trusted=True)
            self.journal = journal
        elif isinstance(input, RunState):
            self._check_resumable(input, trusted=False)
        if isinstance(input, RunState):
            first: list[Event] = [RunStarted(input.run_id, (), True, agent.fingerprint)]
            if not from_store:  # a store's journal already holds its decisions
                self.journal = Journal.from_state(input)
                first += [ApprovalDecided(d.to_dict()) for d in input.decisions]
        else:
            if input is None:
                raise UserError("give the agent a task (a string or Message), a RunState, or a run_id")
            notes = list(self.prior or ())
            if not notes and agent.instructions:
                notes.append(Message.system(agent.instructions))
            notes.append(input if isinstance(input, Message) else Message.user(str(input)))
            run_id = self.run_id or uuid.uuid4().hex
            if self.run_id and self.store is not None and await self.store.get(run_id) is not None:
                raise UserError(f"run {run_id!r} already exists in the store; resume it with run_id= alone")
            first = [RunStarted(run_id, tuple(notes), False, agent.fingerprint)]
        out = [await self.commit(ev) for ev in first]
        if len(first) > 1:
            crash_point("after_approval_commit")
        return out

    def _check_resumable(self, state: RunState, *, trusted: bool) -> None:
        if state.fingerprint != self.agent.fingerprint:
            raise StateIncompatible(
                f"run {state.run_id!r} was paused with other tool definitions "
                f"(fingerprint {state.fingerprint!r}, this agent has {self.agent.fingerprint!r})"
            )
        if state.status == "finished" or (state.status == "running" and not trusted):
            raise StateError(f"run {state.run_id!r} is {state.status!r} and cannot be resumed")
        key = self.agent.signing_key
        if key is not None:
            if trusted:  # loaded from our own store; decisions still need signatures
                for d in state.decisions:
                    d.verify(key)
            else:
                state.verify(key)
        state.check_decisions()

    async def commit(self, ev: Event) -> Event:
        """Write ``ev`` to the store (if any), then fold it into the journal."""
        async with self.lock:
            if self.store is not None:
                await self._write(ev)
            self._apply(ev)
        return ev

    async def _write(self, ev: Event) -> None:
        assert self.store is not None
        run_id = ev.run_id if isinstance(ev, RunStarted) else self.journal.run_id
        expected = self.journal.seq
        try:
            await self.store.append(run_id, [ev], expected_seq=expected)
        except asyncio.CancelledError:
            # Cancelled mid-write: learn whether it landed, so the journal matches the store.
            info = await self.store.get(run_id)
            if info is not None and info.seq > expected:
                self._apply(ev)
            raise
        except BaseException:
            self.ended = True  # the journal can no longer be trusted to advance
            raise

    def _apply(self, ev: Event) -> None:
        self.journal.apply(ev)
        if ev.kind in TERMINAL:
            self.ended = True
            if isinstance(ev, LimitReached):
                self.limit = ev.limit

    async def end(self, ev: Event) -> None:
        """Commit a closing event unless the run has already ended."""
        if not self.ended and self.journal.run_id:
            with contextlib.suppress(StoreError, OSError):  # the original error matters more
                await self.commit(ev)

    async def ask(self) -> AsyncIterator[str | Message]:
        """The policy's reply as pieces, each bounded by the run's time budget."""
        pieces = ask(self.agent.policy, self.journal.context, self.agent.tool_list)
        if self.deadline is None:
            async for piece in pieces:
                yield piece
            return
        while True:
            async with asyncio.timeout_at(self.deadline):  # never spans a yield
                try:
                    piece = await anext(pieces)
                except StopAsyncIteration:
                    return
            yield piece

    def out_of_time(self) -> bool:
        return self.deadline is not None and asyncio.get_running_loop().time() >= self.deadline

    def check_budget(self, new_calls: int = 0, *, in_turn: bool = False) -> Event | None:
        agent, j = self.agent, self.journal
        if self.cancel is not None and self.cancel.is_set():
            return Cancelled("cancel requested")
        if self.out_of_time():
            return LimitReached("seconds", agent.max_seconds or 0)
        if not in_turn and j.steps >= agent.max_steps:
            return LimitReached("steps", agent.max_steps)
        if agent.max_tokens is not None and j.usage.total_tokens >= agent.max_tokens:
            return LimitReached("tokens", agent.max_tokens)
        if agent.max_tool_calls is not None and j.tool_calls + new_calls > agent.max_tool_calls:
            return LimitReached("tool_calls", agent.max_tool_calls)
        return None

    def snapshot(self, pausing: Status | None = None) -> RunState:
        state = self.journal.snapshot(pausing)
        return state.sign(self.agent.signing_key) if self.agent.signing_key else state

    def result(self, events: list[Event]) -> RunResult:
        j = self.journal
        last = events[-1] if events else None
        return RunResult(
            status=j.status,
            output=last.output if isinstance(last, Finished) else None,
            context=j.context,
            state=self.snapshot(),
            usage=j.usage,
            events=tuple(events),
            limit=self.limit,
            error=last.error if isinstance(last, Failed) else None,
        )
