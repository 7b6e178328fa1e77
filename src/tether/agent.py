"""The Agent: an assistant that keeps working until the job is done.

An :class:`Agent` holds a brain (a :class:`~tether.policy.Policy`), tools,
instructions, limits and, optionally, a store and a signing key. Its entry
points all drive one loop, :class:`~tether.run.Run`: :meth:`Agent.stream` yields
the run's :mod:`~tether.events` as they happen, :meth:`Agent.run` and
:meth:`Agent.run_sync` drain the same stream into a :class:`RunResult`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .context import Context
from .cost import Price, price_of
from .events import Event, Failed, Finished
from .exceptions import UserError
from .journal import state_of
from .messages import Message, Usage
from .output import OutputSpec
from .policy import Policy
from .run import Observer, Run
from .state import PendingCall, RunState, Status
from .store import RunStore
from .tools import Invocation, Tool, tool

__all__ = ["Agent", "Approver", "RunResult"]

Approver = Callable[[Tool, dict[str, Any], Context], bool]
"""An agent-wide gate: ``approver(tool, args, context)`` returns True to ask a human."""


@dataclass(frozen=True)
class RunResult:
    """How a run ended: ``status``, ``output`` (the answer), the notebook and a resumable state.

    ``output`` is the final text, or with ``Agent(output_type=T)`` the ``T`` instance.

    ``usage`` adds up every reply of the run (across resumes); ``cost`` is what
    it cost in US dollars (:mod:`tether.cost`), or None when a model has no price.
    """

    status: Status
    output: Any
    context: Context
    state: RunState
    usage: Usage
    events: tuple[Event, ...] = field(repr=False)
    limit: str | None = None
    error: str | None = None
    cost: float | None = None

    @property
    def run_id(self) -> str:
        return self.state.run_id

    @property
    def pending(self) -> tuple[PendingCall, ...]:
        """Every item waiting for a person (when paused), in child runs too, each with its path."""
        return self.state.items()

    @classmethod
    def of(cls, run: Run, events: list[Event]) -> RunResult:
        """The result of ``run`` once its stream of ``events`` is drained."""
        last = events[-1] if events else None
        state = run.snapshot()
        output = last.output if isinstance(last, Finished) else None
        if output is not None and (spec := run.agent.output) is not None and spec.answer_in(state.messages) == output:
            output = spec.load(output)  # the typed value, rebuilt from the JSON the journal keeps
        return cls(
            status=state.status,
            output=output,
            context=run.journal.context,
            state=state,
            usage=state.total_usage,
            events=tuple(events),
            limit=run.limit,
            error=last.error if isinstance(last, Failed) else None,
            cost=run.cost(),
        )


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
        instructions: str | Callable[[Invocation[Any]], str] | None = None,
        name: str = "agent",
        max_steps: int = 20,
        max_tool_calls: int | None = None,
        max_tokens: int | None = None,
        max_seconds: float | None = None,
        max_cost: float | None = None,
        prices: Mapping[str, Price] | None = None,
        store: RunStore | None = None,
        signing_key: bytes | None = None,
        approver: Approver | None = None,
        compactor: Callable[[Context], Context] | None = None,
        lease_ttl: float = 30.0,
        handoffs: Sequence[Agent] = (),
        description: str | None = None,
        observers: Sequence[Observer] = (),
        output_type: Any = None,
        output_retries: int = 2,
    ) -> None:
        if not callable(getattr(policy, "decide", None)):
            raise UserError(f"policy {policy!r} has no decide(context, tools) method")
        _check_limits(max_steps, max_tool_calls, max_tokens, max_seconds)
        self.prices: Mapping[str, Price] = dict(prices or {})
        _check_cost(max_cost, policy, self.prices)
        if not (isinstance(lease_ttl, int | float) and not isinstance(lease_ttl, bool) and lease_ttl > 0):
            raise UserError(f"lease_ttl must be a positive number of seconds, got {lease_ttl!r}")
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
        # With an output type the run ends by its terminal tool, whose parameters are the type's schema.
        self.output = OutputSpec(output_type, output_retries) if output_type is not None else None
        if self.output is not None:
            if self.output.name in self.tools:
                raise UserError(f"a tool is named {self.output.name!r}, which an agent with an output type reserves")
            self.tools[self.output.name] = self.output.tool
        self.tool_list = tuple(self.tools.values())
        self.instructions = instructions
        self.name = name
        self.description = description
        self.handoffs: tuple[Agent, ...] = ()
        self.hand_off_to(*handoffs)
        self.max_steps = max_steps
        self.max_tool_calls = max_tool_calls
        self.max_tokens = max_tokens
        self.max_seconds = max_seconds
        self.max_cost = max_cost
        self.store = store
        self.signing_key = signing_key
        self.approver = approver
        self.compactor = compactor
        self.lease_ttl = float(lease_ttl)
        self.observers: tuple[Observer, ...] = tuple(observers)
        if bad := [o for o in self.observers if not callable(getattr(o, "watch", None))]:
            raise UserError(f"observers must have a watch(agent) method (e.g. tether.telemetry.Tracing), got {bad!r}")

    @property
    def fingerprint(self) -> str:
        """A hash of the tool definitions of this agent and of every agent it can hand off to."""
        seen: dict[str, Agent] = {}
        todo: list[Agent] = [self]
        while todo:
            agent = todo.pop()
            if agent.name not in seen:
                seen[agent.name] = agent
                todo.extend(agent.handoffs)
        parts = [
            f"{name}/{t.name}:{t.fingerprint()}" if name != self.name else f"{t.name}:{t.fingerprint()}"
            for name, agent in seen.items()
            for t in agent.tool_list
        ]
        return hashlib.sha256(",".join(sorted(parts)).encode()).hexdigest()[:16]

    def hand_off_to(self, *agents: Agent) -> None:
        """Let this agent hand the run over to ``agents`` (``transfer_to_<name>`` tools).

        A transfer switches which agent drives the same run: same notebook (the
        new agent's instructions are added as a system note), same journal and
        budgets; a paused run resumes with the agent that was driving it. Use
        this method for handoffs that go both ways (``billing.hand_off_to(support)``).
        """
        for agent in agents:
            if not isinstance(agent, Agent):
                raise UserError(f"handoffs must be Agent values, got {agent!r}")
            if any(a.name == agent.name for a in self.handoffs) or agent.name == self.name:
                raise UserError(f"agent {self.name!r} already hands off to an agent named {agent.name!r}")
            transfer = _transfer_tool(agent)
            if transfer.name in self.tools:
                raise UserError(f"agent {self.name!r} already has a tool named {transfer.name!r}")
            self.tools[transfer.name] = transfer
            self.handoffs = (*self.handoffs, agent)
        self.tool_list = tuple(self.tools.values())
        self.ends_turns = any(t.terminal or t.handoff is not None for t in self.tool_list)

    def reachable(self, name: str) -> Agent | None:
        """The agent named ``name`` among this one and those it can hand off to, directly or not."""
        seen: set[int] = set()
        todo: list[Agent] = [self]
        while todo:
            agent = todo.pop()
            if agent.name == name:
                return agent
            if id(agent) not in seen:
                seen.add(id(agent))
                todo.extend(agent.handoffs)
        return None

    def output_of(self, source: RunState | Iterable[Event]) -> Any:
        """A finished run's output, rebuilt from its state or its stored events (None if unfinished):
        with an output type the ``T`` instance (from the JSON the journal keeps), else the final text."""
        state = source if isinstance(source, RunState) else state_of(source)
        driver = (self.reachable(state.agent) if state.agent else None) or self
        if state.status != "finished" or not state.messages:
            return None
        if driver.output is None:
            return state.messages[-1].content
        text = driver.output.answer_in(state.messages)
        return driver.output.load(text) if text is not None else None

    # -- entry points ------------------------------------------------------

    def stream(
        self,
        input: str | Message | RunState | None = None,
        *,
        context: Context | None = None,
        run_id: str | None = None,
        cancel: asyncio.Event | None = None,
        meta: Mapping[str, str] | None = None,
        deps: Any = None,
    ) -> AsyncIterator[Event]:
        """Run the loop, yielding each event as it happens.

        ``input`` is a task (a new run, continuing ``context`` if given) or a
        :class:`RunState` to resume. With only ``run_id``, the run is loaded
        from the agent's store and resumed. Setting ``cancel`` ends the run at
        the next step with a ``cancelled`` event, cancelling running tools.
        ``meta`` labels a new run (kept in its ``run-started`` event; never put
        secrets there). ``deps`` reach tools through their ``Invocation`` (and
        child runs, and dynamic instructions); they are never persisted, so a
        resumed run needs them again.
        """
        return Run(self, input, context=context, run_id=run_id, cancel=cancel, meta=meta, deps=deps).events()

    async def run(
        self,
        input: str | Message | RunState | None = None,
        *,
        context: Context | None = None,
        run_id: str | None = None,
        cancel: asyncio.Event | None = None,
        meta: Mapping[str, str] | None = None,
        deps: Any = None,
    ) -> RunResult:
        """Run to the end (or a pause) and return the :class:`RunResult`."""
        run = Run(self, input, context=context, run_id=run_id, cancel=cancel, meta=meta, deps=deps)
        events = [ev async for ev in run.events()]
        return RunResult.of(run, events)

    def run_sync(
        self,
        input: str | Message | RunState | None = None,
        *,
        context: Context | None = None,
        run_id: str | None = None,
        meta: Mapping[str, str] | None = None,
        deps: Any = None,
    ) -> RunResult:
        """:meth:`run` for synchronous code (starts its own event loop).

        Inside a running event loop (async code, Jupyter) use ``await agent.run(...)``.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(input, context=context, run_id=run_id, meta=meta, deps=deps))
        raise UserError("run_sync() cannot run inside a running event loop (async code, Jupyter): await agent.run(...)")

    def as_tool(
        self, name: str | None = None, description: str | None = None, *, continues: bool = False, **contract: Any
    ) -> Tool:
        """This agent as a tool another agent can call with a ``task`` string.

        Called by another agent's run, it runs as a **child run**: journaled in
        the parent's store (in memory with the parent when it has none) under the
        id ``<parent run id>/<call id>``, its events shown in the parent's stream
        as ``child`` events, its pauses pausing the parent (every open item of the
        tree listed with its path), its budgets bounded by what the parent has
        left, its usage added to the parent's. A restart resumes the same child,
        never a second one. With ``continues=True`` each call's child run starts
        from the notebook the previous call's child left (a coworker who
        remembers the earlier tasks).

        >>> from tether import Action
        >>> from tether.testing import ScriptedModel
        >>> billing = Agent(ScriptedModel(["Refunded $79."]), name="billing")
        >>> support = Agent(ScriptedModel([Action("billing", {"task": "refund A1"}), "Done: refunded."]),
        ...                 [billing.as_tool(description="Ask billing.")], name="support")
        >>> result = support.run_sync("refund A1 please")
        >>> result.context[-2].content, result.output
        ('Refunded $79.', 'Done: refunded.')
        """

        async def delegate(task: str) -> str:
            result = await self.run(task)  # used only when called outside a run
            if result.status != "finished":
                raise RuntimeError(f"sub-agent {self.name!r} stopped with status {result.status!r}")
            if self.output is not None and not isinstance(result.output, str):
                return self.output.dump(result.output)  # a typed answer reaches the caller as JSON
            return result.output or ""

        delegate.__doc__ = (
            f"{description or f'Ask the {self.name} agent to do a task.'}\n\n"
            "Args:\n    task: what the agent should do, in plain words."
        )
        # Re-running it after a crash resumes the same child run (its own journal settles its effects).
        contract.setdefault("effect", "idempotent")
        made = tool(name=name or self.name, **contract)(delegate)
        return dataclasses.replace(made, agent=self, continues=continues)


def _transfer_tool(target: Agent) -> Tool:
    def transfer(reason: str = "") -> str:
        return f"transferred to {target.name}"  # the loop hands the run over once the turn is settled

    said = target.instructions if isinstance(target.instructions, str) else ""
    about = target.description or said.split("\n")[0] or f"the {target.name} agent"
    transfer.__doc__ = (
        f"Hand this conversation over to {target.name}: {about}\n\n"
        "Args:\n    reason: why, in a few words (shown to the next agent)."
    )
    name = "transfer_to_" + "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in target.name)
    made = tool(name=name[:64], effect="none")(transfer)
    return dataclasses.replace(made, handoff=target)


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


def _check_cost(max_cost: Any, policy: Policy, prices: Mapping[str, Price]) -> None:
    """A cost budget needs a number and a price for the brain's model, or it could never stop a run."""
    if not all(isinstance(p, Price) for p in prices.values()):
        raise UserError(f"prices must map model names to tether.cost.Price values, got {prices!r}")
    if max_cost is None:
        return
    if not (isinstance(max_cost, int | float) and not isinstance(max_cost, bool) and max_cost > 0):
        raise UserError(f"max_cost must be a positive number of US dollars or None, got {max_cost!r}")
    model = getattr(policy, "model", None)  # without one, each reply must name its model (Message.model)
    if isinstance(model, str) and price_of(model, prices) is None:
        raise UserError(f"max_cost needs the price of model {model!r}: give prices={{{model!r}: Price(...)}}")
