"""Questions: a tool that asks a person pauses the run; the answer becomes the call's result."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Literal

import pytest
from pydantic import BaseModel

from tether import (
    Action,
    Agent,
    RunState,
    StateError,
    StateTampered,
    ToolCall,
    ask_human,
    record_decisions,
    tool,
)
from tether.stores.memory import MemoryStore
from tether.testing import ScriptedModel


class Address(BaseModel):
    street: str
    city: str


@tool(approval=True)
def ship(to: str) -> str:
    """Ship the parcel."""
    return f"shipped to {to}"


def test_a_question_pauses_the_run_and_the_answer_is_the_result_the_model_reads() -> None:
    model = ScriptedModel([Action("ask_human", {"question": "Which size?"}), "Ordered a large."])
    agent = Agent(model, [ask_human()])
    paused = agent.run_sync("order a shirt")
    assert paused.status == "paused" and paused.events[-1].reason == "question"  # type: ignore[union-attr]
    item = paused.items[0]
    assert item.status == "awaiting-answer"
    asked = [e for e in paused.events if e.kind == "question-asked"]
    assert asked[0].question == "Which size?"  # type: ignore[union-attr]
    done = agent.run_sync(RunState.from_json(paused.state.answer(item.call.id, "large").to_json()))
    assert done.status == "finished" and done.output == "Ordered a large."
    result = done.context[-2]
    assert (result.role, result.content, result.is_error) == ("tool", "large", False)
    assert model.requests[-1][-1].content == "large"


def test_an_answer_is_recorded_from_another_process_and_the_run_resumes_by_id() -> None:
    store = MemoryStore()
    agent = Agent(ScriptedModel([Action("ask_human", {"question": "Which city?"}), "ok"]), [ask_human()], store=store)
    paused = agent.run_sync("ship it", run_id="r1")
    call_id = paused.items[0].call.id
    asyncio.run(record_decisions(store, "r1", lambda s: s.answer(call_id, "Lyon", by="ana")))
    done = Agent(ScriptedModel(["ok"]), [ask_human()], store=store).run_sync(run_id="r1")
    assert done.status == "finished" and done.context[-2].content == "Lyon"


def test_a_structured_answer_is_validated_against_the_questions_schema() -> None:
    ask = ask_human("ask_address", answer=Address)
    assert ask.answer is not None and ask.answer["required"] == ["street", "city"]
    agent = Agent(ScriptedModel([Action("ask_address", {"question": "Where to?"}), "ok"]), [ask])
    paused = agent.run_sync("ship")
    call_id = paused.items[0].call.id
    with pytest.raises(StateError, match=r"answer for call .* does not fit"):
        agent.run_sync(paused.state.answer(call_id, {"street": "1 Rue"}))
    done = agent.run_sync(paused.state.answer(call_id, {"street": "1 Rue", "city": "Lyon"}))
    assert done.context[-2].content == '{"city": "Lyon", "street": "1 Rue"}'


def test_a_literal_answer_only_takes_its_choices() -> None:
    ask = ask_human("pick", answer=Literal["yes", "no"])
    agent = Agent(ScriptedModel([Action("pick", {"question": "Go?"}), "ok"]), [ask])
    paused = agent.run_sync("decide")
    with pytest.raises(StateError):
        agent.run_sync(paused.state.answer(paused.items[0].call.id, "maybe"))


def test_questions_and_approvals_wait_together_each_with_its_own_verdicts() -> None:
    model = ScriptedModel([[Action("ask_human", {"question": "Gift wrap?"}), Action("ship", {"to": "ann"})], "ok"])
    agent = Agent(model, [ask_human(), ship])
    paused = agent.run_sync("ship to ann")
    by_name = {p.call.name: p for p in paused.items}
    assert by_name["ask_human"].status == "awaiting-answer" and by_name["ship"].status == "awaiting-approval"
    assert paused.events[-1].reason == "approval"  # type: ignore[union-attr]
    with pytest.raises(StateError, match="decide it with answer"):
        paused.state.approve(by_name["ask_human"].call.id)
    with pytest.raises(StateError, match="decide it with approve or deny"):
        paused.state.answer(by_name["ship"].call.id, "yes")
    state = paused.state.answer(by_name["ask_human"].call.id, "no").approve(by_name["ship"].call.id)
    done = agent.run_sync(state)
    assert [m.content for m in done.context if m.role == "tool"] == ["no", "shipped to ann"]


def test_an_answer_is_bound_to_the_exact_question_it_was_given_for() -> None:
    agent = Agent(ScriptedModel([Action("ask_human", {"question": "Refund $5?"}), "ok"]), [ask_human()])
    paused = agent.run_sync("refund")
    answered = paused.state.answer(paused.items[0].call.id, "yes")
    p = answered.open_calls[0]
    other = ToolCall(p.call.id, p.call.name, '{"question": "Refund $5000?"}')
    forged = dataclasses.replace(answered, open_calls=(dataclasses.replace(p, call=other),))
    with pytest.raises(StateTampered, match="other arguments"):
        agent.run_sync(forged)


def test_a_signed_answer_verifies_and_an_unsigned_one_is_refused() -> None:
    key = b"k" * 32
    agent = Agent(ScriptedModel([Action("ask_human", {"question": "Name?"}), "ok"]), [ask_human()], signing_key=key)
    paused = agent.run_sync("greet")
    call_id = paused.items[0].call.id
    with pytest.raises(StateTampered):
        agent.run_sync(paused.state.answer(call_id, "Ann"))
    assert agent.run_sync(paused.state.answer(call_id, "Ann", key=key)).context[-2].content == "Ann"
