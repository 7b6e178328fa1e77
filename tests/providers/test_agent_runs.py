"""Real agent runs through the HTTP providers against the fake server.

Every test runs over both wire shapes, streamed and not (the ``flavor``
fixture): plain answers, tool round-trips, streamed tokens, parallel calls,
approval pause and resume, and the byte-prefix property of request bodies.
"""

from __future__ import annotations

import itertools

import pytest

from support import add
from tether import Agent, tool
from tether.stores.memory import MemoryStore

from .conftest import Make
from .fakeserver import FakeServer, turn


def tool_results(request_body: dict, shape: str) -> list[dict]:
    """The tool results a request carries, as (id, content, is_error) dicts."""
    out = []
    for m in request_body["messages"]:
        if shape == "openai" and m["role"] == "tool":
            out.append({"id": m["tool_call_id"], "content": m["content"]})
        elif shape == "anthropic" and isinstance(m["content"], list):
            out += [
                {"id": b["tool_use_id"], "content": b["content"]} for b in m["content"] if b["type"] == "tool_result"
            ]
    return out


async def test_a_plain_answer(make: Make, server: FakeServer, flavor: tuple[str, bool]) -> None:
    shape, streaming = flavor
    server.push(turn("Hello! How can I help?", usage=(12, 7)))
    result = await Agent(make(shape, stream=streaming), instructions="Be kind.").run("hi")
    assert result.status == "finished" and result.output == "Hello! How can I help?"
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.requests) == (12, 7, 1)
    body = server.requests[0].json()
    assert body["model"] == "fake-model" and body.get("stream", False) is streaming
    if shape == "openai":
        assert body["messages"] == [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "hi"}]
    else:
        system = [{"type": "text", "text": "Be kind.", "cache_control": {"type": "ephemeral"}}]  # a cache breakpoint
        assert body["system"] == system and body["messages"] == [{"role": "user", "content": "hi"}]
    server.assert_consumed()


async def test_a_tool_round_trip(make: Make, server: FakeServer, flavor: tuple[str, bool]) -> None:
    shape, streaming = flavor
    server.push(turn("Let me add.", [("c1", "add", {"a": 2, "b": 3})]), turn("2 + 3 = 5"))
    result = await Agent(make(shape, stream=streaming), [add]).run("2 + 3?")
    assert result.status == "finished" and result.output == "2 + 3 = 5"
    assert [m.role for m in result.context] == ["user", "assistant", "tool", "assistant"]
    assert result.context[1].content == "Let me add."
    assert result.context[1].tool_calls[0].name == "add"
    assert tool_results(server.requests[1].json(), shape) == [{"id": "c1", "content": "5"}]
    assert result.usage.requests == 2
    server.assert_consumed()


async def test_streamed_tokens_become_token_events(make: Make, server: FakeServer, flavor: tuple[str, bool]) -> None:
    shape, streaming = flavor
    text = "The quick brown fox jumps over the lazy dog."
    server.push(turn(text, chunk=5))
    events = [ev async for ev in Agent(make(shape, stream=streaming)).stream("go")]
    tokens = [ev.text for ev in events if ev.kind == "token"]
    if streaming:
        assert len(tokens) == 9 and "".join(tokens) == text
    else:
        assert tokens == []
    assert events[-1].kind == "finished" and events[-1].output == text


async def test_parallel_tool_calls_all_run_and_all_answer(
    make: Make, server: FakeServer, flavor: tuple[str, bool]
) -> None:
    shape, streaming = flavor
    server.push(
        turn(
            tool_calls=[
                ("c1", "add", {"a": 1, "b": 2}),
                ("c2", "add", {"a": 10, "b": 20}),
                ("c3", "add", {"a": 100, "b": 200}),
            ]
        ),
        turn("3, 30 and 300"),
    )
    result = await Agent(make(shape, stream=streaming), [add]).run("three sums")
    assert result.status == "finished" and result.output == "3, 30 and 300"
    second = server.requests[1].json()
    assert tool_results(second, shape) == [
        {"id": "c1", "content": "3"},
        {"id": "c2", "content": "30"},
        {"id": "c3", "content": "300"},
    ]
    if shape == "anthropic":  # the three results answer in one user message
        assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]


async def test_an_approval_pauses_the_run_and_resuming_runs_the_approved_call(
    make: Make, server: FakeServer, flavor: tuple[str, bool]
) -> None:
    shape, streaming = flavor
    ran: list[tuple[str, int]] = []

    # Not support.refund: the amount travels over the wire and back in the result the server is sent.
    @tool(approval=True)
    def refund(order_id: str, amount: int) -> str:
        """Refund an order."""
        ran.append((order_id, amount))
        return f"refunded {amount} on {order_id}"

    store = MemoryStore()
    agent = Agent(make(shape, stream=streaming), [refund], store=store)
    server.push(turn("Refunding.", [("c1", "refund", {"order_id": "A1", "amount": 79})]))
    paused = await agent.run("refund A1")
    assert paused.status == "paused" and ran == [] and len(server.requests) == 1
    assert [p.call.id for p in paused.items] == ["c1"]

    server.push(turn("Done: refunded $79."))
    done = await agent.run(paused.state.approve("c1", by="alice"))
    assert done.status == "finished" and done.output == "Done: refunded $79."
    assert ran == [("A1", 79)]
    assert tool_results(server.requests[1].json(), shape) == [{"id": "c1", "content": "refunded 79 on A1"}]
    server.assert_consumed()


async def test_a_denied_call_is_reported_to_the_model(make: Make, server: FakeServer, flavor: tuple[str, bool]) -> None:
    shape, streaming = flavor

    @tool(approval=True)
    def delete_everything() -> str:
        """Delete it all."""
        raise AssertionError("must not run")

    agent = Agent(make(shape, stream=streaming), [delete_everything])
    server.push(turn(tool_calls=[("c1", "delete_everything", {})]), turn("Understood."))
    paused = await agent.run("clean up")
    done = await agent.run(paused.state.deny("c1", "no way"))
    assert done.output == "Understood."
    [result] = tool_results(server.requests[1].json(), shape)
    assert "no way" in result["content"]
    if shape == "anthropic":
        block = server.requests[1].json()["messages"][-1]["content"][0]
        assert block["is_error"] is True


@pytest.mark.parametrize("streaming", [True, False])
@pytest.mark.parametrize("shape", ["openai", "anthropic"])
async def test_each_request_body_extends_the_previous_one_byte_for_byte(
    make: Make, server: FakeServer, shape: str, streaming: bool
) -> None:
    steps = 10
    server.push(*(turn(f"step {i}", [(f"c{i}", "add", {"a": i, "b": i})]) for i in range(steps)))
    server.push(turn("all done ✓"))
    result = await Agent(make(shape, stream=streaming), [add], instructions="Add things.").run("go ✓")
    assert result.status == "finished" and len(server.requests) == steps + 1
    bodies = [r.body for r in server.requests]
    for before, after in itertools.pairwise(bodies):
        start = before.index(b'"messages":[')
        messages_before = before[start:-1]  # the serialized messages array
        assert after.index(b'"messages":[') == start
        assert after[start:-1].startswith(messages_before[:-1])  # open array: a byte prefix
        assert before[:-2] == after[: len(before) - 2]  # and so is the whole body up to it
        assert len(after) > len(before)
