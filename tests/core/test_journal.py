"""The journal: committed events folded into a run's state, by one set of rules."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from tether import (
    Action,
    Agent,
    ApprovalDecided,
    ApprovalRequested,
    Cancelled,
    Compacted,
    Decision,
    Event,
    Failed,
    Finished,
    LimitReached,
    Message,
    ModelReplied,
    Paused,
    RunStarted,
    RunState,
    ToolCall,
    ToolFinished,
    ToolStarted,
    Usage,
    tool,
)
from tether.events import from_dict, to_dict
from tether.journal import Journal, replay, state_of, status_of
from tether.stores.memory import MemoryStore
from tether.testing import ScriptedModel

A, B, C = (ToolCall(f"c{i}", "t", "{}") for i in range(3))


def result(call: ToolCall, text: str) -> ToolFinished:
    return ToolFinished(Message.tool_result(call.id, text, name="t"))


def opening() -> list[Event]:
    reply = Message("assistant", "three calls", (A, B, C), usage=Usage(10, 2, 1))
    return [RunStarted("r1", (Message.user("go"),), False, "fp"), ModelReplied(reply)]


def test_results_join_the_notebook_in_call_order_whatever_order_they_finish_in() -> None:
    j = Journal.of([*opening(), result(C, "c"), result(A, "a")])
    assert [m.content for m in j.context] == ["go", "three calls"]  # the turn is not settled yet
    assert list(j.pending) == ["c1"]
    j.apply(result(B, "b"))
    assert [m.content for m in j.context][-3:] == ["a", "b", "c"] and not j.pending


def test_a_pause_writes_the_results_that_are_in_and_the_rest_follow_after_resume() -> None:
    events = [*opening(), result(C, "c"), ApprovalRequested(A, "h"), ApprovalRequested(B, "h")]
    j = Journal.of(events)
    j.apply(Paused("approval", ("c0", "c1"), j.snapshot(pausing="approval")))
    assert [m.content for m in j.context][-1] == "c" and j.status == "paused" and j.paused_at == j.seq
    assert {p.status for p in j.pending.values()} == {"awaiting-approval"}
    j.apply(RunStarted("r1", (), True, "fp"))
    j.apply(result(B, "b"))
    j.apply(result(A, "a"))
    assert [m.content for m in j.context][-3:] == ["c", "a", "b"]  # the rest follow in call order


def test_the_snapshot_holds_every_result_that_is_in_even_mid_turn() -> None:
    j = Journal.of([*opening(), result(C, "c")])
    assert [m.content for m in j.snapshot().messages][-1] == "c"
    assert [m.content for m in j.context][-1] == "three calls"  # the notebook itself waits for a and b


def test_a_resume_mid_turn_writes_the_results_that_are_in_first() -> None:
    j = Journal.of([*opening(), result(C, "c"), result(A, "a"), RunStarted("r1", (), True, "fp"), result(B, "b")])
    assert [m.content for m in j.context][-3:] == ["a", "c", "b"]


def test_counters_usage_and_the_first_attempt_count_a_tool_call_once() -> None:
    j = Journal.of([*opening(), ToolStarted(A, 1), ToolStarted(A, 2), ToolStarted(B, 1)])
    assert (j.steps, j.tool_calls, j.usage) == (1, 2, Usage(10, 2, 1))
    assert j.pending["c0"].status == "started" and j.pending["c0"].attempts == 2


def test_a_decision_is_spent_when_its_call_starts() -> None:
    d = Decision("r1", "c0", "approve", "h", 3)
    j = Journal.of([*opening(), ApprovalDecided(d)])
    assert j.decisions == {"c0": d}
    j.apply(ToolStarted(ToolCall("c0", "t", '{"edited": 1}')))
    assert j.decisions == {} and j.pending["c0"].call.arguments == '{"edited": 1}'


def test_compaction_replaces_the_notebook() -> None:
    j = Journal.of([RunStarted("r1", (Message.user("a"), Message.user("b"))), Compacted((Message.user("sum"),))])
    assert [m.content for m in j.context] == ["sum"]


def test_a_final_cancel_closes_the_run_and_an_interruption_does_not() -> None:
    assert Journal.of([RunStarted("r1"), Cancelled("stop", final=True)]).closed
    assert not Journal.of([RunStarted("r1"), Cancelled("stop")]).closed


def test_one_rule_gives_the_status_every_event_leaves_a_run_in() -> None:
    state = RunState("r1", ())
    cases: list[tuple[Event, str]] = [
        (RunStarted("r1"), "running"),
        (ModelReplied(Message.assistant("x")), "running"),
        (Paused("approval", (), state), "paused"),
        (Paused("outcome-unknown", (), state), "needs-decision"),
        (Finished("ok"), "finished"),
        (Failed("boom"), "failed"),
        (Cancelled(), "cancelled"),
        (LimitReached("steps", 3), "limit-reached"),
    ]
    for ev, status in cases:
        assert status_of("running", [ev]) == status
        assert Journal.of([RunStarted("r1"), ev]).status == status
    assert status_of("paused", [ApprovalDecided(Decision("r1", "c", "approve", "h", 1))]) == "paused"


@tool(effect="none")
def read(key: str) -> str:
    """Read a key."""
    return f"value of {key}"


@tool(approval=True)
def write(key: str) -> str:
    """Write a key."""
    return f"wrote {key}"


MOVES = st.lists(
    st.lists(st.sampled_from(["read", "write", "nope"]), min_size=1, max_size=3).map(
        lambda names: [Action(n, {"key": "k"}) for n in names]
    ),
    max_size=3,
)


@settings(max_examples=60, deadline=None)
@given(MOVES, st.booleans())
def test_folding_all_events_at_once_equals_folding_them_one_by_one(turns: list[list[Action]], approve: bool) -> None:
    store = MemoryStore()
    agent = Agent(ScriptedModel([*turns, "the end"]), [read, write], store=store)
    res = agent.run_sync("go", run_id="r")
    while res.status == "paused":
        state = res.state
        for p in state.open_calls:
            state = state.approve(p.call.id) if approve else state.deny(p.call.id, "no")
        res = agent.run_sync(state)
    events = asyncio.run(store.load("r"))
    stepwise = Journal()
    for i, ev in enumerate(events, 1):
        stepwise.apply(ev)
        assert stepwise.snapshot() == Journal.of(events[:i]).snapshot()
    assert stepwise.snapshot() == state_of(events) == res.state
    assert replay(events) == res.context
    assert state_of([from_dict(to_dict(e)) for e in events]) == res.state  # the same after a JSON round trip


def test_every_committed_event_carries_the_time_it_was_committed_and_the_store_keeps_it() -> None:
    import time

    store = MemoryStore()
    before = time.time()
    result = Agent(ScriptedModel([Action("read", {"key": "k"}), "done"]), [read], store=store).run_sync(
        "go", run_id="r"
    )
    stamps = [e.at for e in result.events]
    assert all(before <= t <= time.time() for t in stamps) and stamps == sorted(stamps)
    loaded = [from_dict(to_dict(e)) for e in asyncio.run(store.load("r"))]
    assert [e.at for e in loaded] == stamps
