"""A run's notebook holds at most MAX_NOTEBOOK_PART_BYTES of images and files, so any state it pauses with parses back."""

from __future__ import annotations

import asyncio
import os

import pytest

from support import refund
from tether import Action, Agent, UserError, record_decisions, tool
from tether.messages import Message
from tether.parts import MAX_NOTEBOOK_PART_BYTES, MAX_PART_BYTES, Image, Text
from tether.state import MAX_STATE_BYTES, RunState
from tether.stores.sqlite import SQLiteStore
from tether.testing import ScriptedModel


def _image(size: int) -> Image:
    return Image(b"\x89PNG\r\n\x1a\n" + os.urandom(size - 8), "image/png")


def test_a_paused_state_holding_the_most_parts_a_notebook_may_hold_parses_back(tmp_path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    shots = [_image(MAX_PART_BYTES), _image(MAX_PART_BYTES), _image(MAX_NOTEBOOK_PART_BYTES - 2 * MAX_PART_BYTES)]
    agent = Agent(ScriptedModel([Action("refund", {"order": "A"})]), [refund], store=store)
    paused = agent.run_sync(Message.user(Text("look"), *shots), run_id="r1")
    assert paused.status == "paused"
    text = paused.state.to_json()
    assert len(text) < MAX_STATE_BYTES
    again = RunState.from_json(text)
    assert again == paused.state
    asyncio.run(record_decisions(store, "r1", lambda s: s.approve(s.open_calls[0].call.id)))
    assert Agent(ScriptedModel(["Done."]), [refund], store=store).run_sync(run_id="r1").status == "finished"


def test_a_task_whose_parts_are_over_the_notebook_cap_is_refused_before_anything_runs(tmp_path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    shots = [_image(MAX_PART_BYTES) for _ in range(3)]
    with pytest.raises(UserError, match="over the cap of 25,165,824"):
        Agent(ScriptedModel(["never"]), store=store).run_sync(Message.user(Text("look"), *shots), run_id="r1")
    assert store.integrity_check() == "ok"
    assert asyncio.run(store.get("r1")) is None


def test_a_tool_image_over_the_notebook_cap_is_left_out_with_a_note() -> None:
    shots = [_image(MAX_PART_BYTES - 100) for _ in range(3)]

    @tool
    def shoot(n: int) -> Image:
        """Take screenshot n."""
        return shots[n]

    steps = [Action("shoot", {"n": 0}), Action("shoot", {"n": 1}), Action("shoot", {"n": 2}), "seen"]
    done = Agent(ScriptedModel(steps), [shoot]).run_sync("look three times")
    results = [m for m in done.context if m.role == "tool"]
    assert [isinstance(m.content[0], Image) for m in results] == [True, True, False]
    assert "left out, the run's notebook holds 20,971,320 bytes of images and files" in results[2].text
    assert done.status == "finished"
