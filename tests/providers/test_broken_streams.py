"""Broken streams and malformed replies.

A stream that breaks before the model finished (connection reset, a body cut
short, an error event inside a 200 stream) is thrown away and the whole turn is
asked again; tool calls from a partial stream never run.
"""

from __future__ import annotations

import json
import random
import tracemalloc

import pytest

from tether import Agent, Message, ProviderError, tool
from tether.context import Context
from tether.providers._http import HTTPPolicy

from .conftest import Make, Sleeps
from .fakeserver import FakeServer, Reply, Turn, anthropic_events, openai_events, turn

CONTEXT = Context([Message.user("hi")])


def finish_index(t: Turn, shape: str) -> int:
    """Index of the event that says the model finished: a break before it loses the turn."""
    if shape == "openai":
        return len(openai_events(t)) - 3  # ..., finish_reason chunk, usage chunk, [DONE]
    return len(anthropic_events(t)) - 2  # ..., message_delta (stop_reason), message_stop


def broken(t: Turn, shape: str, rng: random.Random) -> Turn:
    k = rng.randrange(finish_index(t, shape))
    fault = rng.choice(["reset_after", "close_after", "error_after"])
    return Turn(**{**t.__dict__, fault: k})


class Ledger:
    """A ``once`` tool that counts its executions and the exact arguments it got."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

        @tool(effect="once")
        def transfer(account: str, memo: str) -> str:
            """Move money (must never happen twice)."""
            self.calls.append((account, memo))
            return "sent"

        self.tool = transfer


def trial_script(rng: random.Random, i: int) -> tuple[Turn, list[tuple[str, str]]]:
    memo = "".join(rng.choice('abcdefghij "\\✓') for _ in range(rng.randrange(5, 60)))
    args = [(f"acct-{i}-{n}", memo + str(n)) for n in range(rng.choice([1, 2]))]
    calls = [(f"call_{i}_{n}", "transfer", {"account": a, "memo": m}) for n, (a, m) in enumerate(args)]
    text = rng.choice(["", "Let me move the money."])
    return turn(text, calls, chunk=rng.choice([1, 3, 7])), args


async def test_two_hundred_random_stream_breaks_never_run_a_partial_tool_call(make: Make, server: FakeServer) -> None:
    rng = random.Random(20260401)
    providers = {shape: make(shape) for shape in ("openai", "anthropic")}
    for i in range(200):
        shape = rng.choice(["openai", "anthropic"])
        ledger = Ledger()
        agent = Agent(providers[shape], [ledger.tool])
        good, expected = trial_script(rng, i)
        breaks = rng.choice([0, 1, 2, 3])  # 3 exhausts 1 + max_retries attempts
        server.push(*(broken(good, shape, rng) for _ in range(breaks)))
        if breaks < 3:
            server.push(good, turn("All sent."))
        result = await agent.run("pay")
        replies = [e for e in result.events if e.kind == "model-replied"]
        if breaks < 3:
            assert result.status == "finished", (i, result.error)
            assert ledger.calls == expected  # once each, exact arguments
            assert len(replies) == 2  # one committed reply per turn
        else:
            assert result.status == "failed" and result.state.status == "failed"
            assert ledger.calls == [] and replies == []
            server.push(good, turn("All sent."))
            resumed = await agent.run(result.state)
            assert resumed.status == "finished" and ledger.calls == expected
        server.assert_consumed()


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
async def test_an_error_event_inside_a_200_stream_retries_the_turn(
    make: Make, server: FakeServer, sleeps: Sleeps, shape: str
) -> None:
    good = turn("hello", [("c1", "transfer", {"account": "a", "memo": "m"})])
    server.push(Turn(**{**good.__dict__, "error_after": 4}), good)
    reply = await make(shape).decide(CONTEXT, ())
    assert [c.arguments for c in reply.tool_calls] == ['{"account": "a", "memo": "m"}']
    assert len(server.requests) == 2 and len(sleeps) == 1


async def test_a_non_transient_anthropic_stream_error_is_not_retried(make: Make, server: FakeServer) -> None:
    error = ("error", {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}})
    server.push(Reply.sse([anthropic_events(turn("x"))[0], error]))
    with pytest.raises(ProviderError) as info:
        await make("anthropic").decide(CONTEXT, ())
    assert not info.value.retryable and "invalid_request_error: bad" in str(info.value)
    assert len(server.requests) == 1


async def test_a_break_after_the_model_finished_keeps_the_turn(make: Make, server: FakeServer) -> None:
    good = turn("complete answer")
    server.push(Turn(**{**good.__dict__, "reset_after": finish_index(good, "openai") + 1}))
    reply = await make().decide(CONTEXT, ())
    assert reply.content == "complete answer" and len(server.requests) == 1


async def test_a_stream_that_ends_cleanly_without_finishing_is_retried(make: Make, server: FakeServer) -> None:
    good = turn("the whole answer")
    events = openai_events(good)
    server.push(Reply.sse(events[:2]), Reply.sse(events[:-1]))  # cut short; then no [DONE] but finished
    reply = await make().decide(CONTEXT, ())
    assert reply.content == "the whole answer" and len(server.requests) == 2


async def test_a_garbled_stream_event_is_retried(make: Make, server: FakeServer) -> None:
    server.push(Reply.sse(["{not json"]), turn("fine"))
    assert (await make().decide(CONTEXT, ())).content == "fine"
    assert len(server.requests) == 2


# -- D.34 malformed model output ------------------------------------------------


async def test_malformed_calls_become_notes_and_never_run(
    make: Make, server: FakeServer, flavor: tuple[str, bool]
) -> None:
    ledger = Ledger()
    bad_json = '{"account": "a", "memo": '
    server.push(
        turn(
            tool_calls=[
                ("c1", "transfer", bad_json),
                ("c2", "wire_money", {"to": "x"}),
                ("c3", "transfer", {"account": "a"}),
            ]
        ),
        turn("I will stop."),
    )
    agent = Agent(make(flavor[0], stream=flavor[1]), [ledger.tool])
    result = await agent.run("pay")
    assert result.status == "finished" and ledger.calls == []
    notes = {e.result.tool_call_id: e.error for e in result.events if e.kind == "tool-finished"}
    assert notes == {"c1": "bad-json", "c2": "unknown-tool", "c3": "invalid-arguments"}
    if flavor[0] == "openai":  # the model's text is passed through verbatim
        assert result.context[1].tool_calls[0].arguments == bad_json


async def test_a_call_missing_its_name_and_id_becomes_a_note(make: Make, server: FakeServer) -> None:
    ledger = Ledger()
    body = {
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"type": "function", "function": {"arguments": "{}"}}],
                },
            }
        ]
    }
    server.push(Reply(200, body), turn("ok"))
    result = await Agent(make(stream=False), [ledger.tool]).run("pay")
    assert result.status == "finished" and ledger.calls == []
    assert [e.error for e in result.events if e.kind == "tool-finished"] == ["unknown-tool"]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"<html>Bad gateway</html>", "not JSON"),
        ({"object": "list", "data": []}, "no 'choices'"),
        ({"choices": [{"index": 0}]}, "no 'message'"),
    ],
)
async def test_a_reply_that_is_not_a_completion_fails_the_run_with_an_excerpt(
    make: Make, server: FakeServer, body: object, words: str
) -> None:
    server.push(Reply(200, body))
    result = await Agent(make(stream=False)).run("hi")
    assert result.status == "failed" and result.error is not None and words in result.error
    assert len(server.requests) == 1


async def test_an_anthropic_reply_without_content_fails_with_an_excerpt(make: Make, server: FakeServer) -> None:
    server.push(Reply(200, {"type": "message", "oops": True}))
    with pytest.raises(ProviderError, match="no 'content' list"):
        await make("anthropic", stream=False).decide(CONTEXT, ())


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_ten_megabyte_reply_is_read_with_bounded_memory(
    make: Make, server: FakeServer, streaming: bool
) -> None:
    text = "x" * (10 * 1024 * 1024)
    server.push(Turn(text, chunk=256 * 1024))
    provider = make(stream=streaming)
    tracemalloc.start()
    try:
        reply = await provider.decide(CONTEXT, ())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert reply.content == text
    assert peak < 300 * 1024 * 1024


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_reply_over_the_size_cap_is_refused_not_retried(
    make: Make, server: FakeServer, streaming: bool
) -> None:
    server.push(Turn("y" * (2 * 1024 * 1024), chunk=64 * 1024))
    provider: HTTPPolicy = make(stream=streaming, max_response_bytes=1024 * 1024)
    with pytest.raises(ProviderError, match=r"cap|exceeded") as info:
        await provider.decide(CONTEXT, ())
    assert not info.value.retryable and len(server.requests) == 1


async def test_tool_call_fragments_without_index_are_assembled_by_id(make: Make, server: FakeServer) -> None:
    def chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events = [
        chunk({"tool_calls": [{"id": "a", "function": {"name": "look", "arguments": '{"q":'}}]}),
        chunk({"tool_calls": [{"function": {"arguments": ' "x"}'}}]}),
        chunk({"tool_calls": [{"id": "b", "function": {"name": "look", "arguments": "{}"}}]}),
        chunk({"tool_calls": [{"id": "b", "function": {"name": "look"}}]}),  # name repeated whole
        chunk({}, "tool_calls"),
        "[DONE]",
    ]
    server.push(Reply.sse(events))
    reply = await make().decide(CONTEXT, ())
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [("a", "look", '{"q": "x"}'), ("b", "look", "{}")]
    assert json.loads(reply.tool_calls[0].arguments) == {"q": "x"}
