"""Fallback: the backup answers after a provider failure, never after a model mistake; the journal says who answered."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from tether import Agent, Message, ProviderError, UserError, tool
from tether.context import Context
from tether.events import ModelReplied
from tether.policy import FunctionPolicy
from tether.providers import Anthropic, Fallback, OpenAICompatible
from tether.stores.sqlite import SQLiteStore
from tether.testing import ScriptedModel
from tether.tools import Tool

from .conftest import Sleeps
from .fakeserver import FakeServer, Reply, turn


@tool(effect="none")
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def pair(server: FakeServer, sleeps: Sleeps, **primary: object) -> Fallback:
    """An OpenAI-shaped primary and an Anthropic-shaped backup, both on the fake server."""
    first = OpenAICompatible("primary-model", base_url=server.openai_url, api_key="k", sleep=sleeps, **primary)  # type: ignore[arg-type]
    second = Anthropic("backup-model", base_url=server.anthropic_url, api_key="k", sleep=sleeps, cache=False)
    return Fallback(first, second)


async def test_the_backup_answers_after_the_primary_fails_and_the_journal_says_so(
    server: FakeServer, sleeps: Sleeps, tmp_path: Path
) -> None:
    server.push(
        turn("Adding.", [("c1", "add", {"a": 2, "b": 3})]),  # the primary's first turn
        Reply.error(503), Reply.error(503),  # its next turn fails, retries included
        turn("2 + 3 = 5"),  # so the backup answers that turn
    )  # fmt: skip
    store = SQLiteStore(tmp_path / "runs.db")
    async with pair(server, sleeps, max_retries=1) as policy:
        result = await Agent(policy, [add], store=store).run("2 + 3?")
    assert result.status == "finished" and result.output == "2 + 3 = 5"
    assert [r.shape for r in server.requests] == ["openai", "openai", "openai", "anthropic"]
    events = await store.load(result.run_id)  # read back from SQLite: the JSON the journal holds
    replies = [e.message for e in events if isinstance(e, ModelReplied)]
    assert [m.model for m in replies] == ["primary-model", "backup-model"]
    assert [m.model for m in result.context if m.role == "assistant"] == ["primary-model", "backup-model"]
    await store.aclose()
    server.assert_consumed()


async def test_a_model_mistake_is_a_note_for_the_same_model_not_a_fallback(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(
        turn(tool_calls=[("c1", "add", "{not json")]),  # malformed arguments: the loop writes a note
        turn("Sorry: 2 + 3 = 5"),
    )
    async with pair(server, sleeps) as policy:
        result = await Agent(policy, [add]).run("2 + 3?")
    assert result.output == "Sorry: 2 + 3 = 5"
    assert [r.shape for r in server.requests] == ["openai", "openai"]  # the backup was never asked
    note = server.requests[1].json()["messages"][-1]
    assert note["role"] == "tool" and "are not a JSON object" in note["content"]


async def test_when_every_model_fails_the_run_fails_resumably_with_both_reasons(
    server: FakeServer, sleeps: Sleeps
) -> None:
    server.push(Reply.error(500, "primary down"), Reply.error(529, "backup overloaded", kind="overloaded_error"))
    async with pair(server, sleeps, max_retries=0) as policy:
        policy.policies[1].max_retries = 0  # type: ignore[attr-defined]
        agent = Agent(policy)
        result = await agent.run("hi")
        assert result.status == "failed" and result.error is not None
        assert "every model failed (primary-model:" in result.error and "; backup-model:" in result.error
        assert "primary down" in result.error and "backup overloaded" in result.error
        server.push(turn("Back again."))
        resumed = await agent.run(result.state)
    assert resumed.status == "finished" and resumed.output == "Back again."


def raising(error: Exception) -> FunctionPolicy:
    def brain(context: Context, tools: Sequence[Tool]) -> str:
        raise error

    return FunctionPolicy(brain)


async def test_any_policy_can_be_a_primary_and_the_reply_names_its_model() -> None:
    policy = Fallback(raising(ProviderError("down")), ScriptedModel(["all good"]), names=["a", "b"])
    pieces = [p async for p in policy.stream(Context([Message.user("hi")]), ())]
    assert pieces == [Message.assistant("all good")] and isinstance(pieces[0], Message) and pieces[0].model == "b"


async def test_a_developer_error_is_raised_not_a_reason_to_move_on() -> None:
    with pytest.raises(UserError, match="bad configuration"):
        await Fallback(raising(UserError("bad configuration")), ScriptedModel([])).decide(Context([]), ())


def test_names_must_match_the_policies() -> None:
    with pytest.raises(UserError, match="2 policies but 1 names"):
        Fallback(ScriptedModel(["a"]), ScriptedModel(["b"]), names=["only"])
