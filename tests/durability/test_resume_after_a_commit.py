"""Durability bugs the crash matrix and the soak found, each in a few lines.

Fixed (regression tests): an approval taken for a retry of an interrupted
``once`` call, a retry decision that outlived its attempt, edited arguments
lost on a re-run, a committed final answer or terminal tool result that
resuming ignored (asking the model again); in run trees (issue 11, found by the
nested crash matrix), a parent that could not be loaded once it had re-entered
its delegating call, a child that finished just before its parent was killed,
and a tree approved in its state with a store.
``test_a_crash_that_splits_a_turn_keeps_results_in_commit_order`` pins
documented behaviour, not a bug.

The "crash" here is :class:`tether.testing.CrashingStore`, a store that
commits an event and then raises, the in-process equivalent of ``TETHER_CRASH_AT`` at the point after that commit
(``after_started_commit``, ``after_proposed_commit``, ``after_result_commit``):
the event is durable, the process that wrote it is gone. A fresh agent then
resumes the run from the store, as a restarted worker would.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tether import Action, Agent, FunctionPolicy, RunState, record_decisions, tool
from tether.stores.memory import MemoryStore
from tether.testing import CrashingStore, SimulatedCrash


def one_call_brain(name: str, args: dict[str, Any]) -> FunctionPolicy:
    def brain(context: Any, tools: Any) -> Any:
        return "done" if any(m.role == "tool" for m in context) else Action(name, args)

    return FunctionPolicy(brain)


async def crash_once(agent: Agent, store: CrashingStore, state: RunState) -> None:
    with pytest.raises(SimulatedCrash):
        await agent.run(state)


async def test_an_approved_once_call_interrupted_after_start_waits_for_a_human() -> None:
    ran: list[int] = []

    # Not support.refund: a once tool whose executions are counted after a crash between start and finish.
    @tool(effect="once", approval=True)
    def refund(amount: int) -> str:
        ran.append(amount)
        return "refunded"

    store = CrashingStore(MemoryStore(), "tool-started")
    agent = Agent(one_call_brain("refund", {"amount": 79}), [refund], store=store)
    paused = await agent.run("refund", run_id="r")
    await crash_once(agent, store, paused.state.approve(paused.items[0].call.id))
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
    store = CrashingStore(inner, "tool-started")
    agent = Agent(one_call_brain("send", {"n": 1}), [send], store=store)
    with pytest.raises(SimulatedCrash):
        await agent.run("send", run_id="r")
    first = await agent.run(run_id="r")
    assert first.status == "needs-decision"
    store.crashed = False  # the retried attempt dies after its start too
    await crash_once(agent, store, first.state.retry(first.items[0].call.id))
    again = await agent.run(run_id="r")
    assert again.status == "needs-decision"  # today: "finished", a second attempt nobody asked for
    assert ran == []


async def test_a_call_approved_with_edited_arguments_reruns_with_those_arguments() -> None:
    ran: list[int] = []

    @tool(effect="idempotent", approval=True)
    def transfer(amount: int) -> str:
        ran.append(amount)
        return f"moved {amount}"

    store = CrashingStore(MemoryStore(), "tool-started")
    agent = Agent(one_call_brain("transfer", {"amount": 1000}), [transfer], store=store)
    paused = await agent.run("move money", run_id="r")
    await crash_once(agent, store, paused.state.approve(paused.items[0].call.id, args={"amount": 10}))
    done = await agent.run(run_id="r")
    assert done.status == "finished"
    assert ran == [10]  # today: [1000], the amount the human changed


async def test_a_final_answer_committed_before_the_crash_is_not_asked_for_again() -> None:
    asked: list[int] = []

    def brain(context: Any, tools: Any) -> str:
        asked.append(len(context))
        return f"answer #{len(asked)}"

    store = CrashingStore(MemoryStore(), "model-replied")
    agent = Agent(FunctionPolicy(brain), store=store)
    with pytest.raises(SimulatedCrash):
        await agent.run("hello", run_id="r")
    done = await agent.run(run_id="r")
    answers = [m.content for m in done.context if m.role == "assistant"]
    assert (done.status, done.output) == ("finished", "answer #1")
    assert answers == ["answer #1"]  # today: ["answer #1", "answer #2"], one more model request


async def test_a_terminal_tool_result_committed_before_the_crash_ends_the_run() -> None:
    @tool(effect="none", terminal=True)
    def submit(text: str) -> str:
        return f"submitted {text}"

    def brain(context: Any, tools: Any) -> Any:
        if any(m.role == "tool" for m in context):
            raise AssertionError("the run should have ended with the terminal tool's result")
        return Action("submit", {"text": "report"})

    store = CrashingStore(MemoryStore(), "tool-finished")
    agent = Agent(FunctionPolicy(brain), [submit], store=store)
    with pytest.raises(SimulatedCrash):
        await agent.run("write it", run_id="r")
    done = await agent.run(run_id="r")  # today: the brain is asked again
    assert (done.status, done.output) == ("finished", "submitted report")


async def test_a_crash_that_splits_a_turn_keeps_results_in_commit_order() -> None:
    """Documented behaviour, not a bug: the notebook is append-only, so a result
    committed before a crash stays ahead of the results of calls re-run after it
    (as across a pause, see tests/core/test_values.py)."""

    @tool(effect="none")
    async def slow(n: int) -> str:
        await asyncio.sleep(0.05)
        return f"slow {n}"

    @tool(effect="none")
    def fast(n: int) -> str:
        return f"fast {n}"

    def brain(context: Any, tools: Any) -> Any:
        done = any(m.role == "tool" for m in context)
        return "ok" if done else [Action("slow", {"n": 1}), Action("fast", {"n": 2})]

    reference = await Agent(FunctionPolicy(brain), [slow, fast]).run("go")
    store = CrashingStore(MemoryStore(), "tool-finished")  # fast's result lands first
    agent = Agent(FunctionPolicy(brain), [slow, fast], store=store)
    with pytest.raises(SimulatedCrash):
        await agent.run("go", run_id="r")
    done = await agent.run(run_id="r")

    def results(ctx: Any) -> list[str]:
        return [m.content for m in ctx if m.role == "tool"]

    assert results(reference.context) == ["slow 1", "fast 2"]
    assert results(done.context) == ["fast 2", "slow 1"]
    assert done.status == "finished"


# -- runs inside runs: a child run (an agent used as a tool) and its parent --------


def desk(store: Any, effects: list[str], *, approval: bool = False) -> Agent:
    """``support`` delegates to ``billing``, whose one call is a ``once`` send (gated with ``approval``)."""

    @tool(effect="once", approval=approval)
    def send(to: str) -> str:
        """Send a message."""
        effects.append(to)
        return f"sent to {to}"

    def support(context: Any, tools: Any) -> Any:
        done = [m for m in context if m.role == "tool"]
        return f"support: {done[-1].content}" if done else Action("billing", {"task": "tell ann"})

    billing = Agent(one_call_brain("send", {"to": "ann"}), [send], name="billing")
    return Agent(FunctionPolicy(support), [billing.as_tool()], name="support", store=store)


async def test_a_child_that_finished_before_the_crash_settles_its_parent_call_from_its_journal() -> None:
    effects: list[str] = []
    store = MemoryStore()
    with pytest.raises(SimulatedCrash):  # the child's finished is committed, the parent never hears of it
        await desk(CrashingStore(store, "finished"), effects).run("go", run_id="r")
    done = await desk(store, effects).run(run_id="r")  # today: StateError, the child 'cannot be resumed'
    assert (done.status, done.output) == ("finished", "support: done")
    assert effects == ["ann"]
    assert [e.kind for e in await store.load("r/call_1_0")].count("run-started") == 1  # not run again


async def test_a_parent_killed_after_it_resumed_its_delegating_call_can_be_resumed_again() -> None:
    effects: list[str] = []
    store = MemoryStore()
    paused = await desk(store, effects, approval=True).run("go", run_id="r")
    item = paused.items[0]
    await record_decisions(store, "r", lambda s: s.approve(item.id, by="ana"))
    with pytest.raises(SimulatedCrash):  # the parent's second tool-started (it resumes the child) lands
        await desk(CrashingStore(store, "tool-started"), effects, approval=True).run(run_id="r")
    done = await desk(store, effects, approval=True).run(run_id="r")  # today: StateTampered
    assert (done.status, done.output) == ("finished", "support: done")
    assert effects == ["ann"]
    assert sorted(i.run_id for i in await store.list_runs()) == ["r", "r/call_1_0"]


async def test_a_tree_approved_in_its_state_resumes_with_a_store() -> None:
    effects: list[str] = []
    store = MemoryStore()
    paused = await desk(store, effects, approval=True).run("go", run_id="r")
    approved = paused.state.approve(paused.items[0].id, by="ana")
    done = await desk(store, effects, approval=True).run(approved)  # on ef657f7: StateTampered (the child)
    assert (done.status, done.output) == ("finished", "support: done")
    assert effects == ["ann"]
