"""What a gate judges, what a person edits and what a person answers are checked before they count:
no NaN past a threshold, no crash on a lone surrogate, no edited arguments that do not fit, no unvalidated answer."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tether import Action, Agent, StateError, ToolCall, ask_human, record_decisions, tool
from tether.messages import Message
from tether.stores.memory import MemoryStore
from tether.stores.sqlite import SQLiteStore
from tether.testing import ScriptedModel

ran: list[Any] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


@pytest.mark.parametrize("arguments", ['{"amount": NaN}', '{"amount": Infinity}', '{"amount": -Infinity}'])
def test_nan_and_infinity_are_not_json_and_cannot_slip_past_a_threshold_gate(arguments: str) -> None:
    # Not the suite's refund: the gate here is a threshold on a number, which NaN must not slip past.
    @tool(approval=lambda a, ctx: a["amount"] > 50)
    def refund(amount: float) -> str:
        """Refund."""
        ran.append(amount)
        return "refunded"

    call = Message.assistant("", [ToolCall("c1", "refund", arguments)])
    result = Agent(ScriptedModel([call, "ok"]), [refund]).run_sync("go")
    assert ran == [] and result.context[2].is_error and "not a JSON value" in result.context[2].content


def test_a_lone_surrogate_in_gated_arguments_pauses_the_run_instead_of_crashing_it(tmp_path: Path) -> None:
    @tool(approval=True)
    def note(text: str) -> str:
        """Write a note."""
        ran.append(text)
        return "noted"

    store = SQLiteStore(tmp_path / "runs.db")
    call = Message.assistant("", [ToolCall("c1", "note", '{"text": "\\ud800"}')])
    paused = Agent(ScriptedModel([call]), [note], store=store).run_sync("go", run_id="r1")
    assert paused.status == "paused"
    done = Agent(ScriptedModel(["ok"]), [note], store=store).run_sync(paused.state.approve("c1"))
    assert done.status == "finished" and ran == ["\ud800"]
    store.close()


def test_edited_arguments_that_do_not_fit_leave_the_run_paused_and_decidable_again() -> None:
    @tool(approval=True)
    def write(path: str) -> str:
        """Write a file."""
        ran.append(path)
        return "written"

    store = MemoryStore()
    paused = Agent(ScriptedModel([Action("write", {"path": "a.txt"})]), [write], store=store).run_sync(
        "go", run_id="r1"
    )
    call_id = paused.items[0].id
    asyncio.run(record_decisions(store, "r1", lambda s: s.approve(call_id, {"path": 5})))
    agent = Agent(ScriptedModel(["ok"]), [write], store=store)
    with pytest.raises(StateError, match=r"edited arguments for call .* do not fit"):
        agent.run_sync(run_id="r1")
    assert asyncio.run(store.get("r1")).status == "paused"  # type: ignore[union-attr]  # nothing was committed
    asyncio.run(record_decisions(store, "r1", lambda s: s.approve(call_id, {"path": "b.txt"}), replace=True))
    assert agent.run_sync(run_id="r1").status == "finished" and ran == ["b.txt"]


def test_the_model_reads_the_validated_answer_not_what_the_person_typed() -> None:
    class Size(BaseModel):
        size: int

    ask = ask_human("ask_size", answer=Size)
    agent = Agent(ScriptedModel([Action("ask_size", {"question": "size?"}), "ok"]), [ask])
    paused = agent.run_sync("order")
    done = agent.run_sync(paused.state.answer(paused.items[0].id, {"size": "7"}))
    assert done.context[-2].content == '{"size": 7}'
