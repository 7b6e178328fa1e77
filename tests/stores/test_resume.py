"""End to end on every store: pause for approval, resume from a fresh store object."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from tether import Action, Agent, ApprovalDecided, LeaseConflict, RunState, Tool, state_of, tool
from tether.stores import RunStore
from tether.testing import ScriptedModel

from .conftest import Backend


@dataclass
class Refunds:
    """A gated, once-only tool that records every execution."""

    done: list[tuple[str, float]] = field(default_factory=list)

    def tool(self) -> Tool:
        # Not support.refund: it records each execution with its amount, to show what a resumed call ran with.
        @tool(approval=True)
        def refund(order: str, amount: float) -> str:
            """Refund an order."""
            self.done.append((order, amount))
            return f"refunded {amount} on {order}"

        return refund


def script() -> ScriptedModel:
    return ScriptedModel([Action("refund", {"order": "A1", "amount": 20}), "Refund sent."])


async def pause(store: RunStore, refunds: Refunds) -> str:
    """Run until the approval pause; return the run id."""
    result = await Agent(script(), [refunds.tool()], store=store).run("refund A1")
    assert result.status == "paused" and refunds.done == []
    info = await store.get(result.run_id)
    assert info is not None and info.status == "paused"
    return result.run_id


async def fresh_state(backend: Backend, run_id: str) -> tuple[RunStore, RunState]:
    store = await backend.open()
    return store, state_of(await store.load(run_id))


def agent_after_pause(store: RunStore, refunds: Refunds) -> Agent:
    """A new agent process: its model has already given the reply that paused."""
    return Agent(ScriptedModel(["Refund sent."]), [refunds.tool()], store=store)


async def test_a_paused_run_resumes_from_a_fresh_store_and_runs_the_tool_once(backend: Backend) -> None:
    refunds = Refunds()
    run_id = await pause(await backend.open(), refunds)
    store, state = await fresh_state(backend, run_id)
    assert state.status == "paused" and [p.call.name for p in state.open_calls] == ["refund"]
    state = state.approve(state.open_calls[0].call.id, {"order": "A1", "amount": 15}, by="ana")
    result = await agent_after_pause(store, refunds).run(state)
    assert result.status == "finished" and result.output == "Refund sent."
    assert refunds.done == [("A1", 15)]
    info = await (await backend.open()).get(run_id)
    assert info is not None and info.status == "finished"


async def test_a_decision_committed_by_another_writer_resumes_by_run_id(backend: Backend) -> None:
    refunds = Refunds()
    run_id = await pause(await backend.open(), refunds)
    inbox, state = await fresh_state(backend, run_id)  # e.g. the web inbox
    decision = state.approve(state.open_calls[0].call.id, by="ana").decision(state.open_calls[0].call.id)
    assert decision is not None
    await inbox.append(run_id, [ApprovalDecided(decision)], expected_seq=state.seq)
    worker = await backend.open()  # e.g. `tether resume` in another process
    result = await agent_after_pause(worker, refunds).run(run_id=run_id)
    assert result.status == "finished"
    assert refunds.done == [("A1", 20)]


async def test_resuming_the_same_state_twice_conflicts_and_executes_nothing(backend: Backend) -> None:
    refunds = Refunds()
    run_id = await pause(await backend.open(), refunds)
    store, state = await fresh_state(backend, run_id)
    state = state.approve(state.open_calls[0].call.id)
    assert (await agent_after_pause(store, refunds).run(state)).status == "finished"
    length = len(await store.load(run_id))
    with pytest.raises(LeaseConflict):
        await agent_after_pause(await backend.open(), refunds).run(state)
    assert refunds.done == [("A1", 20)]
    assert len(await store.load(run_id)) == length


async def test_two_workers_racing_to_resume_one_run_execute_the_tool_once(backend: Backend) -> None:
    refunds = Refunds()
    run_id = await pause(await backend.open(), refunds)
    _, state = await fresh_state(backend, run_id)
    state = state.approve(state.open_calls[0].call.id)
    workers = [agent_after_pause(await backend.open(), refunds) for _ in range(2)]
    outcomes = await asyncio.gather(*(w.run(state) for w in workers), return_exceptions=True)
    assert sorted(type(o).__name__ for o in outcomes) == ["LeaseConflict", "RunResult"]
    assert refunds.done == [("A1", 20)]
