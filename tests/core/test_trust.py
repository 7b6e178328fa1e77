"""The gate sees what runs, the store's journal is the truth, and malformed states are refused.

Regression tests for issue 9's "approval gate" items: each performs the attack
as described (a gate tricked by a string or a float, a state whose arguments
were rewritten with a recomputed hash, duplicate keys, absurd nesting, a huge blob).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest

from tether import (
    Action,
    Agent,
    LeaseConflict,
    RunState,
    StateError,
    StateTampered,
    ToolCall,
    tool,
)
from tether.state import MAX_DEPTH, MAX_STATE_BYTES, PendingCall
from tether.stores.memory import MemoryStore
from tether.testing import ScriptedModel

refunded: list[tuple[str, int]] = []


# Not support.refund: the gate here is a threshold on the amount, which the attacks try to get past.
@tool(approval=lambda a, ctx: isinstance(a.get("amount"), int) and a["amount"] > 50)
def refund(order_id: str, amount: int) -> str:
    """Refund an order (a human approves anything over 50)."""
    refunded.append((order_id, amount))
    return f"refunded {amount}"


@tool
def payout(order_id: str, amount: int, note: str = "") -> str:
    """Pay out (no gate of its own: the agent's approver decides)."""
    refunded.append((order_id, amount))
    return f"paid {amount}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    refunded.clear()


@pytest.mark.parametrize("amount", ["1000", 1000.0, 1000])
def test_the_gate_sees_coerced_arguments_so_a_string_or_float_cannot_slip_past(amount: Any) -> None:
    agent = Agent(ScriptedModel([Action("refund", {"order_id": "A1", "amount": amount}), "ok"]), [refund])
    result = agent.run_sync("refund A1")
    assert result.status == "paused" and refunded == []
    assert json.loads(result.items[0].call.arguments)["amount"] == amount  # the human sees what the model sent


def test_a_gate_that_raises_pauses_for_a_human_and_never_crashes_the_run() -> None:
    @tool(approval=lambda a, ctx: a["missing"] > 50)
    def pay(order_id: str) -> str:
        """Pay."""
        refunded.append((order_id, 0))
        return "paid"

    agent = Agent(ScriptedModel([Action("pay", {"order_id": "A1"}), "ok"]), [pay])
    result = agent.run_sync("pay A1")
    assert result.status == "paused" and refunded == []
    assert "raised KeyError" in result.items[0].note
    requested = [e for e in result.events if e.kind == "approval-requested"]
    assert requested[0].note == result.items[0].note  # type: ignore[union-attr]
    done = agent.run_sync(RunState.from_json(result.state.to_json()).approve(result.items[0].call.id))
    assert done.status == "finished" and refunded == [("A1", 0)]


def test_the_agent_wide_approver_also_sees_validated_arguments() -> None:
    seen: list[dict[str, Any]] = []

    def approver(t: Any, args: dict[str, Any], ctx: Any) -> bool:
        seen.append(args)
        return args["amount"] > 50

    agent = Agent(ScriptedModel([Action("payout", {"order_id": "A1", "amount": "70"})]), [payout], approver=approver)
    assert agent.run_sync("go").status == "paused"
    assert seen == [{"order_id": "A1", "amount": 70, "note": ""}] and refunded == []


def _paused_in_store(store: MemoryStore, amount: int = 79) -> RunState:
    agent = Agent(ScriptedModel([Action("refund", {"order_id": "A1", "amount": amount})]), [refund], store=store)
    return agent.run_sync("refund", run_id="r1").state


def test_without_a_key_a_state_whose_arguments_differ_from_the_store_is_refused() -> None:
    store = MemoryStore()
    state = _paused_in_store(store)
    call = state.open_calls[0].call
    forged = dataclasses.replace(
        state,
        open_calls=(
            dataclasses.replace(
                state.open_calls[0], call=ToolCall(call.id, call.name, '{"order_id": "A1", "amount": 7900}')
            ),
        ),
    )
    forged = forged.approve(call.id)  # args_hash recomputed for the forged arguments
    agent = Agent(ScriptedModel(["done"]), [refund], store=store)
    with pytest.raises(StateTampered, match="differs from the store's journal"):
        agent.run_sync(forged)
    assert refunded == []
    honest = agent.run_sync(state.approve(call.id))  # the real state still resumes
    assert honest.status == "finished" and refunded == [("A1", 79)]


def test_a_state_whose_notes_were_rewritten_is_refused_by_the_store() -> None:
    store = MemoryStore()
    state = _paused_in_store(store)
    forged = dataclasses.replace(state, messages=(*state.messages[:-1], state.messages[-1]), steps=state.steps + 1)
    with pytest.raises(StateTampered):
        Agent(ScriptedModel(["done"]), [refund], store=store).run_sync(forged.approve(state.open_calls[0].call.id))


def test_a_state_of_a_run_the_store_never_saw_is_refused() -> None:
    state = _paused_in_store(MemoryStore())
    with pytest.raises(StateTampered, match="not in this agent's store"):
        Agent(ScriptedModel(["done"]), [refund], store=MemoryStore()).run_sync(
            state.approve(state.open_calls[0].call.id)
        )


def test_an_old_state_of_a_run_that_moved_on_is_a_lease_conflict() -> None:
    store = MemoryStore()
    state = _paused_in_store(store)
    approved = state.approve(state.open_calls[0].call.id)
    agent = Agent(ScriptedModel(["done"]), [refund], store=store)
    assert agent.run_sync(approved).status == "finished"
    with pytest.raises(LeaseConflict, match="resumed or decided elsewhere"):
        agent.run_sync(approved)
    assert refunded == [("A1", 79)]


def test_deeply_nested_arguments_are_a_state_error_not_a_recursion_error() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    state = RunState("r1", (), (PendingCall(ToolCall("c1", "refund", deep)),))
    parsed = RunState.from_json(state.to_json())  # the arguments are a string: the state itself is shallow
    assert parsed.approve("c1").decisions[0].call_id == "c1"  # hashing them does not recurse
    nested: Any = {}
    for _ in range(MAX_DEPTH + 5):
        nested = {"x": nested}
    blob = json.loads(state.to_json())
    blob["decisions"] = [dict(parsed.approve("c1").decisions[0].to_dict(), args=nested)]
    with pytest.raises(StateError, match="nests deeper"):
        RunState.from_json(json.dumps(blob))
    with pytest.raises(StateError):
        RunState.from_json("[" * 100_000)


def test_duplicate_keys_are_refused_at_any_depth_of_a_signed_state() -> None:
    key = b"k" * 32
    state = RunState("r1", (), (PendingCall(ToolCall("c1", "refund", "{}")),), status="finished").sign(key)
    text = state.to_json()
    with pytest.raises(StateError, match="duplicate key 'status'"):
        RunState.from_json(text.replace('"status":"finished"', '"status":"finished","status":"paused"'))
    with pytest.raises(StateError, match="duplicate key 'id'"):
        RunState.from_json(text.replace('"id":"c1"', '"id":"c1","id":"c2"'))


def test_a_state_over_the_size_cap_is_refused_before_it_is_parsed() -> None:
    with pytest.raises(StateError, match="over the cap"):
        RunState.from_json("x" * (MAX_STATE_BYTES + 1))
    with pytest.raises(StateError, match="over the cap of 100"):
        RunState.from_json(RunState("r1", ()).to_json(), max_bytes=100)


def test_a_second_worker_is_refused_while_the_first_holds_the_lease() -> None:
    gate = asyncio.Event()

    @tool(effect="none")
    async def wait() -> str:
        """Wait for the test."""
        await gate.wait()
        return "waited"

    async def main() -> None:
        store = MemoryStore()
        agent = Agent(ScriptedModel([Action("wait"), "done"]), [wait], store=store)
        first = asyncio.create_task(agent.run("go", run_id="r1"))
        while not await store.load("r1") or (await store.load("r1"))[-1].kind != "tool-started":
            await asyncio.sleep(0.001)
        info = await store.get("r1")
        assert info is not None and info.lease_owner is not None
        with pytest.raises(LeaseConflict, match="is being advanced by"):
            await Agent(ScriptedModel(["done"]), [wait], store=store).run(run_id="r1")
        gate.set()
        assert (await first).status == "finished"
        after = await store.get("r1")
        assert after is not None and after.lease_expires_at == 0.0  # released at the end

    asyncio.run(main())


def test_a_recorded_decision_stands_until_spent_unless_explicitly_replaced() -> None:
    from tether import record_decisions

    store = MemoryStore()
    state = _paused_in_store(store)
    call_id = state.open_calls[0].call.id
    asyncio.run(record_decisions(store, "r1", lambda s: s.approve(call_id, by="ana")))
    with pytest.raises(StateError, match=r"already has a recorded decision \(approve by ana\)"):
        asyncio.run(record_decisions(store, "r1", lambda s: s.deny(call_id, "no", by="bob")))
    asyncio.run(record_decisions(store, "r1", lambda s: s.deny(call_id, "no", by="bob"), replace=True))
    done = Agent(ScriptedModel(["ok"]), [refund], store=store).run_sync(run_id="r1")
    assert done.status == "finished" and refunded == []  # the replacement (deny) won, explicitly
