"""Scripted and plain-Python brains, and the guard against real model calls."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tether import (
    Action,
    Agent,
    FunctionPolicy,
    Message,
    ModelRequestsBlocked,
    ScriptExhausted,
    ToolCall,
    UserError,
    tool,
)
from tether.policy import deciding_run, to_message
from tether.testing import ScriptedModel, block_model_requests, check_model_request


@tool(effect="none")
def echo(text: str) -> str:
    return text


def test_scripted_model_is_loud_when_it_runs_out() -> None:
    agent = Agent(ScriptedModel([Action("echo", {"text": "a"})]), [echo])
    with pytest.raises(ScriptExhausted, match="asked for reply #2 but has only 1"):
        agent.run_sync("go")


def test_scripted_model_is_loud_about_unused_replies() -> None:
    model = ScriptedModel(["one", "two"])
    Agent(model).run_sync("go")
    with pytest.raises(AssertionError, match="1 unused replies"):
        model.assert_consumed()


def test_a_failing_run_is_journaled_as_failed_before_the_error_propagates() -> None:
    from tether.stores.memory import MemoryStore

    store = MemoryStore()
    with pytest.raises(ScriptExhausted):
        Agent(ScriptedModel([]), store=store).run_sync("go", run_id="r1")
    info = asyncio.run(store.get("r1"))
    assert info is not None and info.status == "failed"


def test_function_policy_may_return_answers_actions_lists_or_messages() -> None:
    def brain(ctx, tools):
        turn = sum(m.role == "assistant" for m in ctx)
        return [
            Action("echo", {"text": "one"}, "first"),
            [Action("echo", {"text": "a"}), Action("echo", {"text": "b"})],
            ToolCall("my-id", "echo", '{"text": "c"}'),
            Message.assistant("done by message"),
        ][turn]

    result = Agent(FunctionPolicy(brain), [echo]).run_sync("go")
    assert result.output == "done by message"
    assert [m.content for m in result.context if m.role == "tool"] == ["one", "a", "b", "c"]


def test_async_function_policy() -> None:
    async def brain(ctx, tools):
        await asyncio.sleep(0)
        return "async answer"

    assert Agent(FunctionPolicy(brain)).run_sync("go").output == "async answer"


def test_a_policy_must_answer_as_the_assistant() -> None:
    with pytest.raises(UserError, match="assistant message"):
        to_message(Message.user("hi"))
    with pytest.raises(UserError, match="expected an Action"):
        to_message([42])  # type: ignore[list-item]
    with pytest.raises(UserError, match="no decide"):
        Agent(object())  # type: ignore[arg-type]


def test_streaming_policies_produce_token_events() -> None:
    result = Agent(ScriptedModel(["hello brave new world"], stream=True)).run_sync("go")
    tokens = [e.text for e in result.events if e.kind == "token"]
    assert tokens == ["hello ", "brave ", "new ", "world"]
    assert result.output == "hello brave new world"


class _Seen:
    """A streaming brain that notes the run it decides for, before and after its first piece."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def decide(self, context: object, tools: object) -> Message:
        raise AssertionError("the loop streams a policy that can stream")

    async def stream(self, context: object, tools: object) -> AsyncIterator[str | Message]:
        self.seen.append(deciding_run())
        yield "thinking "
        self.seen.append(deciding_run())
        yield Message.assistant("done")


def test_a_policy_knows_which_run_it_decides_for() -> None:
    """A policy shared by runs (and their child runs) keeps per-run state under deciding_run()."""
    seen: list[str] = []

    def brain(context: object, tools: object) -> str | Action:
        seen.append(deciding_run())
        return Action("helper", {"task": "x"}) if len(seen) == 1 else "ok"

    streaming = _Seen()
    helper = Agent(streaming, name="helper").as_tool()
    result = Agent(FunctionPolicy(brain), [helper]).run_sync("go", run_id="parent")
    assert result.status == "finished"
    assert seen == ["parent", "parent"]
    call = next(c for m in result.context for c in m.tool_calls)
    assert streaming.seen == [f"parent/{call.id}"] * 2  # the child run's id, for every piece
    assert deciding_run() == ""  # outside a decision it names nothing


def test_real_model_requests_are_blocked_in_tests_but_loopback_is_allowed() -> None:
    with pytest.raises(ModelRequestsBlocked, match=r"api\.openai\.com"):
        check_model_request("https://api.openai.com/v1/chat/completions")
    check_model_request("http://127.0.0.1:8080/v1/chat/completions")
    with block_model_requests(False):
        check_model_request("https://api.openai.com/v1/chat/completions")
    with pytest.raises(ModelRequestsBlocked):
        check_model_request("https://api.anthropic.com/v1/messages")
