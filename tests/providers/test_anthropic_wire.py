"""The Anthropic Messages wire shape: system, tool_use / tool_result blocks, headers, usage."""

from __future__ import annotations

import pytest

from tether import Message, ToolCall, UserError, tool
from tether.context import Context
from tether.providers import Anthropic
from tether.providers.anthropic import to_anthropic

from .conftest import Make
from .fakeserver import FakeServer, Reply, turn


@tool(effect="none")
def look_up(order_id: str) -> str:
    """Find an order."""
    return order_id


CONTEXT = Context(
    [
        Message.system("Be brief."),
        Message.user("Where are A1 and B2?"),
        Message.assistant(
            "Checking both.",
            [
                ToolCall("c1", "look_up", '{"order_id": "A1"}'),
                ToolCall("c2", "look_up", '{"order_id": "B2"}'),
            ],
        ),
        Message.tool_result("c1", "shipped", name="look_up"),
        Message.tool_result("c2", "no such order", name="look_up", is_error=True),
        Message.assistant("", [ToolCall("c3", "look_up", "{not json")]),
        Message.tool_result("c3", "bad arguments", is_error=True),
        Message.user("Thanks."),
    ]
)


def test_the_context_maps_to_system_and_blocks() -> None:
    system, messages = to_anthropic(CONTEXT)
    assert system == "Be brief."
    assert messages == [
        {"role": "user", "content": "Where are A1 and B2?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking both."},
                {"type": "tool_use", "id": "c1", "name": "look_up", "input": {"order_id": "A1"}},
                {"type": "tool_use", "id": "c2", "name": "look_up", "input": {"order_id": "B2"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "shipped"},
                {"type": "tool_result", "tool_use_id": "c2", "content": "no such order", "is_error": True},
            ],
        },
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c3", "name": "look_up", "input": {}}]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c3", "content": "bad arguments", "is_error": True},
            ],
        },
        {"role": "user", "content": "Thanks."},
    ]


async def test_the_request_carries_headers_tools_and_options(make: Make, server: FakeServer) -> None:
    server.push(turn("ok"))
    await make(
        "anthropic",
        api_key="sk-ant",
        max_tokens=300,
        temperature=0.0,
        tool_choice="required",
        parallel_tool_calls=False,
        cache=False,  # the cache breakpoints have their own test
    ).decide(CONTEXT, (look_up,))
    request = server.requests[0]
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == "sk-ant" and request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    body = request.json()
    assert list(body) == ["model", "max_tokens", "stream", "temperature", "system", "tools", "tool_choice", "messages"]
    assert body["tools"] == [{"name": "look_up", "description": "Find an order.", "input_schema": look_up.parameters}]
    assert body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert body["max_tokens"] == 300 and body["stream"] is True


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("look_up", {"type": "tool", "name": "look_up"}),
        ({"type": "any"}, {"type": "any"}),
        (None, None),
    ],
)
async def test_tool_choice_maps_to_anthropic_terms(
    make: Make, server: FakeServer, choice: str | dict[str, str] | None, expected: dict[str, str] | None
) -> None:
    server.push(turn("ok"))
    await make("anthropic", tool_choice=choice).decide(CONTEXT, (look_up,))
    assert server.requests[0].json().get("tool_choice") == expected


async def test_usage_counts_cached_prompt_tokens_as_input(make: Make, server: FakeServer) -> None:
    server.push(
        Reply(
            200,
            {
                "type": "message",
                "content": [{"type": "text", "text": "hi"}],
                "usage": {
                    "input_tokens": 5,
                    "cache_read_input_tokens": 100,
                    "cache_creation_input_tokens": 20,
                    "output_tokens": 3,
                },
            },
        )
    )
    reply = await make("anthropic", stream=False).decide(CONTEXT, ())
    assert reply.usage is not None and (reply.usage.input_tokens, reply.usage.output_tokens) == (125, 3)


async def test_streamed_usage_and_tool_input_are_assembled(make: Make, server: FakeServer) -> None:
    server.push(turn("Looking.", [("t1", "look_up", {"order_id": "Z9"})], usage=(40, 9), chunk=2))
    reply = await make("anthropic").decide(CONTEXT, (look_up,))
    assert reply.content == "Looking."
    assert reply.tool_calls == (ToolCall("t1", "look_up", '{"order_id": "Z9"}'),)
    assert reply.usage is not None and (reply.usage.input_tokens, reply.usage.output_tokens) == (40, 9)


async def test_a_tool_use_without_input_deltas_keeps_its_start_input(make: Make, server: FakeServer) -> None:
    events = [
        ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 1}}}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "tool_use", "id": "t1", "name": "look_up", "input": {}},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 2}},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    server.push(Reply.sse(events))
    reply = await make("anthropic").decide(CONTEXT, (look_up,))
    assert reply.tool_calls == (ToolCall("t1", "look_up", "{}"),)


def test_the_official_endpoint_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(UserError, match="ANTHROPIC_API_KEY"):
        Anthropic("claude-haiku-4-5")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    assert Anthropic("claude-haiku-4-5").api_key == "sk-ant-env"
