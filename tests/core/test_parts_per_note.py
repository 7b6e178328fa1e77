"""A note holds at most MAX_PARTS parts: a state listing more is refused before any part is parsed."""

from __future__ import annotations

import json

import pytest

from support import refund
from tether import Action, Agent, StateError
from tether.messages import Message
from tether.parts import MAX_PARTS, Text
from tether.state import RunState
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
