"""One way to decide: a Choice, checked once against the table of verdicts, recorded by RunState.decide."""

from __future__ import annotations

import asyncio
from typing import Any, get_args

import pytest

from tether import Action, Agent, Choice, PendingCall, RunState, StateError, ToolCall, record_decisions, tool
from tether.pending import VERBS, CallStatus, Verdict, verdicts_for
from tether.stores.memory import MemoryStore
from tether.testing import ScriptedModel

KEY = b"k" * 32


@tool(approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


def waiting(status: CallStatus = "awaiting-approval") -> RunState:
    return RunState("r1", (), open_calls=(PendingCall(ToolCall("c1", "refund", '{"order": "A1"}'), status),), seq=3)


def test_the_table_has_one_row_per_verdict_and_every_status_has_its_verdicts() -> None:
    assert tuple(VERBS) == get_args(Verdict)
    assert all(verdicts_for(status) for status in get_args(CallStatus))
    assert (verdicts_for("started"), verdicts_for("awaiting-answer")) == (("retry", "skip"), ("answer",))
    assert verdicts_for("awaiting-approval")[:2] == verdicts_for("proposed")[:2] == ("approve", "deny")


@pytest.mark.parametrize(
    ("verdict", "payload", "refusal"),
    [
        ("deny", {"args": {"order": "A2"}}, "'deny' takes no args"),
        ("retry", {"message": "why"}, "'retry' takes no message"),
        ("approve", {"answer": "yes"}, "'approve' takes no answer"),
        ("answer", {}, "an answer cannot be None"),
        ("shrug", {}, "unknown verdict 'shrug'"),
    ],
)
def test_a_choice_refuses_a_payload_its_verdict_does_not_take(verdict: Any, payload: Any, refusal: str) -> None:
    with pytest.raises(StateError, match=refusal):
        Choice(verdict, "c1", **payload)


def test_the_short_forms_record_what_decide_records() -> None:
    state = waiting()
    assert state.deny("c1", "no", by="ana", key=KEY).decisions == (
        state.decide(Choice("deny", "c1", message="no"), by="ana", key=KEY).decisions
    )
    started = waiting("started")
    assert started.retry("c1").decisions == started.decide(Choice("retry", "c1")).decisions


def test_decide_refuses_a_verdict_that_does_not_fit_and_arguments_the_person_did_not_see() -> None:
    state = waiting()
    with pytest.raises(StateError, match=r"decide it with approve or deny.*, not 'skip'"):
        state.decide(Choice("skip", "c1"))
    with pytest.raises(StateError, match="not what the person was shown"):
        state.decide(Choice("approve", "c1", args_hash="0" * 32))
    shown = state.open_calls[0].args_hash
    assert state.decide(Choice("approve", "c1", args_hash=shown)).decision("c1") is not None


def test_record_decisions_takes_choices_made_by_a_person_and_signs_them() -> None:
    store = MemoryStore()
    agent = Agent(ScriptedModel([Action("refund", {"order": "A1"}), "Done."]), [refund], store=store, signing_key=KEY)
    paused = agent.run_sync("Refund A1", run_id="r1")
    decided = asyncio.run(record_decisions(store, "r1", Choice("approve", paused.items[0].id), by="ana", key=KEY))
    assert decided.decision(paused.items[0].id).by == "ana"  # type: ignore[union-attr]
    assert agent.run_sync(run_id="r1").output == "Done."


def test_the_old_pending_spellings_warn_and_keep_their_meaning() -> None:
    paused = Agent(ScriptedModel([Action("refund", {"order": "A1"})]), [refund]).run_sync("Refund A1")
    with pytest.warns(DeprecationWarning, match="RunResult.items"):
        assert paused.pending == paused.items == paused.state.items()
    with pytest.warns(DeprecationWarning, match="RunState.open_calls"):
        assert paused.state.pending == paused.open_calls == paused.state.open_calls
    assert '"pending":[' in paused.state.to_json()  # stored states keep their key
