"""Invariants over random runs: replaying events rebuilds the context and the state."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tether import Agent, Message, RunState, ToolCall, replay, state_of, tool
from tether.stores.memory import MemoryStore
from tether.testing import ScriptedModel


@tool(effect="none")
def read(key: str) -> str:
    return f"value of {key}"


@tool(approval=True)
def write(key: str) -> str:
    return f"wrote {key}"


@tool(effect="none")
def broken() -> str:
    raise ValueError("nope")


CALL = st.sampled_from(
    [
        ("read", '{"key": "a"}'),
        ("read", '{"key": 1}'),  # invalid arguments
        ("write", '{"key": "b"}'),  # needs approval
        ("broken", "{}"),
        ("missing", "{}"),  # unknown tool
        ("read", "{not json"),
    ]
)
TURNS = st.lists(st.lists(CALL, min_size=1, max_size=4), max_size=4)


def _script(turns: list[list[tuple[str, str]]]) -> list[Message]:
    replies = [
        Message.assistant(f"turn {t}", [ToolCall(f"c{t}_{i}", name, args) for i, (name, args) in enumerate(calls)])
        for t, calls in enumerate(turns)
    ]
    return [*replies, Message.assistant("the end")]


@settings(max_examples=150, deadline=None)
@given(TURNS, st.booleans())
def test_events_rebuild_the_context_and_the_state_through_pauses(turns, approve: bool) -> None:
    store = MemoryStore()
    agent = Agent(ScriptedModel(_script(turns)), [read, write, broken], store=store)
    result = agent.run_sync("go", run_id="r")
    rounds = 0
    while result.status == "paused" and rounds < 10:
        rounds += 1
        state = result.state
        for p in state.open_calls:
            state = state.approve(p.call.id) if approve else state.deny(p.call.id, "no")
        result = agent.run_sync(RunState.from_json(state.to_json()))
        # The journal folded from the store equals what the live loop ended with.
        import asyncio

        events = asyncio.run(store.load("r"))
        assert replay(events) == result.context
        assert state_of(events) == result.state
    assert result.status == "finished"
    # Every call got exactly one result, after its own assistant message.
    ctx = list(result.context)
    asked = [c.id for m in ctx if m.role == "assistant" for c in m.tool_calls]
    answered = [m.tool_call_id for m in ctx if m.role == "tool"]
    assert sorted(asked) == sorted(answered) and len(set(answered)) == len(answered)
    assert json.loads(json.dumps(result.context.to_list())) == result.context.to_list()
