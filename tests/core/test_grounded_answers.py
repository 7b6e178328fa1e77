"""Answers checked against what ran: validators that see the run's journal refuse an answer that
claims an effect no finished call is behind (typed and text), and pass one that has it."""

from __future__ import annotations

import asyncio

import pydantic
import pytest

from tether import Action, Agent, RunState, tool
from tether.exceptions import UserError
from tether.grounding import Ran, RanCall, Refuse, no_unbacked_claims, requires
from tether.messages import ToolCall
from tether.store import record_decisions
from tether.stores.memory import MemoryStore
from tether.stores.sqlite import SQLiteStore
from tether.testing import ScriptedModel


class RefundOutcome(pydantic.BaseModel):
    order_id: str
    refunded: bool
    amount: int = 0


ISSUED = requires("issue_refund", when="refunded", same=["order_id"])


def desk(*replies: object, ran: list[str], checks: object = (ISSUED,), retries: int = 2, **kw: object) -> Agent:
    @tool(effect="once", approval=True)
    def issue_refund(order_id: str, amount: int) -> str:
        """Refund an order (a person approves)."""
        ran.append(order_id)
        return f"refunded {amount} on {order_id}"

    @tool(effect="none")
    def look_up(order_id: str) -> str:
        """What an order cost."""
        return f"{order_id}: 79 USD, delivered broken"

    return Agent(
        ScriptedModel(list(replies)), [issue_refund, look_up], output_type=kw.pop("output_type", RefundOutcome),
        output_validators=checks, output_retries=retries, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


CLAIM = Action("final_result", {"order_id": "A1", "refunded": True, "amount": 79})


def test_a_typed_claim_with_no_call_behind_it_is_refused_then_fails_the_run() -> None:
    ran: list[str] = []
    agent = desk(Action("look_up", {"order_id": "A1"}), CLAIM, CLAIM, CLAIM, ran=ran)
    result = agent.run_sync("Order A1 arrived broken. Please refund what I paid.")
    assert result.status == "failed" and result.output is None
    assert result.events[-1].error_type == "OutputInvalid"  # type: ignore[union-attr]
    refusals = [m.text for m in result.context if m.name == "final_result" and m.is_error]
    assert len(refusals) == 3
    assert "no issue_refund call with order_id='A1' finished" in refusals[0]
    assert "issue_refund calls made: 0" in refusals[0]
    assert ran == []


def test_a_refused_claim_can_be_corrected_by_the_model() -> None:
    ran: list[str] = []
    honest = Action("final_result", {"order_id": "A1", "refunded": False})
    result = desk(CLAIM, honest, ran=ran).run_sync("refund A1")
    assert result.status == "finished"
    assert result.output == RefundOutcome(order_id="A1", refunded=False)
    assert [m.name for m in result.context if m.is_error] == ["final_result"]


def test_a_claim_backed_by_a_finished_call_passes() -> None:
    ran: list[str] = []
    agent = desk(Action("issue_refund", {"order_id": "A1", "amount": 79}), CLAIM, ran=ran)
    paused = agent.run_sync("refund A1")
    assert paused.status == "paused"
    done = agent.run_sync(paused.state.approve(paused.items[0].call.id))
    assert done.status == "finished" and done.output == RefundOutcome(order_id="A1", refunded=True, amount=79)
    assert ran == ["A1"]


def test_a_denied_call_does_not_count_as_finished() -> None:
    ran: list[str] = []
    agent = desk(Action("issue_refund", {"order_id": "A1", "amount": 79}), CLAIM, CLAIM, CLAIM, ran=ran)
    paused = agent.run_sync("refund A1")
    result = agent.run_sync(paused.state.deny(paused.items[0].call.id, "over the limit"))
    assert result.status == "failed" and ran == []
    refusal = next(m.text for m in result.context if m.name == "final_result" and m.is_error)
    assert "issue_refund calls made: 1, denied" in refusal


def test_the_call_must_match_the_claimed_order() -> None:
    ran: list[str] = []
    other = Action("issue_refund", {"order_id": "B2", "amount": 79})
    agent = desk(other, CLAIM, CLAIM, CLAIM, ran=ran)
    paused = agent.run_sync("refund A1")
    result = agent.run_sync(paused.state.approve(paused.items[0].call.id))
    assert ran == ["B2"] and result.status == "failed"


def test_the_journal_is_read_from_the_store_after_a_resume_in_another_agent(tmp_path: object) -> None:
    """The validator sees calls committed before the pause, when the run resumes from the store."""

    async def main() -> None:
        store = SQLiteStore(f"{tmp_path}/runs.db")
        ran: list[str] = []
        first = desk(Action("issue_refund", {"order_id": "A1", "amount": 79}), ran=ran, store=store)
        paused = await first.run("refund A1")
        assert paused.status == "paused"
        await record_decisions(store, paused.run_id, lambda s: s.approve(s.items()[0].call.id))
        second = desk(CLAIM, ran=ran, store=store)  # a new process would build the agent anew
        done = await second.run(run_id=paused.run_id)
        assert done.status == "finished" and done.output.refunded and ran == ["A1"]

    asyncio.run(main())


def test_a_compacted_call_still_counts() -> None:
    """Compaction drops notes from the notebook, not from the journal validators read."""
    ran: list[str] = []

    def forget_all(ctx: object) -> object:
        from tether.context import Context
        from tether.messages import Message

        msgs = list(ctx)  # type: ignore[call-overload]
        return Context([msgs[0], Message.user("(earlier steps: summarised)")]) if len(msgs) > 4 else ctx

    agent = desk(
        Action("issue_refund", {"order_id": "A1", "amount": 79}),
        Action("look_up", {"order_id": "A1"}),
        CLAIM,
        ran=ran,
        compactor=forget_all,
    )
    paused = agent.run_sync("refund A1")
    done = agent.run_sync(paused.state.approve(paused.items[0].call.id))
    assert any(e.kind == "compacted" for e in done.events)
    assert not any(m.name == "issue_refund" for m in done.context)  # the call left the notebook
    assert done.status == "finished" and ran == ["A1"]


# -- text answers --------------------------------------------------------------------------------

NEWCOMER = "The order will be refunded to the customer's card, and a support lead will need to approve the refund."


def text_desk(*replies: object, ran: list[str], words: object = None) -> Agent:
    checks = (no_unbacked_claims(words),)  # type: ignore[arg-type]
    return desk(*replies, ran=ran, checks=checks, output_type=None)


def test_a_text_answer_that_claims_a_refund_that_never_ran_is_sent_back() -> None:
    ran: list[str] = []
    honest = "I have asked for the refund of order A1; a support lead must approve it first."
    result = text_desk(NEWCOMER, honest, ran=ran).run_sync("Order A1 arrived broken. Please refund what I paid.")
    assert result.status == "finished" and result.output == honest
    notes = [m.text for m in result.context if m.name == "answer-check"]
    assert len(notes) == 1 and "'refunded'" in notes[0] and "issue_refund" in notes[0]


def test_a_text_answer_after_the_refund_ran_passes() -> None:
    ran: list[str] = []
    agent = text_desk(Action("issue_refund", {"order_id": "A1", "amount": 79}), "Refunded 79 USD.", ran=ran)
    paused = agent.run_sync("refund A1")
    done = agent.run_sync(paused.state.approve(paused.items[0].call.id))
    assert done.status == "finished" and done.output == "Refunded 79 USD." and ran == ["A1"]


def test_repeated_false_claims_fail_the_run_as_invalid_output() -> None:
    ran: list[str] = []
    said = "Your refund has been processed."
    result = text_desk(said, said, said, ran=ran).run_sync("refund A1")
    assert result.status == "failed" and "refused 3 times" in (result.error or "")
    assert RunState.from_json(result.state.to_json()).status == "failed"


def test_words_given_for_a_tool_replace_the_ones_its_name_gives() -> None:
    ran: list[str] = []
    words = {"issue_refund": ["money is on its way"]}
    result = text_desk("The money is on its way!", "Refunded.", ran=ran, words=words).run_sync("refund A1")
    assert result.output == "Refunded." and len([m for m in result.context if m.name == "answer-check"]) == 1


@pytest.mark.parametrize(
    "text",
    [
        NEWCOMER,
        "Done: order A1 has been refunded.",
        "I've issued the refund for A1.",
        "Your refund has been processed and will reach your card in 3 days.",
        "Refund issued.",
    ],
)
def test_claims_the_text_check_catches(text: str) -> None:
    check = no_unbacked_claims()
    with pytest.raises(Refuse):
        check(text, _ran_with_refund_tool())


@pytest.mark.parametrize(
    "text",
    [
        "I can't refund this order without a lead's approval.",
        "I have requested a refund; it needs approval.",
        "Would you like me to refund order A1?",
        "Your order A1 cost 79 USD and was delivered broken.",
        "If approved, the refund will be issued to your card.",
        "The refund is pending approval.",
    ],
)
def test_text_the_check_leaves_alone(text: str) -> None:
    no_unbacked_claims()(text, _ran_with_refund_tool())


def test_a_finished_call_lets_any_claim_through_and_tools_that_act_freely_are_not_checked() -> None:
    finished = Ran((RanCall(ToolCall("c1", "issue_refund", '{"order_id": "A1"}'), "finished", "ok"),), _tools())
    no_unbacked_claims()("Refunded.", finished)
    no_unbacked_claims()("I looked up the order.", _ran_with_refund_tool())


def test_bad_validators_are_refused_when_the_agent_is_built() -> None:
    with pytest.raises(UserError, match="output_validators"):
        Agent(ScriptedModel(["x"]), output_validators=["not a function"])  # type: ignore[list-item]
    with pytest.raises(UserError, match="output_retries"):
        Agent(ScriptedModel(["x"]), output_validators=[ISSUED], output_retries=-1)


def test_a_validator_that_crashes_raises_and_the_stored_run_is_failed() -> None:
    def broken(value: object, ran: Ran) -> None:
        raise KeyError("oops")

    store = MemoryStore()
    agent = Agent(ScriptedModel(["hello"]), output_validators=[broken], store=store)
    with pytest.raises(KeyError):  # a bug in a validator is the program's, like one in a tool's gate
        agent.run_sync("hi", run_id="r1")
    state = asyncio.run(store.get("r1"))
    assert state is not None and state.status == "failed"


def _tools() -> dict[str, object]:
    @tool(effect="once", approval=True)
    def issue_refund(order_id: str) -> str:
        """Refund an order."""
        return "refunded"

    @tool(effect="none")
    def look_up(order_id: str) -> str:
        """Look an order up."""
        return "ok"

    return {"issue_refund": issue_refund, "look_up": look_up}


def _ran_with_refund_tool() -> Ran:
    return Ran((), _tools())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("check", "says"),
    [
        (requires("issue_refnd", when="refunded"), "no tool 'issue_refnd'"),
        (requires("issue_refund", when="refundd"), "no field 'refundd'"),
        (requires("issue_refund", when="refunded", same=["order"]), "no field 'order'"),
        (requires("issue_refund", when="refunded", same={"order_id": "order"}), "no argument 'order'"),
    ],
)
def test_a_typo_in_requires_is_refused_when_the_agent_is_built(check: object, says: str) -> None:
    """A misspelt field would turn the guard off; a misspelt tool would refuse every answer."""
    with pytest.raises(UserError, match=says):
        desk(ran=[], checks=(check,))


def test_requires_on_fields_needs_a_typed_output() -> None:
    with pytest.raises(UserError, match="give the agent output_type="):
        desk(ran=[], checks=(ISSUED,), output_type=None)


def test_a_terse_claim_is_caught_too() -> None:
    with pytest.raises(Refuse):
        no_unbacked_claims()("Refund processed!", _ran_with_refund_tool())
