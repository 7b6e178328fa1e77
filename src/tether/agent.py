"""The Agent: an assistant that keeps working until the job is done.

An :class:`Agent` holds a brain (a :class:`~tether.policy.Policy`), tools,
instructions, limits and, optionally, a store and a signing key. Its entry
points all drive one loop, :class:`~tether._loop.run.Run`: :meth:`Agent.stream` yields
the run's :mod:`~tether.events` as they happen, :meth:`Agent.run` and
:meth:`Agent.run_sync` drain the same stream into a :class:`RunResult`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from ._loop.budgets import check_cost, check_limits
from ._loop.children import agent_tool
from ._loop.handoffs import team, team_fingerprint, transfer_tool
from ._loop.result import RunResult, output_of
from ._loop.run import Run
from ._loop.settings import Observer, Settings, Watcher, loop_running
from .context import Context
from .cost import Price
from .events import Event
from .exceptions import UserError
from .grounding import Validator, check_validators
from .messages import Message
from .output import OutputSpec, with_output
from .policy import Policy
from .skills import SkillFolder, skill_set
from .state import RunState
from .store import RunStore
from .tools import Invocation, Tool

__all__ = ["Agent", "Approver", "Observer", "RunResult", "Settings", "Watcher"]

Approver = Callable[[Tool, dict[str, Any], Context], bool | str]
"""An agent-wide gate: ``approver(tool, args, context)`` returns True, or why as text, to ask a human."""


class Agent:
    """An assistant that keeps working until the job is done.

    >>> from tether import tool
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
        output_validators: Sequence[Validator] = (),
        skills: Sequence[SkillFolder] = (),
    ) -> None:
        if not callable(getattr(policy, "decide", None)):
            raise UserError(f"policy {policy!r} has no decide(context, tools) method")
        check_limits(max_steps, max_tool_calls, max_tokens, max_seconds)
        self.prices: Mapping[str, Price] = dict(prices or {})
        check_cost(max_cost, policy, self.prices)
        if not (isinstance(lease_ttl, int | float) and not isinstance(lease_ttl, bool) and lease_ttl > 0):
            raise UserError(f"lease_ttl must be a positive number of seconds, got {lease_ttl!r}")
        if signing_key is not None and not (isinstance(signing_key, bytes) and len(signing_key) >= 16):
            raise UserError("signing_key must be at least 16 random bytes (e.g. secrets.token_bytes(32))")
        self.policy = policy
        self.tools: dict[str, Tool] = {}
        self.skills = skill_set(skills)  # only their names and descriptions join the instructions
        for t in (*tools, *self.skills.tools):
            if not isinstance(t, Tool):
                raise UserError(f"tools must be Tool values (use @tool), got {t!r}")
            if t.name in self.tools:
                raise UserError(f"two tools are named {t.name!r}")
            self.tools[t.name] = t
        self.output: OutputSpec | None = with_output(self.tools, output_type, output_retries)  # adds final_result
        self.output_validators = check_validators(output_validators, output_retries, self.tools, self.output)
        self.output_retries = output_retries
        self.tool_list = tuple(self.tools.values())
        self.instructions = self.skills.instruct(instructions)
        self.name, self.description = name, description
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
        return team_fingerprint(self)

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
            transfer = transfer_tool(agent)
            if transfer.name in self.tools:
                raise UserError(f"agent {self.name!r} already has a tool named {transfer.name!r}")
            self.tools[transfer.name] = transfer
            self.handoffs = (*self.handoffs, agent)
        self.tool_list = tuple(self.tools.values())
        self.ends_turns = any(t.terminal or t.handoff is not None for t in self.tool_list)

    def reachable(self, name: str) -> Agent | None:
        """The agent named ``name`` among this one and those it can hand off to, directly or not."""
        found: Agent | None = team(self).get(name)
        return found

    # -- entry points ------------------------------------------------------

    def stream(
        self,
        input: str | Message | RunState | None = None,
        *,
        context: Context | None = None,
        run_id: str | None = None,
        cancel: asyncio.Event | None = None,
        meta: Mapping[str, str] | None = None,
        session: str | None = None,
        deps: Any = None,
    ) -> AsyncIterator[Event]:
        """Run the loop, yielding each event as it happens.

        ``input`` is a task (a new run, continuing ``context`` if given) or a :class:`RunState` to resume.
        With only ``run_id``, the run is loaded from the agent's store and resumed. Setting ``cancel``
        ends the run at the next step with a ``cancelled`` event, cancelling running tools. ``meta``
        labels a new run (kept in its ``run-started`` event; never put secrets there). ``session``
        names a conversation in the agent's store: the new run starts from the notebook its last run
        left (:mod:`tether._loop.session`). ``deps`` reach tools through their ``Invocation`` (never persisted).
        """
        run = Run(self, input, context=context, run_id=run_id, cancel=cancel, meta=meta, session=session, deps=deps)
        return run.events()

    async def run(
        self,
        input: str | Message | RunState | None = None,
        *,
        context: Context | None = None,
        run_id: str | None = None,
        cancel: asyncio.Event | None = None,
        meta: Mapping[str, str] | None = None,
        session: str | None = None,
        deps: Any = None,
    ) -> RunResult:
        """Run to the end (or a pause) and return the :class:`RunResult`."""
        run = Run(self, input, context=context, run_id=run_id, cancel=cancel, meta=meta, session=session, deps=deps)
        events = [ev async for ev in run.events()]
        return RunResult.of(run, events)

    def run_sync(
        self,
        input: str | Message | RunState | None = None,
        *,
        context: Context | None = None,
        run_id: str | None = None,
        meta: Mapping[str, str] | None = None,
        session: str | None = None,
        deps: Any = None,
    ) -> RunResult:
        """:meth:`run` for synchronous code (starts its own event loop).

        Inside a running event loop (async code, Jupyter) use ``await agent.run(...)``.
        """
        if loop_running():  # asked outside any except block: the run's own errors are not chained to it
            raise UserError(
                "run_sync() cannot run inside a running event loop (async code, Jupyter): await agent.run(...)"
            )
        return asyncio.run(self.run(input, context=context, run_id=run_id, meta=meta, session=session, deps=deps))

    output_of = output_of  # a finished run's output, rebuilt from its state or events (tether._loop.result.output_of)

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
        remembers the earlier tasks). A child with an output type answers with the value's JSON.

        >>> from tether import Action
        >>> from tether.testing import ScriptedModel
        >>> billing = Agent(ScriptedModel(["Refunded $79."]), name="billing")
        >>> support = Agent(ScriptedModel([Action("billing", {"task": "refund A1"}), "Done: refunded."]),
        ...                 [billing.as_tool(description="Ask billing.")], name="support")
        >>> result = support.run_sync("refund A1 please")
        >>> result.context[-2].content, result.output
        ('Refunded $79.', 'Done: refunded.')
        """

        return agent_tool(self, name, description, continues=continues, **contract)
