"""Typed output (issue 12 item 1): Agent(output_type=T) ends a run with a T instance."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Literal

import pydantic
import pytest
from typing_extensions import TypedDict  # pydantic wants it on Python < 3.12

from support import refund
from tether import Action, Agent, FunctionPolicy, RunState, state_of, tool
from tether.events import from_dict, to_dict
from tether.exceptions import UserError
from tether.output import OutputSpec
from tether.stores.memory import MemoryStore
from tether.testing import ScriptedModel
from tether.tools import result_text


class Ticket(pydantic.BaseModel):
    title: str
    priority: Literal["low", "medium", "high"]


class Triage(pydantic.BaseModel):
    """How to handle a batch of support mail."""

    tickets: list[Ticket]
    summary: str


@dataclasses.dataclass
class City:
    name: str
    population: int


class Point(TypedDict):
    x: int
    y: int


@pydantic.dataclasses.dataclass
class Cat:
    kind: Literal["cat"]
    lives: int


class Dog(pydantic.BaseModel):
    kind: Literal["dog"]
    good: bool


def typed(output_type: object, *replies: object, **kw: object) -> Agent:
    return Agent(ScriptedModel(list(replies)), output_type=output_type, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("output_type", "args", "expected"),
    [
        (
            Triage,
            {"tickets": [{"title": "refund", "priority": "high"}], "summary": "one"},
            Triage(tickets=[Ticket(title="refund", priority="high")], summary="one"),
        ),
        (City, {"name": "Lyon", "population": "522250"}, City("Lyon", 522250)),
        (Point, {"x": 1, "y": "2"}, {"x": 1, "y": 2}),
        (list[int], {"value": [1, "2", 3]}, [1, 2, 3]),
        (Literal["yes", "no"], {"value": "no"}, "no"),
        (Cat | Dog, {"value": {"kind": "dog", "good": True}}, Dog(kind="dog", good=True)),
        (list[City], {"value": [{"name": "Oslo", "population": 709000}]}, [City("Oslo", 709000)]),
    ],
    ids=["pydantic-model", "dataclass", "typeddict", "list", "literal", "union", "list-of-dataclasses"],
)
def test_each_kind_of_output_type_ends_the_run_with_an_instance(
    output_type: object, args: dict, expected: object
) -> None:
    agent = typed(output_type, Action("final_result", args))
    result = agent.run_sync("go")
    assert result.status == "finished"
    assert result.output == expected
    assert type(result.output) is type(expected)
    # The journal keeps the JSON, and the instance is rebuilt from it.
    assert agent.output_of(result.events) == expected
    assert agent.output_of(result.state) == expected


def test_the_output_tool_schema_is_the_types_own_and_non_objects_are_wrapped() -> None:
    model = OutputSpec(Triage).tool
    assert model.terminal and model.name == "final_result"
    assert model.parameters["required"] == ["tickets", "summary"]
    assert "$defs" in model.parameters and "title" not in model.parameters
    assert "How to handle a batch of support mail." in model.description
    listed = OutputSpec(list[int]).tool.parameters
    assert listed == {
        "type": "object",
        "properties": {"value": {"items": {"type": "integer"}, "type": "array"}},
        "required": ["value"],
        "additionalProperties": False,
    }


def test_a_plain_agent_still_answers_with_text() -> None:
    result = Agent(ScriptedModel(["just text"])).run_sync("go")
    assert result.output == "just text"


def test_a_value_that_fails_validation_is_a_note_and_the_model_tries_again() -> None:
    model = ScriptedModel(
        [
            Action("final_result", {"tickets": [{"title": "refund", "priority": "urgent"}], "summary": "one"}),
            Action("final_result", {"tickets": [{"title": "refund", "priority": "high"}], "summary": "one"}),
        ]
    )
    result = Agent(model, output_type=Triage).run_sync("triage")
    assert result.status == "finished"
    assert result.output.tickets[0].priority == "high"
    note = next(m for m in result.context if m.role == "tool" and m.is_error)
    assert "field 'tickets.0.priority'" in note.content
    assert '"enum": ["low", "medium", "high"]' in note.content
    assert [e.error for e in result.events if e.kind == "tool-finished"] == ["invalid-arguments", None]


def test_a_text_reply_is_refused_with_a_note_when_an_output_type_is_set() -> None:
    model = ScriptedModel(
        ["Lyon, about half a million people", Action("final_result", {"name": "Lyon", "population": 1})]
    )
    result = Agent(model, output_type=City).run_sync("biggest city near Geneva?")
    assert result.output == City("Lyon", 1)
    noted = [e for e in result.events if e.kind == "noted"]
    assert len(noted) == 1
    assert "call the 'final_result' tool" in noted[0].message.content
    assert noted[0].message.role == "user" and noted[0].message.is_error
    # The model read the refusal before it tried again.
    assert model.requests[1].last() == noted[0].message


def test_retries_exhausted_fail_the_run_with_a_clear_error() -> None:
    bad = Action("final_result", {"name": "Lyon"})
    agent = Agent(ScriptedModel(["text instead", bad]), output_type=City, output_retries=1)
    result = agent.run_sync("go")
    assert result.status == "failed"
    assert result.output is None
    assert "did not give a valid City after 2 tries (output_retries=1)" in (result.error or "")
    assert "field 'population': Field required" in (result.error or "")
    failed = result.events[-1]
    assert failed.kind == "failed" and failed.error_type == "OutputInvalid"


def test_output_retries_zero_fails_on_the_first_bad_value() -> None:
    result = Agent(ScriptedModel([Action("final_result", {"name": 3})]), output_type=City, output_retries=0).run_sync(
        "go"
    )
    assert result.status == "failed" and "after 1 tries" in (result.error or "")


def test_bad_output_settings_are_refused_early() -> None:
    with pytest.raises(UserError, match="output_retries"):
        Agent(ScriptedModel([]), output_type=City, output_retries=-1)
    with pytest.raises(UserError, match="no JSON Schema"):
        Agent(ScriptedModel([]), output_type=asyncio.Event)

    @tool(effect="none")
    def final_result() -> str:
        return ""

    with pytest.raises(UserError, match="reserves"):
        Agent(ScriptedModel([]), [final_result], output_type=City)


def test_the_output_tool_runs_with_other_tools_and_the_turn_settles_first() -> None:
    seen = []

    @tool(effect="none")
    def look_up(city: str) -> str:
        seen.append(city)
        return "522250"

    model = ScriptedModel(
        [
            Action("look_up", {"city": "Lyon"}),
            [Action("look_up", {"city": "Lyon again"}), Action("final_result", {"name": "Lyon", "population": 522250})],
        ]
    )
    result = Agent(model, [look_up], output_type=City).run_sync("go")
    assert result.output == City("Lyon", 522250)
    assert seen == ["Lyon", "Lyon again"]


def test_the_finished_event_carries_the_json_and_old_journals_still_load() -> None:
    result = typed(City, Action("final_result", {"name": "Lyon", "population": 1})).run_sync("go")
    finished = result.events[-1]
    assert json.loads(finished.output) == {"name": "Lyon", "population": 1}
    assert from_dict(json.loads(json.dumps(to_dict(finished)))) == finished
    # A journal written before typed output existed: the same kinds, the same fields.
    old = [{"kind": "run-started", "run_id": "r", "messages": [{"role": "user", "content": "hi"}]},
           {"kind": "model-replied", "message": {"role": "assistant", "content": "hello"}},
           {"kind": "finished", "output": "hello"}]  # fmt: skip
    assert state_of([from_dict(e) for e in old]).status == "finished"


def test_a_paused_run_with_an_output_type_resumes_from_its_json_state() -> None:
    def make() -> Agent:
        replies = [Action("refund", {"order": "A1"}), Action("final_result", {"name": "done", "population": 0})]
        return Agent(ScriptedModel(replies), [refund], output_type=City, store=store)

    store = MemoryStore()
    paused = make().run_sync("refund A1")
    assert paused.status == "paused" and paused.output is None
    state = RunState.from_json(paused.state.to_json()).approve(paused.items[0].call.id)
    agent = Agent(ScriptedModel([Action("final_result", {"name": "done", "population": 0})]), [refund],
                  output_type=City, store=store)  # fmt: skip
    done = agent.run_sync(state)
    assert done.output == City("done", 0)
    assert agent.output_of(asyncio.run(store.load(done.run_id))) == City("done", 0)


def test_changing_the_output_type_makes_a_paused_run_incompatible() -> None:
    from tether.exceptions import StateIncompatible

    paused = Agent(ScriptedModel([Action("refund", {"order": "A1"})]), [refund], output_type=City).run_sync("go")
    other = Agent(ScriptedModel([]), [refund], output_type=Point)
    with pytest.raises(StateIncompatible):
        other.run_sync(paused.state.approve(paused.items[0].call.id))


def test_a_child_with_an_output_type_answers_its_parent_with_json() -> None:
    child = typed(City, Action("final_result", {"name": "Lyon", "population": 522250}), name="geo")
    parent = Agent(ScriptedModel([Action("geo", {"task": "biggest city near Geneva"}), "Lyon it is."]),
                   [child.as_tool()])  # fmt: skip
    result = parent.run_sync("go")
    answer = next(m for m in result.context if m.role == "tool")
    assert json.loads(answer.content) == {"name": "Lyon", "population": 522250}
    assert result.output == "Lyon it is."


def test_a_typed_child_used_outside_a_run_returns_json_too() -> None:
    child = typed(City, Action("final_result", {"name": "Oslo", "population": 1}), name="geo")
    value = asyncio.run(child.as_tool().fn(task="capital of Norway"))
    assert value == City("Oslo", 1)
    assert json.loads(result_text(value)) == {"name": "Oslo", "population": 1}  # how the loop writes it


def test_a_typed_parent_gets_its_instance_after_a_child_answers() -> None:
    child = Agent(ScriptedModel(["It is Lyon."]), name="geo")
    parent = typed(City, Action("geo", {"task": "which city?"}), Action("final_result", {"name": "Lyon", "population": 5}),
                   tools=[child.as_tool()])  # fmt: skip
    assert parent.run_sync("go").output == City("Lyon", 5)


def test_after_a_handoff_the_agent_driving_the_run_decides_the_output() -> None:
    billing = Agent(ScriptedModel([Action("final_result", {"name": "billing", "population": 2})]),
                    name="billing", output_type=City)  # fmt: skip
    support = Agent(ScriptedModel([Action("transfer_to_billing", {})]), name="support", handoffs=[billing])
    assert support.run_sync("money please").output == City("billing", 2)


def test_the_output_tool_is_shown_to_the_model_like_any_tool() -> None:
    seen = []

    def brain(context: object, tools: list) -> object:
        seen.append([t.definition() for t in tools])
        return Action("final_result", {"name": "x", "population": 1})

    assert Agent(FunctionPolicy(brain), output_type=City).run_sync("go").output == City("x", 1)
    assert [d["name"] for d in seen[0]] == ["final_result"]
    assert seen[0][0]["parameters"]["required"] == ["name", "population"]
