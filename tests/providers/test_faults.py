"""Provider faults against the fake server.

Sleeps are injected: the tests check the delays the policy asked for (a
computed value), never how long anything took.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from tether import Agent, Message, ProviderError, tool
from tether.context import Context
from tether.testing import block_model_requests

from .conftest import Make, Sleeps
from .fakeserver import FakeServer, Reply, Request, Turn, turn

CONTEXT = Context([Message.user("hi")])


def window(attempt: int) -> tuple[float, float]:
    base = min(0.5 * 2**attempt, 8.0)
    return 0.75 * base, base


@pytest.mark.parametrize(
    ("status", "headers", "expected"),
    [
        (408, {}, None),
        (409, {}, None),
        (429, {"retry-after": "1"}, [1.0, 1.0]),
        (429, {"retry-after-ms": "500"}, [0.5, 0.5]),
        (429, {}, None),
        (500, {}, None),
        (502, {}, None),
        (503, {}, None),
        (504, {}, None),
        (529, {}, None),
        (400, {"x-should-retry": "true"}, None),
    ],
)
async def test_transient_statuses_are_retried_until_attempts_run_out(
    make: Make,
    server: FakeServer,
    sleeps: Sleeps,
    status: int,
    headers: dict[str, str],
    expected: list[float] | None,
    flavor: tuple[str, bool],
) -> None:
    server.handler = lambda request: Reply.error(status, "busy", headers=headers)
    provider = make(flavor[0], stream=flavor[1])
    with pytest.raises(ProviderError) as info:
        await provider.decide(CONTEXT, ())
    assert len(server.requests) == 3  # 1 + max_retries (2)
    assert info.value.status_code == status and info.value.retryable
    assert "after 3 attempts" in str(info.value) and "busy" in str(info.value)
    if expected is not None:
        assert sleeps == expected
    else:
        assert len(sleeps) == 2
        for n, delay in enumerate(sleeps):
            low, high = window(n)
            assert low <= delay <= high


@pytest.mark.parametrize(
    ("status", "headers"),
    [(400, {}), (401, {}), (403, {}), (404, {}), (422, {}), (500, {"x-should-retry": "false"})],
)
async def test_permanent_failures_are_not_retried(
    make: Make,
    server: FakeServer,
    sleeps: Sleeps,
    status: int,
    headers: dict[str, str],
    flavor: tuple[str, bool],
) -> None:
    server.handler = lambda request: Reply.error(status, "no", headers=headers)
    with pytest.raises(ProviderError) as info:
        await make(flavor[0], stream=flavor[1]).decide(CONTEXT, ())
    assert len(server.requests) == 1 and sleeps == []
    assert info.value.status_code == status and not info.value.retryable
    assert "(not retried)" in str(info.value)


async def test_a_server_delay_over_the_cap_fails_fast_without_sleeping(
    make: Make, server: FakeServer, sleeps: Sleeps
) -> None:
    server.handler = lambda request: Reply.error(429, "later", headers={"retry-after": "3600"})
    with pytest.raises(ProviderError) as info:
        await make().decide(CONTEXT, ())
    assert len(server.requests) == 1 and sleeps == []
    assert info.value.retryable  # trying later may work; trying now would not


async def test_the_server_delay_cap_is_configurable(make: Make, server: FakeServer, sleeps: Sleeps) -> None:
    server.push(Reply.error(429, headers={"retry-after": "90"}), turn("ok"))
    assert (await make(max_retry_wait=120.0).decide(CONTEXT, ())).content == "ok"
    assert sleeps == [90.0]


async def test_a_retried_turn_succeeds_and_keeps_one_idempotency_key(
    make: Make, server: FakeServer, flavor: tuple[str, bool]
) -> None:
    server.push(Reply.error(503), Reply.error(529, kind="overloaded_error"), turn("fine"), turn("again"))
    provider = make(flavor[0], stream=flavor[1])
    reply = await provider.decide(CONTEXT, ())
    assert reply.content == "fine" and reply.usage is not None and reply.usage.requests == 1
    await provider.decide(CONTEXT, ())
    keys = [r.headers["idempotency-key"] for r in server.requests]
    assert len(set(keys[:3])) == 1 and keys[3] != keys[0]  # one key per turn, same on every retry
    assert [r.body for r in server.requests[:3]] == [server.requests[0].body] * 3


async def test_an_anthropic_spend_limit_429_is_not_retried_and_the_run_fails_resumably(
    make: Make, server: FakeServer, sleeps: Sleeps
) -> None:
    message = "You have reached your specified workspace API usage limits (enforced_spend_limit_reached)."
    server.push(Reply.error(429, message, kind="rate_limit_error"))
    agent = Agent(make("anthropic"))
    result = await agent.run("hi")
    assert result.status == "failed" and result.state.status == "failed"
    assert len(server.requests) == 1 and sleeps == []
    assert result.error is not None and "enforced_spend_limit_reached" in result.error
    server.push(turn("back in business"))
    resumed = await agent.run(result.state)
    assert resumed.status == "finished" and resumed.output == "back in business"
    assert resumed.run_id == result.run_id


# -- D.32 connection faults ----------------------------------------------------


async def test_a_reset_before_headers_is_retried_with_the_same_key(
    make: Make, server: FakeServer, sleeps: Sleeps, flavor: tuple[str, bool]
) -> None:
    server.push(Reply(reset=True), Reply(reset=True), turn("made it"))
    reply = await make(flavor[0], stream=flavor[1]).decide(CONTEXT, ())
    assert reply.content == "made it" and len(sleeps) == 2
    assert len({r.headers["idempotency-key"] for r in server.requests}) == 1


async def test_resets_on_every_attempt_raise_a_retryable_provider_error(
    make: Make, server: FakeServer, sleeps: Sleeps
) -> None:
    server.handler = lambda request: Reply(reset=True)
    with pytest.raises(ProviderError) as info:
        await make().decide(CONTEXT, ())
    assert len(server.requests) == 3 and len(sleeps) == 2
    assert info.value.retryable and info.value.status_code is None


async def test_a_refused_connection_is_retried_then_fails(make: Make, sleeps: Sleeps) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens here once the socket closes
    with pytest.raises(ProviderError) as info:
        await make(base_url=f"http://127.0.0.1:{port}/v1").decide(CONTEXT, ())
    assert "ConnectError" in str(info.value) and info.value.retryable
    assert len(sleeps) == 2


async def test_an_unresolvable_host_is_retried_then_fails(make: Make, sleeps: Sleeps) -> None:
    provider = make(base_url="http://tether-test.invalid/v1")
    with block_model_requests(False), pytest.raises(ProviderError) as info:
        await provider.decide(CONTEXT, ())
    assert "ConnectError" in str(info.value) and len(sleeps) == 2


async def test_a_read_timeout_is_retried_with_the_same_key(
    make: Make, server: FakeServer, sleeps: Sleeps, flavor: tuple[str, bool]
) -> None:
    server.push(*(Reply(200, {"never": "sent"}, delay=2.0) for _ in range(2)), turn("on time"))
    provider = make(flavor[0], stream=flavor[1], timeout=0.05)
    assert (await provider.decide(CONTEXT, ())).content == "on time"
    assert len(server.requests) == 3 and len(sleeps) == 2
    assert len({r.headers["idempotency-key"] for r in server.requests}) == 1


async def test_a_blocked_host_is_refused_before_any_request(make: Make) -> None:
    from tether import ModelRequestsBlocked

    with pytest.raises(ModelRequestsBlocked):
        await make(base_url="https://api.example.com/v1").decide(CONTEXT, ())


# -- D.35 outage and retry storm ---------------------------------------------


def recovered(request: Request) -> Turn:
    """A healthy model: call ``record`` once, then answer."""
    body = request.json()
    last = body["messages"][-1]
    answered = last["role"] == "tool" or (
        isinstance(last.get("content"), list) and last["content"][0].get("type") == "tool_result"
    )
    if answered:
        return turn("done")
    task = body["messages"][0]["content"]
    return turn(tool_calls=[("record", {"task": task})])


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
async def test_an_outage_fails_every_run_resumably_and_resuming_completes_them(
    make: Make, server: FakeServer, sleeps: Sleeps, shape: str
) -> None:
    executed: list[str] = []

    @tool(effect="once")
    def record(task: str) -> str:
        """Write down that the task ran."""
        executed.append(task)
        return "ok"

    server.handler = lambda request: Reply.error(503, "outage")
    agent = Agent(make(shape), [record])
    runs = 50
    failed = await asyncio.gather(*(agent.run(f"task {i}") for i in range(runs)))
    assert all(r.status == "failed" and r.state.status == "failed" for r in failed)
    assert all(r.error is not None and "outage" in r.error for r in failed)
    assert len(server.requests) <= runs * 3
    assert executed == []

    server.handler = recovered
    resumed = await asyncio.gather(*(agent.run(r.state) for r in failed))
    assert [r.status for r in resumed] == ["finished"] * runs
    assert sorted(executed) == sorted(f"task {i}" for i in range(runs))  # each exactly once
    assert [r.run_id for r in resumed] == [r.run_id for r in failed]
