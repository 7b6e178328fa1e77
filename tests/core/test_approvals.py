"""Human approval: pause once for every gated call, decide, resume; integrity of states."""

from __future__ import annotations

import asyncio
import json

import pytest

from tether import (
    Action,
    Agent,
    LeaseConflict,
    RunState,
    StateError,
    StateIncompatible,
    StateTampered,
    tool,
)
from tether.stores.memory import MemoryStore
from tether.testing import ScriptedModel

KEY = b"k" * 32


def make_tools(ran: list[str]):
    @tool(effect="none")
    def look_up(order_id: str) -> str:
        ran.append(f"look_up {order_id}")
        return f"{order_id}: $79"

    # Not support.refund: a person edits the amount, and what ran shows the edit.
    @tool(approval=True)
    def refund(order_id: str, amount: int) -> str:
        ran.append(f"refund {order_id} {amount}")
        return f"refunded ${amount}"

    @tool(approval=True)
    def email(to: str) -> str:
        ran.append(f"email {to}")
        return f"emailed {to}"

    return [look_up, refund, email]


REPLY = [
    Action("look_up", {"order_id": "A1"}),
    Action("refund", {"order_id": "A1", "amount": 79}),
    Action("email", {"to": "ann@example.com"}),
]


def paused_run(ran: list[str], **kw):
    model = ScriptedModel([REPLY, "all done"])
    agent = Agent(model, make_tools(ran), **kw)
    return agent, model, agent.run_sync("refund A1", run_id="r1")


def test_free_calls_run_and_the_run_pauses_once_listing_every_gated_call() -> None:
    ran: list[str] = []
    _, _, result = paused_run(ran)
    assert ran == ["look_up A1"]
    assert result.status == "paused"
    kinds = [e.kind for e in result.events]
    assert kinds == [
        "run-started",
        "model-replied",
        "tool-started",
        "tool-finished",
        "approval-requested",
        "approval-requested",
        "paused",
    ]
    assert result.events[-1].call_ids == ("call_1_1", "call_1_2")
    assert [p.call.name for p in result.items] == ["refund", "email"]
    assert all(p.status == "awaiting-approval" for p in result.items)
    # The paused event carries the same state as the result.
    assert result.events[-1].state == result.state


def test_approve_deny_and_resume_gives_one_result_per_call() -> None:
    ran: list[str] = []
    agent, model, result = paused_run(ran)
    state = result.state.approve("call_1_1").deny("call_1_2", "do not email customers")
    done = agent.run_sync(RunState.from_json(state.to_json()))
    assert done.status == "finished" and done.output == "all done"
    assert ran == ["look_up A1", "refund A1 79"]
    results = {m.tool_call_id: m for m in done.context if m.role == "tool"}
    assert set(results) == {"call_1_0", "call_1_1", "call_1_2"}
    assert results["call_1_2"].is_error and "do not email customers" in results["call_1_2"].content
    # The model's next request saw the denial message.
    assert "do not email customers" in model.requests[-1][-1].content
    assert [e.kind for e in done.events][:3] == ["run-started", "approval-decided", "approval-decided"]


def test_edited_arguments_are_validated_and_used() -> None:
    ran: list[str] = []
    agent, _, result = paused_run(ran)
    bad = result.state.approve("call_1_1", args={"order_id": "A1", "amount": "lots"}).deny("call_1_2")
    with pytest.raises(StateError, match="edited arguments"):
        agent.run_sync(bad)
    assert ran == ["look_up A1"]
    good = result.state.approve("call_1_1", args={"order_id": "A1", "amount": 50}).deny("call_1_2")
    done = agent.run_sync(good)
    assert ran == ["look_up A1", "refund A1 50"]
    note = next(m for m in done.context if m.tool_call_id == "call_1_1")
    assert note.content.startswith('(a human edited the arguments to {"amount": 50, "order_id": "A1"})')


def test_undecided_calls_pause_again_and_nothing_is_dropped() -> None:
    ran: list[str] = []
    agent, _, result = paused_run(ran)
    again = agent.run_sync(result.state.approve("call_1_1"))
    assert again.status == "paused" and [p.call.id for p in again.items] == ["call_1_2"]
    assert ran == ["look_up A1", "refund A1 79"]
    done = agent.run_sync(again.state.approve("call_1_2"))
    assert done.status == "finished" and ran[-1] == "email ann@example.com"


def test_a_decision_is_bound_to_the_exact_arguments_shown() -> None:
    ran: list[str] = []
    agent, _, result = paused_run(ran)
    data = result.state.approve("call_1_1").approve("call_1_2").to_dict()
    data["pending"][0]["call"]["arguments"] = json.dumps({"order_id": "A1", "amount": 7900})
    with pytest.raises(StateTampered, match="other arguments"):
        agent.run_sync(RunState.from_dict(data))
    assert ran == ["look_up A1"]


def test_decisions_for_unknown_calls_or_wrong_verdicts_are_refused() -> None:
    ran: list[str] = []
    _, _, result = paused_run(ran)
    with pytest.raises(StateError, match="not waiting"):
        result.state.approve("call_9_9")
    with pytest.raises(StateError, match="decide it with approve or deny"):
        result.state.retry("call_1_1")


def test_signed_states_refuse_tampering_and_unsigned_decisions() -> None:
    ran: list[str] = []
    agent, _, result = paused_run(ran, signing_key=KEY)
    assert result.state.signature
    with pytest.raises(StateTampered, match="decision"):
        agent.run_sync(result.state.approve("call_1_1").deny("call_1_2"))  # no key: unsigned
    forged = result.state.approve("call_1_1", key=b"x" * 32).deny("call_1_2", key=KEY)
    with pytest.raises(StateTampered, match="decision"):
        agent.run_sync(forged)
    data = result.state.to_dict()
    data["messages"][1]["content"] = "refund everything"
    with pytest.raises(StateTampered, match="signature"):
        agent.run_sync(RunState.from_dict(data))
    assert ran == ["look_up A1"]
    ok = result.state.approve("call_1_1", key=KEY).deny("call_1_2", key=KEY)
    assert agent.run_sync(ok).status == "finished"


def test_expired_decisions_are_refused() -> None:
    ran: list[str] = []
    agent, _, result = paused_run(ran, signing_key=KEY)
    stale = result.state.approve("call_1_1", key=KEY, ttl=-1).deny("call_1_2", key=KEY)
    with pytest.raises(StateError, match="expired"):
        agent.run_sync(stale)
    assert ran == ["look_up A1"]


def test_resuming_against_changed_tools_fails_loudly() -> None:
    ran: list[str] = []
    _, _, result = paused_run(ran)
    tools = make_tools(ran)[:2]
    with pytest.raises(StateIncompatible, match="other tool definitions"):
        Agent(ScriptedModel([]), tools).run_sync(result.state.approve("call_1_1"))


@pytest.mark.parametrize(
    "blob, error",
    [
        ("{", "not valid JSON"),
        ("[]", "must be a JSON object"),
        ('{"schema_version": 99}', "schema_version 99"),
        ('{"schema_version": 1, "run_id": "r"}', "malformed run state"),
        ("[" * 100000, "not valid JSON"),
    ],
)
def test_malformed_states_are_refused(blob: str, error: str) -> None:
    with pytest.raises(StateError, match=error):
        RunState.from_json(blob)


def test_with_a_store_a_decision_is_single_use() -> None:
    ran: list[str] = []
    store = MemoryStore()
    agent, _, result = paused_run(ran, store=store)
    decided = result.state.approve("call_1_1").deny("call_1_2")
    agent.run_sync(decided)
    with pytest.raises(LeaseConflict):
        agent.run_sync(decided)
    assert ran.count("refund A1 79") == 1
    assert asyncio.run(store.get("r1")).status == "finished"


def test_resume_by_run_id_from_the_store_with_decisions_recorded_elsewhere() -> None:
    from tether import record_decisions

    ran: list[str] = []
    store = MemoryStore()
    agent, _, _ = paused_run(ran, store=store)

    # Another process, with only the store, decides without running the agent.
    asyncio.run(record_decisions(store, "r1", lambda s: s.approve("call_1_1").deny("call_1_2", "no")))
    done = agent.run_sync(run_id="r1")
    assert done.status == "finished" and ran == ["look_up A1", "refund A1 79"]
    # Nothing was recorded twice.
    assert sum(e.kind == "approval-decided" for e in asyncio.run(store.load("r1"))) == 2


def test_the_step_budget_continues_across_resume() -> None:
    ran: list[str] = []
    model = ScriptedModel([REPLY, Action("look_up", {"order_id": "B"}), "never"])
    agent = Agent(model, make_tools(ran), max_steps=2)
    paused = agent.run_sync("go")
    done = agent.run_sync(paused.state.approve("call_1_1").approve("call_1_2"))
    assert done.status == "limit-reached" and done.state.steps == 2


def test_approval_can_be_decided_by_a_callable_or_an_agent_level_approver() -> None:
    ran: list[str] = []

    @tool(approval=lambda args, ctx: args["amount"] > 100)
    def pay(amount: int) -> str:
        ran.append(f"pay {amount}")
        return "paid"

    @tool(effect="none")
    def peek() -> str:
        ran.append("peek")
        return "ok"

    model = ScriptedModel([[Action("pay", {"amount": 5}), Action("pay", {"amount": 500}), Action("peek")], "x"])
    result = Agent(model, [pay, peek], approver=lambda t, args, ctx: t.name == "peek").run_sync("go")
    assert ran == ["pay 5"]
    assert [p.call.id for p in result.items] == ["call_1_1", "call_1_2"]


def test_the_state_json_is_plain_and_stable() -> None:
    ran: list[str] = []
    _, _, result = paused_run(ran)
    data = json.loads(result.state.to_json())
    assert data["schema_version"] == 1
    assert set(data) == {
        "schema_version",
        "run_id",
        "status",
        "seq",
        "paused_at",
        "fingerprint",
        "steps",
        "tool_calls",
        "usage",
        "messages",
        "pending",
        "decisions",
        "signature",
        "agent",  # the agent driving the run (a handoff changes it)
    }
    assert RunState.from_json(result.state.to_json()) == result.state


def test_record_decisions_appends_only_new_decisions_and_refuses_a_moved_run() -> None:
    from tether import record_decisions

    ran: list[str] = []
    store = MemoryStore()
    agent, _, _ = paused_run(ran, store=store)

    async def decide() -> None:
        decided = await record_decisions(store, "r1", lambda s: s.approve("call_1_1"))
        assert [d.call_id for d in decided.decisions] == ["call_1_1"]
        again = await record_decisions(store, "r1", lambda s: s.deny("call_1_2", "no"))
        assert [d.call_id for d in again.decisions] == ["call_1_1", "call_1_2"]
        kinds = [e.kind for e in await store.load("r1")]
        assert kinds.count("approval-decided") == 2

    asyncio.run(decide())
    assert agent.run_sync(run_id="r1").status == "finished"
    with pytest.raises(StateError, match="not waiting"):
        asyncio.run(record_decisions(store, "r1", lambda s: s.approve("call_1_1")))
    with pytest.raises(StateError, match="no run 'nope'"):
        asyncio.run(record_decisions(store, "nope", lambda s: s))
