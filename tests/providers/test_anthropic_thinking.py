"""Anthropic extended thinking and prompt caching, byte for byte.

The replies are written from the shapes in Anthropic's Messages API reference
and its "Extended thinking" and "Prompt caching" guides: ``thinking`` blocks
(text and ``signature``), ``redacted_thinking`` blocks (opaque ``data``), the
streamed ``thinking_delta`` / ``signature_delta`` events, and usage with
``cache_creation_input_tokens`` / ``cache_read_input_tokens``.
"""

from __future__ import annotations

import itertools
import json

import pytest

from tether import Agent, Message, RunState, ToolCall, UserError, tool
from tether.context import Context
from tether.messages import Reasoning
from tether.providers import Anthropic

from .conftest import Make
from .fakeserver import FakeServer, Reply, SSEItem

SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"
THOUGHT = "The user wants Paris weather. I should call get_weather."


@tool(effect="none")
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: 18 C, clear"


def thinking_json() -> dict[str, object]:
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "thinking", "thinking": THOUGHT, "signature": SIGNATURE},
            {"type": "redacted_thinking", "data": REDACTED},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 20,
            "cache_creation_input_tokens": 1500,
            "cache_read_input_tokens": 0,
            "output_tokens": 90,
        },
    }


def thinking_events() -> list[SSEItem]:
    def delta(index: int, **d: str) -> SSEItem:
        return ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})

    def start(index: int, block: dict[str, object]) -> SSEItem:
        return ("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})

    def stop(index: int) -> SSEItem:
        return ("content_block_stop", {"type": "content_block_stop", "index": index})

    usage = {"input_tokens": 20, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 1500, "output_tokens": 1}
    message = {"id": "msg_01", "type": "message", "role": "assistant", "content": [], "usage": usage}
    return [
        ("message_start", {"type": "message_start", "message": message}),
        start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(0, type="thinking_delta", thinking=THOUGHT[:20]),
        delta(0, type="thinking_delta", thinking=THOUGHT[20:]),
        delta(0, type="signature_delta", signature=SIGNATURE),
        stop(0),
        start(1, {"type": "redacted_thinking", "data": REDACTED}),
        stop(1),
        start(2, {"type": "text", "text": ""}),
        delta(2, type="text_delta", text="Checking."),
        stop(2),
        start(3, {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {}}),
        delta(3, type="input_json_delta", partial_json='{"city": '),
        delta(3, type="input_json_delta", partial_json='"Paris"}'),
        stop(3),
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 90}},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]


def final_json(text: str) -> dict[str, object]:
    usage = {"input_tokens": 30, "cache_read_input_tokens": 1600, "output_tokens": 8}
    return {"type": "message", "role": "assistant", "content": [{"type": "text", "text": text}], "usage": usage}


EXPECTED_REASONING = (Reasoning(THOUGHT, signature=SIGNATURE), Reasoning(redacted=REDACTED))


@pytest.mark.parametrize("streaming", [False, True])
async def test_thinking_blocks_are_kept_on_the_reply(make: Make, server: FakeServer, streaming: bool) -> None:
    server.push(Reply.sse(thinking_events()) if streaming else Reply(200, thinking_json()))
    model = make("anthropic", stream=streaming, max_tokens=4096, thinking=2048)
    reply = await model.decide(Context([Message.user("Weather in Paris?")]), (get_weather,))
    assert reply.content == "Checking."
    assert reply.tool_calls == (ToolCall("toolu_01", "get_weather", '{"city": "Paris"}'),)
    assert reply.reasoning == EXPECTED_REASONING
    assert Message.from_dict(json.loads(json.dumps(reply.to_dict()))) == reply  # the journal keeps them
    assert server.requests[0].json()["thinking"] == {"type": "enabled", "budget_tokens": 2048}


async def test_thinking_goes_back_verbatim_before_the_calls_it_made(make: Make, server: FakeServer) -> None:
    server.push(Reply(200, thinking_json()), Reply(200, final_json("Paris: 18 C, clear.")))
    agent = Agent(
        make("anthropic", stream=False, max_tokens=4096, thinking=2048), [get_weather], instructions="Be brief."
    )
    result = await agent.run("Weather in Paris?")
    assert result.status == "finished" and result.output == "Paris: 18 C, clear."
    second = server.requests[1].body
    assistant = (
        '{"role":"assistant","content":['
        f'{{"type":"thinking","thinking":"{THOUGHT}","signature":"{SIGNATURE}"}},'
        f'{{"type":"redacted_thinking","data":"{REDACTED}"}},'
        '{"type":"text","text":"Checking."},'
        '{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{"city":"Paris"}}]}'
    )
    results = (
        '{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":"Paris: 18 C, clear"}]}'
    )
    assert second.endswith(
        f',"messages":[{{"role":"user","content":"Weather in Paris?"}},{assistant},{results}]}}'.encode()
    )
    assert server.requests[0].body[:-2] == second[: len(server.requests[0].body) - 2]  # a byte prefix
    assert result.usage.cache_read_tokens == 1600 and result.usage.cache_write_tokens == 1500
    assert result.usage.input_tokens == 20 + 1500 + 30 + 1600


async def test_a_paused_thinking_turn_resumes_with_its_thinking_intact(make: Make, server: FakeServer) -> None:
    @tool(approval=True)
    def book(city: str) -> str:
        """Book a trip."""
        return f"booked {city}"

    turn_one = thinking_json()
    turn_one["content"][-1]["name"] = "book"  # type: ignore[index]
    server.push(Reply(200, turn_one), Reply(200, final_json("Booked.")))
    agent = Agent(make("anthropic", stream=False, max_tokens=4096, thinking=2048), [book])
    paused = await agent.run("Book Paris.")
    assert paused.status == "paused"
    state = RunState.from_json(paused.state.to_json())  # another process, later
    done = await agent.run(state.approve("toolu_01", by="alice"))
    assert done.status == "finished" and done.output == "Booked."
    sent = server.requests[1].json()["messages"][1]["content"]
    assert sent[:2] == [
        {"type": "thinking", "thinking": THOUGHT, "signature": SIGNATURE},
        {"type": "redacted_thinking", "data": REDACTED},
    ]


async def test_cache_breakpoints_sit_on_tools_system_and_the_request(make: Make, server: FakeServer) -> None:
    server.push(Reply(200, final_json("Hi.")))
    context = Context([Message.system("Be brief."), Message.user("hi")])
    await make("anthropic", stream=False, max_tokens=64).decide(context, (get_weather,))
    tool_def = json.dumps(
        {"name": "get_weather", "description": "The weather in a city.", "input_schema": get_weather.parameters},
        separators=(",", ":"),
    )[:-1]
    assert (
        server.requests[0].body
        == (
            '{"model":"fake-model","max_tokens":64,"cache_control":{"type":"ephemeral"},'
            '"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],'
            f'"tools":[{tool_def},"cache_control":{{"type":"ephemeral"}}}}],'
            '"messages":[{"role":"user","content":"hi"}]}'
        ).encode()
    )


async def test_without_cache_no_cache_control_is_sent(make: Make, server: FakeServer) -> None:
    server.push(Reply(200, final_json("Hi.")))
    context = Context([Message.system("Be brief."), Message.user("hi")])
    await make("anthropic", stream=False, cache=False).decide(context, (get_weather,))
    body = server.requests[0].body
    assert b"cache_control" not in body and json.loads(body)["system"] == "Be brief."


async def test_a_cached_run_keeps_every_request_a_byte_prefix_of_the_next(make: Make, server: FakeServer) -> None:
    calls = [
        {"type": "tool_use", "id": f"t{i}", "name": "get_weather", "input": {"city": c}} for i, c in enumerate("AB")
    ]
    server.push(
        *(
            Reply(200, {"type": "message", "content": [c], "usage": {"input_tokens": 9, "output_tokens": 2}})
            for c in calls
        ),
        Reply(200, final_json("Done.")),
    )
    result = await Agent(make("anthropic", stream=False), [get_weather], instructions="Be brief.").run("A then B")
    assert result.status == "finished"
    bodies = [r.body for r in server.requests]
    for before, after in itertools.pairwise(bodies):
        assert after.startswith(before[:-2])  # everything up to the close of the messages array


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"thinking": 512}, "thinking must be a token budget >= 1024"),
        ({"thinking": 4096, "max_tokens": 4096}, "< max_tokens"),
        ({"thinking": 2048, "max_tokens": 4096, "temperature": 0.5}, "temperature"),
        ({"thinking": 2048, "max_tokens": 4096, "tool_choice": "required"}, "tool_choice"),
    ],
)
def test_thinking_settings_the_api_refuses_are_refused_here(options: dict[str, object], words: str) -> None:
    with pytest.raises(UserError, match=words):
        Anthropic("claude-sonnet-4-5", api_key="k", **options)  # type: ignore[arg-type]


def test_a_raw_thinking_object_is_sent_as_given() -> None:
    model = Anthropic("claude-opus-4-6", api_key="k", thinking={"type": "adaptive"})
    assert model.thinking == {"type": "adaptive"}
