"""Validation notes that help small models (issue 12 item 5): resolved schemas, corrected examples."""

from __future__ import annotations

import json
from typing import Literal

import pydantic
import pytest
from inline_snapshot import snapshot

from tether import Action, Agent, Tool, tool
from tether.output import OutputSpec
from tether.testing import ScriptedModel
from tether.tools import ArgumentsInvalid


class Customer(pydantic.BaseModel):
    name: str
    email: str


class Ticket(pydantic.BaseModel):
    title: str
    priority: Literal["low", "medium", "high"]
    customer: Customer


class Batch(pydantic.BaseModel):
    tickets: list[Ticket]


def note(spec_or_tool: object, args: dict) -> str:
    with pytest.raises(ArgumentsInvalid) as caught:
        spec_or_tool.validate(args)  # type: ignore[attr-defined]
    return str(caught.value)


def test_a_nested_field_shows_its_resolved_schema_never_a_ref() -> None:
    spec = OutputSpec(Batch)
    assert "$ref" in json.dumps(spec.tool.parameters)  # the tool's schema points into $defs ...
    text = note(spec, {"tickets": [{"title": "refund", "priority": "high", "customer": "Ada"}]})
    assert "$ref" not in text  # ... the note writes the target out
    assert text == snapshot("""\
invalid arguments for tool 'final_result':
- field 'tickets.0.customer': Input should be a valid dictionary or instance of Customer (got "Ada")
  expected: {"properties": {"email": {"type": "string"}, "name": {"type": "string"}}, "required": ["name", "email"], "type": "object"}\
""")


def test_mechanical_mistakes_come_with_a_corrected_example_that_validates() -> None:
    spec = OutputSpec(Batch)
    sent = {"tickets": [
        {"title": "refund", "priority": "HIGH", "customer": '{"name": "Ada", "email": "ada@example.com"}'},
        {"titel": "late parcel", "priority": "meduim", "customer": {"name": "Bob", "email": "bob@example.com"}},
    ]}  # fmt: skip
    text = note(spec, sent)
    assert "- field 'tickets.0.priority': Input should be 'low', 'medium' or 'high' (got \"HIGH\")" in text
    assert '  expected: {"enum": ["low", "medium", "high"], "type": "string"}' in text
    assert "- field 'tickets.1.title': Field required" in text
    fixed = json.loads(text.split("check it says what you mean): ", 1)[1])
    assert fixed == {"tickets": [
        {"title": "refund", "priority": "high", "customer": {"name": "Ada", "email": "ada@example.com"}},
        {"title": "late parcel", "priority": "medium", "customer": {"name": "Bob", "email": "bob@example.com"}},
    ]}  # fmt: skip
    assert spec.validate(fixed).tickets[1].title == "late parcel"


def test_no_example_when_only_the_model_knows_the_fix() -> None:
    text = note(OutputSpec(Batch), {"tickets": [{"title": "refund", "priority": "urgent", "customer": {"name": "A"}}]})
    assert "field 'tickets.0.customer.email': Field required" in text
    assert "corrected" not in text


def test_one_object_where_a_list_belongs_is_wrapped() -> None:
    ticket = {"title": "x", "priority": "low", "customer": {"name": "A", "email": "a@b"}}
    text = note(OutputSpec(Batch), {"tickets": ticket})
    assert json.loads(text.split("what you mean): ", 1)[1]) == {"tickets": [ticket]}


def test_a_decorated_tool_with_a_nested_model_parameter_gets_the_same_help() -> None:
    @tool(effect="none")
    def file_ticket(ticket: Ticket) -> str:
        """File one ticket."""
        return ticket.title

    text = note(file_ticket, {"ticket": {"title": "x", "priority": "Low", "customer": {"name": "A", "email": "a@b"}}})
    assert "- field 'ticket.priority'" in text and '"enum": ["low", "medium", "high"]' in text
    assert '{"ticket": {"title": "x", "priority": "low"' in text
    # The model reads it as the call's result, and fixes itself.
    model = ScriptedModel(
        [
            Action(
                "file_ticket", {"ticket": {"title": "x", "priority": "Low", "customer": {"name": "A", "email": "a@b"}}}
            ),
            Action(
                "file_ticket", {"ticket": {"title": "x", "priority": "low", "customer": {"name": "A", "email": "a@b"}}}
            ),
            "filed",
        ]
    )
    result = Agent(model, [file_ticket]).run_sync("file it")
    assert [m.is_error for m in result.context if m.role == "tool"] == [True, False]


def test_a_schema_tool_union_member_named_by_index_shows_that_member() -> None:
    t = Tool.from_schema("t", "", {"type": "object", "properties": {"v": {"anyOf": [
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}, {"type": "string"}]}},
        "required": ["v"]}, lambda v: v)  # fmt: skip
    text = note(t, {"v": {"n": "x"}})
    assert "- field 'v.anyOf[0].n'" in text
    assert '  expected: {"type": "integer"}' in text


def test_an_unknown_field_lists_the_fields_allowed_there() -> None:
    @tool(effect="none")
    def book(room: int) -> str:
        return "ok"

    text = note(book, {"rooom": 3})
    assert "allowed fields here: 'room'" in text
    assert text.endswith('check it says what you mean): {"room": 3}')
