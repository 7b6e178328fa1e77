"""Typed output under the constrained protocol: the final answer is decoded under T's JSON Schema.

The protocol is pure (no model); ``ConstrainedOpenAI`` runs over a real
loopback HTTP server (``providers.fakeserver``).
"""

from __future__ import annotations

import json
from typing import Any, Literal

import pydantic
import pytest

from providers.fakeserver import FakeServer
from providers.fakeserver import turn as reply
from support import add
from tether import Agent, Context, Message, ToolCall
from tether._schema.check import compile_schema
from tether.output import OutputSpec
from tether.providers.constrained import ConstrainedOpenAI, choice_schema, offered, parse_reply, request


class Ticket(pydantic.BaseModel):
    title: str
    priority: Literal["low", "medium", "high"]


class Batch(pydantic.BaseModel):
    tickets: list[Ticket]


OUT = OutputSpec(Batch).tool


def test_the_output_tool_takes_the_place_of_final_answer() -> None:
    schema = choice_schema([add, OUT])
    assert offered(schema) == ["add", "final_result"]
    check = compile_schema(schema)

    def valid(value: Any) -> bool:
        try:
            check.validate_python(value)
        except ValueError:
            return False
        return True

    assert valid({"name": "final_result", "arguments": {"tickets": [{"title": "a", "priority": "low"}]}})
    assert not valid({"name": "final_result", "arguments": {"tickets": [{"title": "a", "priority": "urgent"}]}})
    assert not valid({"name": "final_answer", "arguments": {"text": "a"}})  # text cannot end it
    assert valid([{"name": "add", "arguments": {"a": 1, "b": 2}}])
    assert not valid([{"name": "final_result", "arguments": {"tickets": []}}])  # the answer is not a call in a list
    typed = parse_reply(json.dumps({"name": "final_result", "arguments": {"tickets": []}}))
    assert [(c.name, json.loads(c.arguments)) for c in typed.tool_calls] == [("final_result", {"tickets": []})]


def test_final_only_allows_just_the_typed_answer() -> None:
    schema = choice_schema([add, OUT], final_only=True)
    assert [c["properties"]["name"]["const"] for c in schema["anyOf"]] == ["final_result"]
    assert "final_result__Ticket" in schema["$defs"]


def test_the_prompt_and_nudges_name_the_output_tool() -> None:
    ctx = Context([Message.user("2+3?")]).add(
        Message("assistant", "", (ToolCall("c1", "add", '{"a": 2, "b": 3}'),)),
        Message.tool_result("c1", "5", name="add"),
    )
    body = request(ctx, [add, OUT], final_only=True)
    text = json.dumps(body["messages"])
    assert "final_answer" not in text
    system = body["messages"][0]["content"]
    assert (
        '{"name": "final_result", "arguments": <your answer, as JSON: final_result(tickets: list[Ticket])>}' in system
    )
    assert "- add(" in system and "- final_result(" not in system  # listed as the answer, not as a tool
    assert "give the answer with final_result" in body["messages"][-1]["content"]
    assert body["messages"][-1]["content"].endswith("Now answer the user with final_result.")


def test_the_first_decision_offers_tools_but_not_the_output_tool() -> None:
    from tether.providers._tool_choice import decision_request

    body = decision_request(Context([Message.user("2+3?")]), [add, OUT])
    enum = body["response_format"]["json_schema"]["schema"]["properties"]["tool"]["enum"]
    assert enum == ["add", "none"]


@pytest.fixture
def server() -> Any:
    with FakeServer() as fake:
        yield fake


def _call(name: str, args: dict[str, Any]) -> str:
    return json.dumps({"name": name, "arguments": args})


async def test_constrained_openai_sends_the_types_schema_and_returns_an_instance(server: FakeServer) -> None:
    server.push(
        reply(_call("final_result", {"tickets": [{"title": "refund", "priority": "High"}]})),
        reply(_call("final_result", {"tickets": [{"title": "refund", "priority": "high"}]})),
    )
    model = ConstrainedOpenAI("qwen", base_url=server.openai_url)
    result = await Agent(model, output_type=Batch).run("triage: I want a refund")
    await model.aclose()
    assert result.output == Batch(tickets=[Ticket(title="refund", priority="high")])
    sent = server.requests[0].json()["response_format"]["json_schema"]["schema"]
    assert [c["properties"]["name"]["const"] for c in sent["anyOf"]] == ["final_result"]
    retry = server.requests[1].json()["messages"][-1]["content"]
    assert "field 'tickets.0.priority'" in retry and "final_result" in retry
    server.assert_consumed()
