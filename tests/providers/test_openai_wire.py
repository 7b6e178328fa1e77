"""The OpenAI-compatible wire shape: headers, deterministic bodies, keys, options."""

from __future__ import annotations

import pytest

from tether import Message, ToolCall, UserError, tool
from tether.context import Context
from tether.providers import OpenAICompatible
from tether.providers.openai_compat import openai_message

from .conftest import Make
from .fakeserver import FakeServer, turn


@tool(effect="none")
def look_up(order_id: str) -> str:
    """Find an order.

    Args:
        order_id: the order number.
    """
    return order_id


CONTEXT = Context(
    [
        Message.system("Be brief."),
        Message.user("Where is A1? ✓"),
        Message.assistant("Checking.", [ToolCall("c1", "look_up", '{"order_id": "A1"}')]),
        Message.tool_result("c1", "shipped", name="look_up"),
    ]
)


async def test_the_request_body_is_exact_compact_and_ordered(make: Make, server: FakeServer) -> None:
    server.push(turn("ok"))
    await make(
        temperature=0.2, max_tokens=50, tool_choice="look_up", parallel_tool_calls=False, extra_body={"seed": 7}
    ).decide(CONTEXT, (look_up,))
    assert (
        server.requests[0].body
        == (
            '{"model":"fake-model","stream":true,"stream_options":{"include_usage":true},'
            '"temperature":0.2,"max_tokens":50,"tools":[{"type":"function","function":{"name":"look_up",'
            '"description":"Find an order.","parameters":{"additionalProperties":false,"properties":'
            '{"order_id":{"description":"the order number.","type":"string"}},"required":["order_id"],'
            '"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"look_up"}},'
            '"parallel_tool_calls":false,"seed":7,"messages":[{"role":"system","content":"Be brief."},'
            '{"role":"user","content":"Where is A1? ✓"},{"role":"assistant","content":"Checking.",'
            '"tool_calls":[{"id":"c1","type":"function","function":{"name":"look_up","arguments":'
            '"{\\"order_id\\": \\"A1\\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"shipped"}]}'
        ).encode()
    )


async def test_the_same_context_always_serialises_to_the_same_bytes(make: Make, server: FakeServer) -> None:
    server.push(turn("a"), turn("b"))
    provider = make(stream=False)
    await provider.decide(CONTEXT, (look_up,))
    await provider.decide(Context(list(CONTEXT)), (look_up,))
    assert server.requests[0].body == server.requests[1].body
    assert b'"stream"' not in server.requests[0].body


async def test_headers_carry_the_key_and_an_idempotency_key(make: Make, server: FakeServer) -> None:
    server.push(turn("a"))
    await make(api_key="sk-test", extra_headers={"X-Title": "tether"}).decide(CONTEXT, ())
    headers = server.requests[0].headers
    assert server.requests[0].path == "/v1/chat/completions"
    assert headers["authorization"] == "Bearer sk-test"
    assert headers["content-type"] == "application/json" and headers["accept"] == "text/event-stream"
    assert headers["idempotency-key"].startswith("tether-") and headers["x-title"] == "tether"


async def test_no_tools_means_no_tool_fields(make: Make, server: FakeServer) -> None:
    server.push(turn("a"))
    await make(tool_choice="auto", parallel_tool_calls=True).decide(CONTEXT, ())
    body = server.requests[0].json()
    assert "tools" not in body and "tool_choice" not in body and "parallel_tool_calls" not in body


async def test_a_local_server_needs_no_key(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.push(turn("a"))
    async with OpenAICompatible("llama", base_url=server.openai_url) as model:
        await model.decide(CONTEXT, ())
    assert "authorization" not in server.requests[0].headers


def test_keys_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("GROQ_API_KEY", "gsk-env")
    assert OpenAICompatible("gpt-4o-mini").api_key == "sk-env"
    groq = OpenAICompatible("llama", base_url="https://api.groq.com/openai/v1", api_key_env="GROQ_API_KEY")
    assert groq.api_key == "gsk-env"
    assert "env" not in repr(groq)  # keys never show up in reprs


def test_missing_keys_are_a_clear_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        OpenAICompatible("gpt-4o-mini")
    with pytest.raises(UserError, match="DEEPSEEK_API_KEY"):
        OpenAICompatible("deepseek-chat", base_url="https://api.deepseek.com/v1", api_key_env="DEEPSEEK_API_KEY")


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"base_url": "ftp://x"}, "an http"),
        ({"max_retries": -1}, "max_retries"),
        ({"extra_body": {"messages": []}}, "messages"),
        ({"tool_choice": 3}, "tool_choice"),
    ],
)
def test_bad_configuration_is_refused(options: dict[str, object], words: str) -> None:
    with pytest.raises(UserError, match=words):
        OpenAICompatible("m", **{"api_key": "k", "base_url": "http://127.0.0.1:1/v1", **options})  # type: ignore[arg-type]


async def test_usage_and_content_parts_are_read(make: Make, server: FakeServer) -> None:
    from .fakeserver import Reply

    server.push(
        Reply(
            200,
            {
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {
                            "role": "assistant",
                            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                        },
                    }
                ],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4},
            },
        )
    )
    reply = await make(stream=False).decide(CONTEXT, ())
    assert reply.content == "ab" and reply.usage is not None
    assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.requests) == (3, 4, 1)


async def test_one_provider_reuses_its_connection(make: Make, server: FakeServer) -> None:
    server.push(turn("a"), turn("b"), turn("c"))
    provider = make()
    for _ in range(3):
        await provider.decide(CONTEXT, ())
    client = provider._client
    assert client is not None
    await provider.aclose()
    assert provider._client is None and client.is_closed
    server.push(turn("d"))
    assert (await provider.decide(CONTEXT, ())).content == "d"  # a closed provider reopens


async def test_a_given_http_client_is_used_and_left_open(server: FakeServer) -> None:
    import httpx

    async with httpx.AsyncClient() as client:
        server.push(turn("a"))
        model = OpenAICompatible("m", base_url=server.openai_url, api_key="k", http_client=client)
        assert (await model.decide(CONTEXT, ())).content == "a"
        await model.aclose()
        assert not client.is_closed


def test_run_sync_twice_with_one_provider_leaves_no_open_sockets(server: FakeServer) -> None:
    import gc
    import warnings

    from tether import Agent

    server.push(turn("first"), turn("second"))
    model = OpenAICompatible("m", base_url=server.openai_url, api_key="k")
    agent = Agent(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert agent.run_sync("one").output == "first"  # each run_sync has its own event loop
        assert agent.run_sync("two").output == "second"
        del agent, model
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_messages_convert_to_the_openai_wire_shape() -> None:
    call = ToolCall("c1", "add", '{"a": 1}')
    assert openai_message(Message.assistant("", [call])) == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}],
    }
    assert openai_message(Message.tool_result("c1", "2", name="add")) == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "2",
    }
    assert openai_message(Message.user("hi")) == {"role": "user", "content": "hi"}
