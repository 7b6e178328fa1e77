"""Handoffs: a transfer switches which agent drives the same run; the journal records it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tether import Action, Agent, HandedOff, RunState, StateIncompatible, UserError, tool
from tether.stores.memory import MemoryStore
from tether.testing import FunctionPolicy, ScriptedModel

refunds: list[int] = []


# Not support.refund: billing's own tool, with the amount the handed-off run refunds.
@tool(approval=True)
def issue_refund(amount: int) -> str:
    """Refund (a person approves)."""
    refunds.append(amount)
    return f"refunded ${amount}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    refunds.clear()


def billing_brain(context: Any, tools: Any) -> Any:
    if not any(m.name == "issue_refund" for m in context if m.role == "tool"):
        return Action("issue_refund", {"amount": 79})
    return "Billing here: refunded."


def agents(store: MemoryStore | None = None) -> tuple[Agent, Agent]:
    billing = Agent(FunctionPolicy(billing_brain), [issue_refund], name="billing", instructions="You handle money.")
    triage = Agent(
        ScriptedModel([Action("transfer_to_billing", {"reason": "a refund"})]),
        name="triage",
        instructions="Route the customer.",
        handoffs=[billing],
        store=store,
    )
    return triage, billing


def test_a_transfer_hands_the_same_run_and_notebook_to_the_other_agent() -> None:
    triage, _ = agents()
    assert "transfer_to_billing" in triage.tools and triage.tools["transfer_to_billing"].effect == "none"
    paused = triage.run_sync("I want a refund")
    kinds = [e.kind for e in paused.events]
    assert kinds.index("handed-off") < kinds.index("approval-requested")
    handed = next(e for e in paused.events if isinstance(e, HandedOff))
    assert handed.agent == "billing" and handed.messages[0].content == "You handle money."
    assert [p.call.name for p in paused.items] == ["issue_refund"]  # billing's tool, billing's gate
    done = triage.run_sync(RunState.from_json(paused.state.approve(paused.items[0].id).to_json()))
    assert done.output == "Billing here: refunded." and refunds == [79]
    notes = [m.content for m in done.context]
    assert notes[:2] == ["Route the customer.", "I want a refund"] and "You handle money." in notes


def test_a_handed_off_run_resumes_with_the_active_agent_across_processes() -> None:
    store = MemoryStore()
    triage, _ = agents(store)
    paused = triage.run_sync("refund please", run_id="r1")
    assert asyncio.run(store.load("r1"))[-1].kind == "paused"
    fresh, _ = agents(store)  # another process builds the same agents
    approved = paused.state.approve(paused.items[0].id)
    done = fresh.run_sync(approved)
    assert done.status == "finished" and refunds == [79]
    starts = [e for e in asyncio.run(store.load("r1")) if e.kind == "run-started"]
    assert [e.agent for e in starts] == ["triage", "billing"]  # type: ignore[union-attr]


def test_budgets_count_across_a_handoff() -> None:
    looper = Agent(FunctionPolicy(lambda c, t: Action("nap")), [tool(name="nap", effect="none")(lambda: "zz")],
                   name="looper")  # fmt: skip
    triage = Agent(ScriptedModel([Action("transfer_to_looper")]), handoffs=[looper], max_steps=5)
    result = triage.run_sync("go")
    assert result.status == "limit-reached" and result.limit == "steps"
    assert result.state.steps == 20  # the looper's own limit applies once it drives; the count never restarts


def test_resuming_with_an_agent_that_cannot_reach_the_active_one_is_refused() -> None:
    triage, _ = agents()
    paused = triage.run_sync("refund")
    stranger = Agent(ScriptedModel([]), [issue_refund], name="stranger")
    stranger_state = paused.state
    with pytest.raises(StateIncompatible):
        stranger.run_sync(stranger_state.approve(paused.items[0].id))


def test_handoffs_can_go_both_ways_and_names_must_be_unique() -> None:
    a = Agent(ScriptedModel([]), name="a")
    b = Agent(ScriptedModel([]), name="b", handoffs=[a])
    a.hand_off_to(b)
    assert "transfer_to_b" in a.tools and a.reachable("b") is b and b.reachable("a") is a
    assert a.fingerprint == a.fingerprint
    with pytest.raises(UserError, match="already hands off"):
        a.hand_off_to(b)
