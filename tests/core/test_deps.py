"""Run dependencies (issue 12 item 4): deps reach tools through Invocation, and are never persisted."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import pytest

from tether import Action, Agent, Invocation, replay, tool
from tether.exceptions import UserError
from tether.stores.sqlite import SQLiteStore
from tether.testing import ScriptedModel

MARKER = "sk-live-DEPS-MARKER-7f3a9c"


@dataclass
class Deps:
    user: str
    api_key: str


@tool(effect="none")
def whoami(call: Invocation[Deps]) -> str:
    """Say who is asking."""
    return f"you are {call.deps.user}"


@tool(approval=True)
def charge(amount: int, call: Invocation[Deps]) -> str:
    """Charge the user (a human approves)."""
    assert call.deps.api_key == MARKER  # the secret is used, never written down
    return f"charged {call.deps.user} ${amount}"


def greet(inv: Invocation[Deps]) -> str:
    return f"You help {inv.deps.user}. Run {inv.run_id}."


def test_a_tool_gets_the_runs_deps_through_its_typed_invocation() -> None:
    agent = Agent(ScriptedModel([Action("whoami", {}), "done"]), [whoami])
    result = agent.run_sync("who am I?", deps=Deps("Ada", MARKER))
    assert result.context[2].content == "you are Ada"
    assert "call" not in whoami.parameters["properties"]  # the model never sees it
    assert whoami.deps_type is Deps


def test_every_entry_point_takes_deps() -> None:
    def agent() -> Agent:
        return Agent(ScriptedModel([Action("whoami", {}), "done"]), [whoami])

    async def streamed() -> list[str]:
        return [
            ev.result.content async for ev in agent().stream("who?", deps=Deps("B", "")) if ev.kind == "tool-finished"
        ]

    assert asyncio.run(streamed()) == ["you are B"]
    assert asyncio.run(agent().run("who?", deps=Deps("C", ""))).context[2].content == "you are C"
    assert agent().run_sync("who?", deps=Deps("D", "")).context[2].content == "you are D"


def test_a_run_without_the_deps_a_tool_declares_fails_at_once_naming_the_parameter() -> None:
    agent = Agent(ScriptedModel([Action("whoami", {}), "done"]), [whoami])
    with pytest.raises(
        UserError, match=r"tool 'whoami' needs run dependencies \(its parameter 'call' is Invocation\[Deps\]\)"
    ):
        agent.run_sync("who am I?")
    with pytest.raises(UserError, match="got deps of type str"):
        agent.run_sync("who am I?", deps="Ada")


def test_optional_deps_and_a_bare_invocation_need_none() -> None:
    @tool(effect="none")
    def maybe(call: Invocation[Deps | None]) -> str:
        return "anonymous" if call.deps is None else call.deps.user

    @tool(effect="none")
    def key(call: Invocation) -> str:
        return call.idempotency_key

    result = Agent(ScriptedModel([[Action("maybe", {}), Action("key", {})], "ok"]), [maybe, key]).run_sync("go")
    assert next(m.content for m in result.context if m.role == "tool") == "anonymous"


def test_dynamic_instructions_see_the_invocation_and_are_journaled_per_run() -> None:
    agent = Agent(ScriptedModel(["hi Ada", "hi Bob"]), instructions=greet)
    first = agent.run_sync("hello", deps=Deps("Ada", MARKER), run_id="r1")
    second = agent.run_sync("hello", deps=Deps("Bob", MARKER), run_id="r2")
    assert first.context[0].content == "You help Ada. Run r1."
    assert second.context[0].content == "You help Bob. Run r2."
    # Replay shows exactly what the model saw, without the deps.
    assert replay(first.events)[0].content == "You help Ada. Run r1."
    assert first.events[0].messages[0].content == "You help Ada. Run r1."


def test_a_handoff_target_renders_its_dynamic_instructions_with_the_same_deps() -> None:
    billing = Agent(
        ScriptedModel(["paid"]), [whoami], name="billing", instructions=lambda inv: f"Bill {inv.deps.user}."
    )
    support = Agent(ScriptedModel([Action("transfer_to_billing", {})]), name="support", handoffs=[billing])
    result = support.run_sync("pay", deps=Deps("Ada", MARKER))
    assert result.output == "paid"
    assert any(m.role == "system" and m.content == "Bill Ada." for m in result.context)


def test_a_child_run_gets_its_parents_deps() -> None:
    child = Agent(ScriptedModel([Action("whoami", {}), "it is Ada"]), [whoami], name="helper")
    parent = Agent(ScriptedModel([Action("helper", {"task": "who?"}), "done"]), [child.as_tool()])
    result = parent.run_sync("go", deps=Deps("Ada", MARKER))
    assert result.context[2].content == "it is Ada"


def _paused(db: Path) -> tuple[Agent, str]:
    def make(replies: list) -> Agent:
        return Agent(ScriptedModel(replies), [charge], store=SQLiteStore(db), instructions=greet)

    paused = make([Action("charge", {"amount": 5})]).run_sync("charge me $5", deps=Deps("Ada", MARKER))
    assert paused.status == "paused"
    return make(["Charged."]), paused.run_id


def test_resuming_without_deps_fails_before_any_tool_runs_and_commits_nothing(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    agent, run_id = _paused(db)
    store = SQLiteStore(db)
    from tether import record_decisions

    asyncio.run(record_decisions(store, run_id, lambda state: state.approve(state.open_calls[0].call.id)))
    before = asyncio.run(store.load(run_id))
    with pytest.raises(UserError, match=r"tool 'charge' needs run dependencies \(its parameter 'call'"):
        agent.run_sync(run_id=run_id)
    assert asyncio.run(store.load(run_id)) == before  # nothing ran, nothing was committed
    done = agent.run_sync(run_id=run_id, deps=Deps("Ada", MARKER))
    assert done.status == "finished"
    assert [m.content for m in done.context if m.role == "tool"] == ["charged Ada $5"]


def test_deps_are_never_in_the_store(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    agent, run_id = _paused(db)
    store = SQLiteStore(db)
    paused = asyncio.run(store.load(run_id))
    from tether import state_of

    state = state_of(paused).approve(state_of(paused).open_calls[0].call.id)
    assert agent.run_sync(state, deps=Deps("Ada", MARKER)).status == "finished"
    files = [p for p in tmp_path.iterdir() if p.name.startswith("runs.db")]
    assert files and any(p.name == "runs.db" for p in files)
    everything = b"".join(p.read_bytes() for p in files)
    assert b"Ada" in everything  # what the instructions and tools wrote is there...
    assert MARKER.encode() not in everything  # ...the deps themselves never are
    assert MARKER not in state.to_json()


def test_the_strategies_pass_deps_to_their_child_runs() -> None:
    from tether.strategies.plan_execute import plan_and_execute
    from tether.strategies.reflection import reflect

    writer = Agent(ScriptedModel([Action("whoami", {}), "written for Ada"]), [whoami], name="writer")
    done = asyncio.run(reflect(writer, "write", lambda answer, ctx: None, deps=Deps("Ada", "")))
    assert done.output == "written for Ada"

    planner = ScriptedModel(["1. say who I am"])
    executor = Agent(ScriptedModel([Action("whoami", {}), "you are Ada"]), [whoami], name="executor")
    planned = asyncio.run(plan_and_execute(planner, executor, "who am I?", deps=Deps("Ada", "")))
    assert planned.status == "finished"
