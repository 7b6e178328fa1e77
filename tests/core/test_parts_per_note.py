"""A note holds at most MAX_PARTS parts: a state listing more is refused before any part is parsed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from support import refund
from tether import Action, Agent, StateError, tool
from tether.journal import state_of
from tether.messages import Message
from tether.parts import MAX_PARTS, Image, Text
from tether.state import RunState
from tether.stores.sqlite import SQLiteStore
from tether.testing import ScriptedModel


def test_a_state_whose_note_lists_more_parts_than_the_cap_is_refused() -> None:
    paused = Agent(ScriptedModel([Action("refund", {"order": "A"})]), [refund]).run_sync("r")
    data = json.loads(paused.state.to_json())
    data["messages"][0]["content"] = [{"type": "text", "text": ""}] * (MAX_PARTS + 1)
    with pytest.raises(StateError, match="at most 1,000 parts"):
        RunState.from_json(json.dumps(data))
    data["messages"][0]["content"] = [{"type": "text", "text": ""}] * MAX_PARTS
    assert len(RunState.from_json(json.dumps(data)).messages[0].content) == MAX_PARTS


def test_a_note_made_with_more_parts_than_the_cap_is_refused() -> None:
    with pytest.raises(ValueError, match="at most 1,000 parts"):
        Message.user(*[Text("x")] * (MAX_PARTS + 1))
    assert len(Message.user(*[Text("x")] * MAX_PARTS).content) == MAX_PARTS


def test_a_tool_result_with_more_parts_than_the_cap_becomes_a_note_saying_what_was_left_out(tmp_path: Path) -> None:
    # The attack: a tool (an MCP server, a browser) answers with 1,500 parts. It used to raise out
    # of Agent.run, and every resume of the stored run failed the same way.
    @tool
    def gallery() -> list[Image]:
        """Every thumbnail."""
        return [Image(url=f"https://example.com/{i}.png") for i in range(MAX_PARTS + 500)]

    store = SQLiteStore(tmp_path / "runs.db")
    done = Agent(ScriptedModel([Action("gallery", {}), "Seen."]), [gallery], store=store).run_sync("look", run_id="r1")
    assert done.status == "finished" and done.output == "Seen."
    [result] = [m for m in done.state.messages if m.role == "tool"]
    assert isinstance(result.content, tuple) and len(result.content) == MAX_PARTS
    assert isinstance(result.content[-2], Image) and result.content[-2].url == "https://example.com/998.png"
    last = result.content[-1]
    assert isinstance(last, Text) and "501 of its 1,500 parts were left out" in last.text
    stored = state_of(asyncio.run(store.load("r1")))  # the stored run loads
    assert stored.status == "finished" and stored.messages == done.state.messages
    asyncio.run(store.aclose())
