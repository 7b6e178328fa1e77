"""Sessions on every store: a named conversation continues run after run, compacted, fenced, and refused while waiting."""

from __future__ import annotations

import asyncio

import pytest

from support import refund
from tether import Action, Agent, FunctionPolicy, LeaseConflict, StateError, UserError
from tether._loop.session import NOT_FINISHED
from tether.events import Cancelled, RunStarted
from tether.memory import compactor
from tether.testing import ScriptedModel

from .conftest import Backend


def _echo(context, tools):
    """Says how many user notes it sees and the first of them."""
    users = [m.text for m in context if m.role == "user"]
    return f"{len(users)} notes, first {users[0]!r}"


async def test_each_run_of_a_session_starts_from_the_notebook_its_last_run_left(backend: Backend) -> None:
    store = await backend.open()
    agent = Agent(FunctionPolicy(_echo), instructions="Be brief.", store=store)
    first = await agent.run("I am Ada", session="customer-42")
    assert first.output == "1 notes, first 'I am Ada'"
    other = Agent(FunctionPolicy(_echo), instructions="Be brief.", store=await backend.open())  # another process
    second = await other.run("what is my name?", session="customer-42")
    assert second.output == "2 notes, first 'I am Ada'"
    assert [m.role for m in second.context] == ["system", "user", "assistant", "user", "assistant"]
    started = (await store.load(second.run_id))[0]
    assert isinstance(started, RunStarted)
    assert started.meta == {"session": "customer-42", "continues": first.run_id}
    await agent.run("hello", session="someone-else")

    listed = await (await backend.open()).sessions()
    assert [(s.name, s.runs) for s in listed] == [("someone-else", 1), ("customer-42", 2)]
    (mine,) = await store.sessions("customer-42")
    assert (mine.last_run, mine.status) == (second.run_id, "finished")
    assert await store.sessions("nobody") == []


async def test_a_session_whose_last_run_is_paused_refuses_a_new_run(backend: Backend) -> None:
    store = await backend.open()
    agent = Agent(ScriptedModel([Action("refund", {"order": "A1"})]), [refund], store=store)
    paused = await agent.run("refund A1", session="s")
    with pytest.raises(StateError, match=rf"session 's' cannot start a new run: its last run {paused.run_id!r} waits"):
        await Agent(FunctionPolicy(_echo), [refund], store=store).run("anything else?", session="s")
    done = await Agent(ScriptedModel(["Refunded."]), [refund], store=store).run(
        paused.state.approve(paused.items[0].call.id)
    )
    assert done.status == "finished"
    after = await Agent(FunctionPolicy(_echo), [refund], store=store).run("anything else?", session="s")
    assert after.output == "2 notes, first 'refund A1'"


async def test_a_long_session_is_compacted_before_each_new_run(backend: Backend) -> None:
    store = await backend.open()
    seen: list[int] = []

    def brain(context, tools):
        seen.append(len(context))
        return f"answer {len(seen)}"

    agent = Agent(FunctionPolicy(brain), store=store, compactor=compactor(max_messages=8, keep_last=4))
    for i in range(12):
        await agent.run(f"question {i}", session="long")
    assert max(seen) <= 9  # never more than the compactor lets through, plus the new question
    last = await store.sessions("long")
    started = (await store.load(last[0].last_run))[0]
    assert isinstance(started, RunStarted) and len(started.messages) <= 9
    assert started.messages[0].text.startswith("Summary of earlier notes:")
    assert started.messages[-1].text == "question 11"


async def test_a_run_that_stopped_mid_turn_leaves_a_note_for_each_open_call(backend: Backend) -> None:
    store = await backend.open()
    paused = await Agent(ScriptedModel([Action("refund", {"order": "A1"})]), [refund], store=store).run(
        "refund A1", session="s"
    )
    cancel = Cancelled("the customer left", final=True)  # what `tether cancel` records
    await store.append(paused.run_id, [cancel], expected_seq=paused.state.seq)
    after = await Agent(FunctionPolicy(_echo), [refund], store=store).run("and now?", session="s")
    note = after.context[-3]
    assert note.role == "tool" and note.is_error and note.text == NOT_FINISHED
    assert after.output == "2 notes, first 'refund A1'"


async def test_two_runs_cannot_both_continue_one_session(backend: Backend) -> None:
    store = await backend.open()
    first = await Agent(FunctionPolicy(_echo), store=store).run("hi", session="s")
    stale = RunStarted("late", (), meta={"session": "s", "continues": ""})  # saw the session before `first`
    with pytest.raises(LeaseConflict, match=f"session 's' moved on: .* its last run is {first.run_id!r}"):
        await (await backend.open()).append("late", [stale], expected_seq=0)
    assert await store.get("late") is None
    fresh = RunStarted("next", (), meta={"session": "s", "continues": first.run_id})
    assert await store.append("next", [fresh], expected_seq=0) == 1


async def test_a_session_needs_a_store_and_a_new_task(backend: Backend) -> None:
    with pytest.raises(UserError, match="a session lives in the run store"):
        await Agent(FunctionPolicy(_echo)).run("hi", session="s")
    store = await backend.open()
    with pytest.raises(UserError, match="session= starts a new run"):
        await Agent(FunctionPolicy(_echo), store=store).run(run_id="r1", session="s")


async def test_of_two_runs_starting_at_once_in_one_session_exactly_one_is_written(backend: Backend) -> None:
    store = await backend.open()
    first = await Agent(FunctionPolicy(_echo), store=store).run("hi", session="s")
    a, b = await backend.open(), await backend.open()  # two workers, each with its own connection
    racing = [
        s.append(rid, [RunStarted(rid, (), meta={"session": "s", "continues": first.run_id})], expected_seq=0)
        for s, rid in ((a, "left"), (b, "right"))
    ]
    outcomes = await asyncio.gather(*racing, return_exceptions=True)
    assert sorted(type(o).__name__ for o in outcomes) == ["LeaseConflict", "int"]
    (info,) = await store.sessions("s")
    assert info.runs == 2 and info.last_run in ("left", "right")
    assert [await store.get(r) is not None for r in ("left", "right")].count(True) == 1
