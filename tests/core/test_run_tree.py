"""Runs inside runs: an agent used as a tool runs as a child run; its pauses pause the root."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from inline_snapshot import snapshot

from tether import (
    Action,
    Agent,
    ChildEvent,
    RunState,
    Usage,
    record_decisions,
    tool,
)
from tether.messages import Message, ToolCall
from tether.stores.memory import MemoryStore
from tether.testing import FunctionPolicy, ScriptedModel
from tether.trace import render

refunds: list[tuple[str, int]] = []


# Not support.refund: billing's tool in the tree, whose result text the parents pass up.
@tool(approval=True)
def issue_refund(order_id: str, amount: int) -> str:
    """Refund an order (a person approves)."""
    refunds.append((order_id, amount))
    return f"refunded ${amount} on {order_id}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    refunds.clear()


def billing_brain(context: Any, tools: Any) -> Any:
    """Refunds once, then reports what the refund tool said (a denial included)."""
    results = [m for m in context if m.role == "tool"]
    if not results:
        return Action("issue_refund", {"order_id": "A1", "amount": 79})
    return f"billing: {results[-1].content}"


def support_brain(context: Any, tools: Any) -> Any:
    results = [m for m in context if m.role == "tool"]
    if not results:
        return Action("billing", {"task": "refund order A1"})
    return f"support: {results[-1].content}"


def desk(store: MemoryStore | None = None) -> Agent:
    billing = Agent(FunctionPolicy(billing_brain), [issue_refund], name="billing")
    return Agent(FunctionPolicy(support_brain), [billing.as_tool(description="Billing.")], name="support", store=store)


def test_a_gated_call_in_a_child_pauses_the_root_listing_it_with_its_path() -> None:
    paused = desk().run_sync("refund A1", run_id="r1")
    assert paused.status == "paused" and refunds == []
    [item] = paused.items
    assert item.label == "support › billing › issue_refund"
    assert item.id == "call_1_0/call_1_0" and item.status == "awaiting-approval"
    assert item.call.arguments == '{"order_id": "A1", "amount": 79}'
    assert paused.state.child("call_1_0").run_id == "r1/call_1_0"
    assert paused.events[-1].call_ids == ("call_1_0/call_1_0",)  # type: ignore[union-attr]


def test_approving_by_path_resumes_the_child_first_and_both_finish() -> None:
    agent = desk()
    paused = agent.run_sync("refund A1")
    blob = paused.state.approve(paused.items[0].id, by="ana").to_json()
    done = agent.run_sync(RunState.from_json(blob))
    assert done.status == "finished" and refunds == [("A1", 79)]
    assert done.output == "support: billing: refunded $79 on A1"


def test_a_denial_reaches_the_childs_model_and_the_childs_answer_reaches_the_parent() -> None:
    agent = desk()
    paused = agent.run_sync("refund A1")
    done = agent.run_sync(paused.state.deny(paused.items[0].id, "refunds over $50 need a manager"))
    assert refunds == []
    assert done.output == "support: billing: a human denied this call: refunds over $50 need a manager"


def test_with_a_store_the_child_is_journaled_beside_its_parent_and_decided_from_another_process() -> None:
    store = MemoryStore()
    paused = desk(store).run_sync("refund A1", run_id="r1")
    assert [e.kind for e in asyncio.run(store.load("r1/call_1_0"))][-1] == "paused"
    item = paused.items[0]
    decided = asyncio.run(record_decisions(store, "r1", lambda s: s.approve(item.id, by="ana")))
    assert decided.decision(item.id) is not None
    assert [e.kind for e in asyncio.run(store.load("r1/call_1_0"))][-1] == "approval-decided"  # routed down
    done = desk(store).run_sync(run_id="r1")  # a fresh process resumes the root by id
    assert done.status == "finished" and refunds == [("A1", 79)]
    assert asyncio.run(store.get("r1/call_1_0")).status == "finished"  # type: ignore[union-attr]


def test_three_levels_deep_a_decision_is_routed_down_and_answers_come_back_up() -> None:
    ledger = Agent(ScriptedModel([Action("issue_refund", {"order_id": "A1", "amount": 5}), "ledger ok"]),
                   [issue_refund], name="ledger")  # fmt: skip
    billing = Agent(ScriptedModel([Action("ledger", {"task": "book it"}), "billing ok"]), [ledger.as_tool()],
                    name="billing")  # fmt: skip
    support = Agent(ScriptedModel([Action("billing", {"task": "refund"}), "support ok"]), [billing.as_tool()],
                    name="support")  # fmt: skip
    paused = support.run_sync("refund")
    [item] = paused.items
    assert item.label == "support › billing › ledger › issue_refund" and item.id.count("/") == 2
    done = support.run_sync(RunState.from_json(paused.state.approve(item.id).to_json()))
    assert done.output == "support ok" and refunds == [("A1", 5)]
    assert [m.content for m in done.context if m.role == "tool"] == ["billing ok"]


def test_child_events_show_in_the_parent_stream_and_in_the_trace_indented() -> None:
    agent = desk()
    paused = agent.run_sync("refund A1")
    done = agent.run_sync(paused.state.approve(paused.items[0].id))
    children = [e for e in done.events if isinstance(e, ChildEvent)]
    assert {e.agent for e in children} == {"billing"} and children[0].path == ("call_1_0",)
    assert render(paused.events, name="support") == snapshot("""\
you asked: "refund A1"
  support calls: billing({"task": "refund order A1"})
    billing was asked: "refund order A1"
      billing calls: issue_refund({"order_id": "A1", "amount": 79})
        ?? issue_refund waits for a human decision
      (paused: approval)
  (paused: approval)\
""")
    assert render(done.events, name="support") == snapshot("""\
      (billing resumes)
        !! a human said approve to call_1_0
        -> issue_refund returned: refunded $79 on A1
      billing final answer: billing: refunded $79 on A1
    -> billing returned: billing: refunded $79 on A1
  final answer: support: billing: refunded $79 on A1\
""")


def test_usage_rolls_up_to_the_root() -> None:
    child = Agent(ScriptedModel([Message("assistant", "done", usage=Usage(10, 5, 1))]), name="child")
    first = Message("assistant", "", (ToolCall.of("child", {"task": "x"}, id="c1"),), usage=Usage(0, 0, 1))
    root = Agent(ScriptedModel([first, Message("assistant", "ok", usage=Usage(2, 2, 1))]), [child.as_tool()])
    result = root.run_sync("go")
    assert result.usage == Usage(12, 7, 3)


def test_a_childs_budget_is_bounded_by_what_its_parent_has_left_and_a_limit_is_a_note() -> None:
    @tool(effect="none")
    def ping() -> str:
        """Ping."""
        return "pong"

    looping = Agent(FunctionPolicy(lambda c, t: Action("ping", {})), [ping], name="c")
    root = Agent(ScriptedModel([Action("c", {"task": "loop"}), "gave up"]), [looping.as_tool()], max_steps=4)
    result = root.run_sync("go")
    assert result.status == "finished" and result.output == "gave up"
    note = result.context[-2]
    assert note.is_error and "sub-agent 'c' ended limit-reached before it finished" in note.content
    child_steps = sum(1 for e in result.events if isinstance(e, ChildEvent) and e.event.kind == "model-replied")
    assert child_steps == 3  # the root had 3 steps left when it delegated, the child's own limit is 20


def test_a_restart_resumes_the_same_child_and_never_starts_a_second_one() -> None:
    from tether.testing import CrashingStore, SimulatedCrash

    store = MemoryStore()

    def childs_reply(ev: Any) -> bool:  # the child's first reply is committed, then the worker dies
        return ev.kind == "model-replied" and any(c.name == "issue_refund" for c in ev.message.tool_calls)

    with pytest.raises(SimulatedCrash):
        desk(CrashingStore(store, childs_reply)).run_sync("refund A1", run_id="r1")  # type: ignore[arg-type]
    paused = desk(store).run_sync(run_id="r1")
    assert paused.status == "paused" and paused.items[0].id == "call_1_0/call_1_0"
    assert sorted(i.run_id for i in asyncio.run(store.list_runs())) == ["r1", "r1/call_1_0"]
    child_starts = [e for e in asyncio.run(store.load("r1/call_1_0")) if e.kind == "run-started"]
    assert [e.resumed for e in child_starts] == [False, True]  # type: ignore[union-attr]


def test_an_ancestors_approver_and_cost_budget_cover_its_child_runs() -> None:
    ran: list[int] = []

    @tool(effect="once")
    def wire_money(amount: int) -> str:
        """Wire money."""
        ran.append(amount)
        return "wired"

    child = Agent(ScriptedModel([Action("wire_money", {"amount": 10_000}), "wired it"]), [wire_money], name="child")
    root = Agent(
        ScriptedModel([Action("child", {"task": "pay"}), "ok"]),
        [child.as_tool()],
        approver=lambda t, a, c: t.effect == "once",  # every `once` call anywhere needs a person
    )
    paused = root.run_sync("pay")
    assert paused.status == "paused" and ran == [] and paused.items[0].label == "agent › child › wire_money"

    spender = Agent(
        ScriptedModel(
            [
                Message("assistant", "", (ToolCall.of("ping", {}, id=f"p{i}"),), usage=Usage(10**6, 0, 1))
                for i in range(5)
            ]
        ),
        [tool(name="ping", effect="none")(lambda: "pong")],
        name="spender",
    )
    from tether.cost import Price

    prices = {"": Price(input=1.0, output=1.0)}
    capped = Agent(
        ScriptedModel([Action("spender", {"task": "spend"}), "stopped"]),
        [spender.as_tool()],
        max_cost=2.0,
        prices=prices,
    )
    spender.prices = prices
    result = capped.run_sync("go")
    assert "ended limit-reached" in result.context[-1].content  # the child stopped at what the root had left
    assert result.usage.input_tokens == 2_000_000  # 2 of its 5 replies: $2, then the root is out of budget too
    assert (result.status, result.limit) == ("limit-reached", "cost")
