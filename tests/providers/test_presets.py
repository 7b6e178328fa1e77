"""Each named preset against replies written from its vendor's documented shapes.

Sources for the fixtures (written by hand, not captured): DeepSeek "Thinking
Mode", "Create Chat Completion" and "Error Codes"; Groq "Reasoning", "Prompt
Caching", "Errors" and its streamed ``x_groq`` field; Together "Reasoning" and
its streamed chunks; OpenRouter "Streaming" (comments, mid-stream errors),
"Reasoning tokens" and "Errors"; Ollama "OpenAI compatibility"; vLLM
"OpenAI-compatible server" and "Reasoning outputs".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tether import Agent, Message, ProviderError, ToolCall, UserError, tool
from tether.context import Context
from tether.messages import Reasoning
from tether.providers import OpenAICompatible
from tether.providers.presets import PRESETS, split_model

from .conftest import Make, Sleeps
from .fakeserver import FakeServer, Reply, SSEItem


@tool(effect="none")
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: 18 C"


ASK = Context([Message.user("Weather in Paris?")])


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [choice],
        **extra,
    }


def completion(message: dict[str, Any], usage: dict[str, Any], finish: str = "stop") -> dict[str, Any]:
    choice = {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
    return {
        "id": "chatcmpl-2",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [choice],
        "usage": usage,
    }


def call_delta(call_id: str, arguments: str) -> dict[str, Any]:
    function = {"name": "get_weather", "arguments": arguments}
    return {"tool_calls": [{"index": 0, "id": call_id, "type": "function", "function": function}]}


def wire_call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}


def preset_model(make: Make, name: str, **options: Any) -> OpenAICompatible:
    model = make("openai", preset=name, **options)
    assert isinstance(model, OpenAICompatible)
    return model


# -- DeepSeek ------------------------------------------------------------------


def deepseek_tool_turn() -> list[SSEItem]:
    return [
        (":", "keep-alive"),
        chunk({"role": "assistant", "content": None, "reasoning_content": ""}),
        chunk({"content": None, "reasoning_content": "Need the weather "}),
        chunk({"content": None, "reasoning_content": "tool."}),
        chunk({"content": None, **call_delta("call_00_abc", "")}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Paris"}'}}]}),
        chunk({"content": ""}, "tool_calls"),
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "deepseek-v4-pro",
            "choices": [],
            "usage": {
                "prompt_tokens": 120,
                "completion_tokens": 40,
                "total_tokens": 160,
                "prompt_tokens_details": {"cached_tokens": 64},
                "prompt_cache_hit_tokens": 64,
                "prompt_cache_miss_tokens": 56,
                "completion_tokens_details": {"reasoning_tokens": 30},
            },
        },
        "[DONE]",
    ]


async def test_deepseek_sends_reasoning_back_on_tool_turns_only(make: Make, server: FakeServer) -> None:
    answer: list[SSEItem] = [
        chunk({"role": "assistant", "content": None, "reasoning_content": "The tool said 18 C."}),
        chunk({"content": "Paris: 18 C.", "reasoning_content": None}),
        chunk(
            {"content": ""},
            "stop",
            usage={"prompt_tokens": 200, "completion_tokens": 9, "prompt_cache_hit_tokens": 128},
        ),
        "[DONE]",
    ]
    again: list[SSEItem] = [chunk({"role": "assistant", "content": "You are welcome."}, "stop"), "[DONE]"]
    server.push(Reply.sse(deepseek_tool_turn()), Reply.sse(answer), Reply.sse(again))
    agent = Agent(preset_model(make, "deepseek"), [get_weather])
    first = await agent.run("Weather in Paris?")
    assert first.status == "finished" and first.output == "Paris: 18 C."
    replies = [m for m in first.context if m.role == "assistant"]
    assert [m.reasoning for m in replies] == [
        (Reasoning("Need the weather tool."),),
        (Reasoning("The tool said 18 C."),),
    ]
    assert (first.usage.cache_read_tokens, first.usage.input_tokens) == (64 + 128, 120 + 200)
    assert b'"stream_options":{"include_usage":true}' in server.requests[0].body
    assert b"parallel_tool_calls" not in server.requests[0].body
    tool_turn = (
        '{"role":"assistant","content":null,"tool_calls":[{"id":"call_00_abc","type":"function","function":'
        '{"name":"get_weather","arguments":"{\\"city\\": \\"Paris\\"}"}}],"reasoning_content":"Need the weather tool."}'
    )
    assert tool_turn.encode() in server.requests[1].body
    second = await agent.run("Thanks!", context=first.context)
    assert second.output == "You are welcome."
    sent = server.requests[2].json()["messages"]
    assert sent[1]["reasoning_content"] == "Need the weather tool."  # still required for that tool turn
    assert sent[3] == {"role": "assistant", "content": "Paris: 18 C."}  # a turn without tools: none sent
    assert server.requests[1].body[:-2] in server.requests[2].body  # the prefix holds across runs


async def test_deepseek_keep_alive_lines_and_insufficient_balance(make: Make, server: FakeServer) -> None:
    body = json.dumps(completion({"content": "ok"}, {"prompt_tokens": 1, "completion_tokens": 1})).encode()
    server.push(Reply(200, b"\n\n\n" + body))  # blank lines while the request waits in the queue
    model = preset_model(make, "deepseek", stream=False)
    assert (await model.decide(ASK, ())).content == "ok"
    server.push(Reply(402, {"error": {"message": "Insufficient Balance", "type": "unknown_error", "param": None}}))
    with pytest.raises(
        ProviderError, match=r"DeepSeek model 'fake-model' .* HTTP 402: unknown_error: Insufficient"
    ) as err:
        await model.decide(ASK, ())
    assert err.value.status_code == 402 and len(server.requests) == 2  # not retried


def test_deepseek_refuses_parallel_tool_calls_it_does_not_document() -> None:
    with pytest.raises(UserError, match="DeepSeek does not accept parallel_tool_calls"):
        OpenAICompatible("deepseek-chat", preset="deepseek", api_key="k", parallel_tool_calls=False)


# -- Groq ----------------------------------------------------------------------


async def test_groq_reads_x_groq_usage_and_never_sends_reasoning_back(make: Make, server: FakeServer) -> None:
    usage = {"queue_time": 0.02, "prompt_tokens": 90, "prompt_time": 0.01, "completion_tokens": 12, "total_tokens": 102}
    events: list[SSEItem] = [
        chunk({"role": "assistant", "content": ""}, x_groq={"id": "req_01"}),
        chunk({"reasoning": "Call the tool."}),
        chunk(call_delta("call_g1", '{"city": "Paris"}')),
        chunk({}, "tool_calls", x_groq={"id": "req_01", "usage": usage}),
        "[DONE]",
    ]
    cached = {"prompt_tokens": 120, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 96}}
    answer: list[SSEItem] = [
        chunk({"role": "assistant", "content": "18 C.", "reasoning": "Done."}),
        chunk({}, "stop", x_groq={"id": "req_02", "usage": cached}),
        "[DONE]",
    ]
    server.push(Reply.sse(events), Reply.sse(answer))
    model = preset_model(make, "groq", parallel_tool_calls=False)
    result = await Agent(model, [get_weather]).run("Weather?")
    assert result.output == "18 C." and result.context[1].reasoning == (Reasoning("Call the tool."),)
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.cache_read_tokens) == (210, 15, 96)
    first = server.requests[0].json()
    assert first["stream_options"] == {"include_usage": True} and first["parallel_tool_calls"] is False
    assert server.requests[0].path == "/v1/chat/completions"
    assert b"reasoning" not in server.requests[1].body  # Groq answers 400 to a reasoning field


async def test_groq_rate_limits_wait_as_told(make: Make, server: FakeServer, sleeps: Sleeps) -> None:
    limit = {
        "error": {
            "message": "Rate limit reached. Please try again in 2s.",
            "type": "tokens",
            "code": "rate_limit_exceeded",
        }
    }
    server.push(Reply(429, limit, headers={"retry-after": "2"}), Reply(200, completion({"content": "ok"}, {})))
    assert (await preset_model(make, "groq", stream=False).decide(ASK, ())).content == "ok"
    assert sleeps == [2.0]


# -- Together ------------------------------------------------------------------


def together_chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> dict[str, Any]:
    choice = {"index": 0, "text": delta.get("content") or "", "logprobs": None, "finish_reason": finish, "seed": None}
    full_delta = {"token_id": 7, "role": "assistant", "content": None, "tool_calls": None, **delta}
    return {
        "id": "oJ1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{**choice, "delta": full_delta}],
        "usage": usage,
    }


async def test_together_streams_usage_on_its_last_chunk_unasked(make: Make, server: FakeServer) -> None:
    events: list[SSEItem] = [
        together_chunk({"reasoning": "9.11 < 9.9"}),
        together_chunk({"content": "9.9 is "}),
        together_chunk({"content": "bigger."}),
        together_chunk({"content": ""}, "stop", {"prompt_tokens": 15, "completion_tokens": 6, "total_tokens": 21}),
        "[DONE]",
    ]
    server.push(Reply.sse(events))
    reply = await preset_model(make, "together").decide(Context([Message.user("9.11 or 9.9?")]), ())
    assert reply.content == "9.9 is bigger." and reply.reasoning == (Reasoning("9.11 < 9.9"),)
    assert reply.usage is not None and (reply.usage.input_tokens, reply.usage.output_tokens) == (15, 6)
    assert b"stream_options" not in server.requests[0].body


async def test_together_tool_calls_stream_by_index(make: Make, server: FakeServer) -> None:
    events: list[SSEItem] = [
        together_chunk(call_delta("call_t1", "")),
        together_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Paris"}'}}]}),
        together_chunk({}, "tool_calls", {"prompt_tokens": 30, "completion_tokens": 10, "total_tokens": 40}),
        "[DONE]",
    ]
    server.push(Reply.sse(events))
    reply = await preset_model(make, "together").decide(ASK, (get_weather,))
    assert reply.tool_calls == (ToolCall("call_t1", "get_weather", '{"city": "Paris"}'),)


# -- OpenRouter ----------------------------------------------------------------


async def test_openrouter_comments_reasoning_and_cached_usage(make: Make, server: FakeServer) -> None:
    usage = {
        "prompt_tokens": 300,
        "completion_tokens": 20,
        "total_tokens": 320,
        "cost": 0.0012,
        "prompt_tokens_details": {"cached_tokens": 250, "cache_write_tokens": 40},
    }
    events: list[SSEItem] = [
        (":", "OPENROUTER PROCESSING"),
        chunk({"role": "assistant", "content": "", "reasoning": "Look it up."}, provider="Anthropic"),
        (":", "OPENROUTER PROCESSING"),
        chunk(call_delta("toolu_or1", '{"city": "Paris"}'), provider="Anthropic"),
        chunk({}, "tool_calls", provider="Anthropic"),
        {"id": "gen-1", "object": "chat.completion.chunk", "choices": [], "usage": usage},
        "[DONE]",
    ]
    server.push(Reply.sse(events))
    model = preset_model(make, "openrouter", extra_headers={"HTTP-Referer": "https://example.org", "X-Title": "tether"})
    reply = await model.decide(ASK, (get_weather,))
    assert reply.tool_calls == (ToolCall("toolu_or1", "get_weather", '{"city": "Paris"}'),)
    assert reply.reasoning == (Reasoning("Look it up."),)
    assert reply.usage is not None and (reply.usage.cache_read_tokens, reply.usage.cache_write_tokens) == (250, 40)
    assert server.requests[0].headers["x-title"] == "tether"


async def test_openrouter_mid_stream_errors_retry_the_turn(make: Make, server: FakeServer, sleeps: Sleeps) -> None:
    broken: list[SSEItem] = [
        chunk({"role": "assistant", "content": "Par"}),
        {
            "id": "gen-2",
            "object": "chat.completion.chunk",
            "provider": "openai",
            "error": {"code": "server_error", "message": "Provider disconnected unexpectedly"},
            "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
        },
    ]
    whole: list[SSEItem] = [chunk({"role": "assistant", "content": "Paris."}), chunk({}, "stop"), "[DONE]"]
    server.push(Reply.sse(broken), Reply.sse(whole))
    assert (await preset_model(make, "openrouter").decide(ASK, ())).content == "Paris."
    assert len(server.requests) == 2 and len(sleeps) == 1


async def test_openrouter_out_of_credits_is_not_retried(make: Make, server: FakeServer) -> None:
    server.push(
        Reply(
            402,
            {"error": {"code": 402, "message": "Insufficient credits. Add more using https://openrouter.ai/credits"}},
        )
    )
    with pytest.raises(ProviderError, match="HTTP 402: Insufficient credits") as err:
        await preset_model(make, "openrouter", stream=False).decide(ASK, ())
    assert err.value.retryable is False and len(server.requests) == 1


# -- Ollama --------------------------------------------------------------------


async def test_ollama_needs_no_key_and_streams_whole_tool_calls(
    server: FakeServer, sleeps: Sleeps, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    events: list[SSEItem] = [
        chunk({"role": "assistant", "content": "", "reasoning": "Use the tool."}),
        chunk({"role": "assistant", "content": "", **call_delta("call_o1", '{"city":"Paris"}')}),
        chunk({"role": "assistant", "content": ""}, "tool_calls"),
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": {"prompt_tokens": 40, "completion_tokens": 9},
        },
        "[DONE]",
    ]
    server.push(Reply.sse(events))
    async with OpenAICompatible("qwen3", preset="ollama", base_url=server.openai_url, sleep=sleeps) as model:
        reply = await model.decide(ASK, (get_weather,))
    assert reply.tool_calls == (ToolCall("call_o1", "get_weather", '{"city":"Paris"}'),)
    assert reply.reasoning == (Reasoning("Use the tool."),)
    request = server.requests[0]
    assert "authorization" not in request.headers and b"parallel_tool_calls" not in request.body


async def test_ollama_a_missing_model_is_a_clear_failure(make: Make, server: FakeServer) -> None:
    missing = {
        "error": {
            "message": 'model "qwen3" not found, try pulling it first',
            "type": "api_error",
            "param": None,
            "code": None,
        }
    }
    server.push(Reply(404, missing))
    with pytest.raises(ProviderError, match=r'Ollama model .* HTTP 404: api_error: model "qwen3" not found'):
        await preset_model(make, "ollama", stream=False).decide(ASK, ())
    assert len(server.requests) == 1


# -- vLLM ----------------------------------------------------------------------


async def test_vllm_reasoning_either_field_and_cached_tokens(make: Make, server: FakeServer) -> None:
    old = completion(
        {"content": "9.9.", "reasoning_content": "Compare decimals.", "tool_calls": []},
        {"prompt_tokens": 20, "completion_tokens": 30, "prompt_tokens_details": {"cached_tokens": 16}},
    )
    new: list[SSEItem] = [chunk({"role": "assistant", "reasoning": "Compare "}), chunk({"reasoning": "decimals."}),
                          chunk({"content": "9.9."}), chunk({}, "stop"), "[DONE]"]  # fmt: skip
    server.push(Reply(200, old), Reply.sse(new))
    whole = await preset_model(make, "vllm", stream=False).decide(ASK, ())
    streamed = await preset_model(make, "vllm").decide(ASK, ())
    assert whole == streamed == Message.assistant("9.9.", reasoning=[Reasoning("Compare decimals.")])
    assert whole.usage is not None and whole.usage.cache_read_tokens == 16


async def test_vllm_errors_and_its_optional_key(
    make: Make, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_API_KEY", "token-abc123")
    too_long = {
        "object": "error",
        "message": "This model's maximum context length is 4096 tokens.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
    server.push(Reply(400, too_long))
    model = OpenAICompatible("m", preset="vllm", base_url=server.openai_url, stream=False)
    with pytest.raises(ProviderError, match="BadRequestError: This model's maximum context length"):
        await model.decide(ASK, ())
    await model.aclose()
    assert server.requests[0].headers["authorization"] == "Bearer token-abc123"


# -- all presets -----------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_points_at_its_endpoint_and_key(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    found = PRESETS[name]
    if found.key_env:
        monkeypatch.setenv(found.key_env, f"key-for-{name}")
    model = OpenAICompatible("some-model", preset=name)
    assert model.url == found.base_url.rstrip("/") + "/chat/completions"
    assert model.api_key == (f"key-for-{name}" if found.key_env else None)
    assert split_model(f"{name}:some/model:tag") == (found, "some/model:tag")


def test_a_hosted_preset_without_its_key_says_which_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    with pytest.raises(UserError, match=r"Groq needs an API key: pass api_key=\.\.\. or set GROQ_API_KEY"):
        OpenAICompatible("llama-3.3-70b-versatile", preset="groq")
    with pytest.raises(UserError, match="unknown provider preset 'grok'; known: openai, deepseek"):
        OpenAICompatible("m", preset="grok")


def test_the_command_line_names_presets_by_prefix(tmp_path: Path) -> None:
    from tether.cli._config import load_settings, make_policy

    env = {"HOME": str(tmp_path), "GROQ_API_KEY": "gsk-cli"}
    groq = make_policy(load_settings(workspace=str(tmp_path), model="groq:llama-3.3-70b-versatile", env=env))
    assert isinstance(groq, OpenAICompatible) and groq.quirks is PRESETS["groq"]
    assert (groq.model, groq.base_url, groq.api_key) == ("llama-3.3-70b-versatile", PRESETS["groq"].base_url, "gsk-cli")
    ollama = make_policy(load_settings(workspace=str(tmp_path), model="ollama:llama3.1:8b", env=env))
    assert isinstance(ollama, OpenAICompatible) and (ollama.model, ollama.api_key) == ("llama3.1:8b", None)
    assert ollama.url == "http://127.0.0.1:11434/v1/chat/completions"
