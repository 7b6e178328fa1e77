"""Regression tests for durability bugs the crash matrix found (fixed in agent._plan and state.Journal).

The "crash" here is a store that commits ``tool-started`` and then raises, the
in-process equivalent of ``TETHER_CRASH_AT=after_started_commit``: the event is
durable, the process that wrote it is gone. A fresh agent then resumes the run
from the store, as a restarted worker would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from tether import Action, Agent, Event, FunctionPolicy, RunState, ToolStarted, tool
from tether.stores.memory import MemoryStore


class Died(Exception):
    """Stands for the process being killed right after a commit."""


class DiesAfterStart:
    """Commits normally, but "dies" right after the first ``tool-started`` it commits."""

    def __init__(self, inner: MemoryStore) -> None:
        self.inner, self.armed = inner, True

    async def append(self, run_id: str, events: Sequence[Event], *, expected_seq: int) -> int:
        seq = await self.inner.append(run_id, events, expected_seq=expected_seq)
        if self.armed and any(isinstance(e, ToolStarted) for e in events):
            self.armed = False
            raise Died
        return seq

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def one_call_brain(name: str, args: dict[str, Any]) -> FunctionPolicy:
    def brain(context: Any, tools: Any) -> Any:
        return "done" if any(m.role == "tool" for m in context) else Action(name, args)

    return FunctionPolicy(brain)


async def crash_once(agent: Agent, store: DiesAfterStart, state: RunState) -> None:
    with pytest.raises(Died):
        await agent.run(state)


async def test_an_approved_once_call_interrupted_after_start_waits_for_a_human() -> None:
    ran: list[int] = []

    @tool(effect="once", approval=True)
    def refund(amount: int) -> str:
        ran.append(amount)
        return "refunded"

    store = DiesAfterStart(MemoryStore())
    agent = Agent(one_call_brain("refund", {"amount": 79}), [refund], store=store)
    paused = await agent.run("refund", run_id="r")
    await crash_once(agent, store, paused.state.approve(paused.pending[0].call.id))
    resumed = await agent.run(run_id="r")
    assert resumed.status == "needs-decision"  # today: "finished", the refund re-run unasked
    assert ran == []


async def test_a_retry_decision_allows_one_attempt_only() -> None:
    ran: list[int] = []

    @tool(effect="once")
    def send(n: int) -> str:
        ran.append(n)
        return "sent"

    inner = MemoryStore()
    store = DiesAfterStart(inner)
    agent = Agent(one_call_brain("send", {"n": 1}), [send], store=store)
    with pytest.raises(Died):
        await agent.run("send", run_id="r")
    first = await agent.run(run_id="r")
    assert first.status == "needs-decision"
    store.armed = True  # the retried attempt dies after its start too
    await crash_once(agent, store, first.state.retry(first.pending[0].call.id))
    again = await agent.run(run_id="r")
    assert again.status == "needs-decision"  # today: "finished", a second attempt nobody asked for
    assert ran == []


async def test_a_call_approved_with_edited_arguments_reruns_with_those_arguments() -> None:
    ran: list[int] = []

    @tool(effect="idempotent", approval=True)
    def transfer(amount: int) -> str:
        ran.append(amount)
        return f"moved {amount}"

    store = DiesAfterStart(MemoryStore())
    agent = Agent(one_call_brain("transfer", {"amount": 1000}), [transfer], store=store)
    paused = await agent.run("move money", run_id="r")
    await crash_once(agent, store, paused.state.approve(paused.pending[0].call.id, args={"amount": 10}))
    done = await agent.run(run_id="r")
    assert done.status == "finished"
    assert ran == [10]  # today: [1000], the amount the human changed
