"""Some states do not resume: one over its size cap (counted in bytes), one of a run cancelled for good."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from support import refund_tool
from tether import Action, Agent, Cancelled, RunState, StateError, record_decisions, state_of
from tether.messages import Message
from tether.stores.memory import MemoryStore
from tether.testing import ScriptedModel

ran: list[Any] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def test_a_run_cancelled_for_good_does_not_resume_through_a_state_either() -> None:
    refund = refund_tool(ran)

    store = MemoryStore()
    paused = Agent(ScriptedModel([Action("refund", {"order": "A1"})]), [refund], store=store).run_sync(
        "go", run_id="r1"
    )
    asyncio.run(record_decisions(store, "r1", lambda s: s.approve(paused.items[0].id)))
    events = asyncio.run(store.load("r1"))
    asyncio.run(store.append("r1", [Cancelled("closed by a person", final=True)], expected_seq=len(events)))
    with pytest.raises(StateError, match="cancelled for good"):
        Agent(ScriptedModel(["ok"]), [refund], store=store).run_sync(state_of(events))
    assert ran == []


def test_the_state_size_cap_counts_bytes_not_characters() -> None:
    text = RunState("r1", (Message.user("é" * 60),)).to_json()
    cap = len(text) + 10  # more characters fit than bytes do
    assert len(text) < cap < len(text.encode())
    with pytest.raises(StateError, match=f"over the cap of {cap}"):
        RunState.from_json(text, max_bytes=cap)
