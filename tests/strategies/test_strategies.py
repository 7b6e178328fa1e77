"""Plan-and-Execute and Reflection drive ordinary agents."""

from __future__ import annotations

import pytest

from tether import Action, Agent, FunctionPolicy, UserError, tool
from tether.strategies import parse_plan, plan_and_execute, plan_execute_agent, reflect
from tether.testing import ScriptedModel


@tool(effect="none")
def look_up(order_id: str) -> str:
    return f"{order_id}: $79"


def test_reflection_revises_until_the_critic_accepts() -> None:
    model = ScriptedModel(["It was refunded.", "$79 was refunded."])
    seen: list[str] = []

    def critic(answer, context):
        seen.append(answer)
        return None if "$" in answer else "say the amount"

    result = _run(reflect(Agent(model), "How much?", critic))
    assert result.output == "$79 was refunded."
    assert seen == ["It was refunded.", "$79 was refunded."]
    assert "A reviewer read your answer and says: say the amount" in model.requests[1][-1].content
    model.assert_consumed()


def test_reflection_stops_after_the_round_budget() -> None:
    model = ScriptedModel(["a", "b"])
    result = _run(reflect(Agent(model), "x", lambda answer, ctx: "again", rounds=1))
    assert result.output == "b"
    model.assert_consumed()


def test_plan_and_execute_runs_each_step_in_one_notebook() -> None:
    planner = ScriptedModel(["1. look up order A1\n2. tell the customer the amount"])
    executor_model = ScriptedModel([Action("look_up", {"order_id": "A1"}), "A1 costs $79", "You paid $79."])
    result = _run(plan_and_execute(planner, Agent(executor_model, [look_up]), "What did I pay for A1?"))
    assert result.status == "finished" and result.output == "You paid $79."
    assert result.plans == [["look up order A1", "tell the customer the amount"]]
    # The second step saw the first step's work.
    assert any(m.content == "A1: $79" for m in executor_model.requests[-1])


def test_a_long_plan_keeps_its_first_steps_and_the_one_that_answers() -> None:
    planner = ScriptedModel(["\n".join(f"{i}. step {i}" for i in range(1, 30)) + "\n30. answer the user"])
    done: list[str] = []

    def brain(ctx, tools):  # type: ignore[no-untyped-def]
        done.append(ctx.last().content)
        return f"did {len(done)}"

    result = _run(plan_and_execute(planner, Agent(FunctionPolicy(brain)), "do it", max_plan_steps=4))
    assert result.status == "finished" and result.plans == [["step 1", "step 2", "step 3", "answer the user"]]
    assert done == ["Step 1 of 4: step 1", "Step 2 of 4: step 2", "Step 3 of 4: step 3", "Step 4 of 4: answer the user"]
    with pytest.raises(UserError, match="max_plan_steps"):
        plan_execute_agent(planner, Agent(FunctionPolicy(brain)), max_plan_steps=0)


@pytest.mark.parametrize("bad", [2.5, "3", True, -1])
def test_a_max_plan_steps_that_is_not_a_whole_number_is_refused_by_its_name(bad: object) -> None:
    # 2.5 used to reach Agent as max_steps=42.0: the error named a setting nobody passed.
    with pytest.raises(UserError, match="max_plan_steps"):
        plan_execute_agent(ScriptedModel([]), Agent(ScriptedModel([])), max_plan_steps=bad)  # type: ignore[arg-type]


def test_plan_and_execute_replans_when_a_step_fails() -> None:
    planner = ScriptedModel(["1. try the impossible", "1. do the possible"])

    def brain(ctx, tools):
        task = ctx.last().content
        return "done" if "possible" in task and "impossible" not in task else Action("look_up", {"order_id": "X"})

    executor = Agent(FunctionPolicy(brain), [look_up], max_steps=2)
    result = _run(plan_and_execute(planner, executor, "do it", max_replans=1))
    assert result.status == "finished" and result.output == "done"
    assert len(result.plans) == 2
    assert "ended limit-reached" in planner.requests[1][-1].content


def test_parse_plan() -> None:
    assert parse_plan("Plan:\n1. a\n2) b\n* c") == ["a", "b", "c"]
    assert parse_plan("just do it") == ["just do it"]
    assert parse_plan("") == []


def _run(coro):
    import asyncio

    return asyncio.run(coro)


# -- strategies are runs: they pause, resume across processes, and survive a crash ----------


def _desk_executor(store, ran):  # type: ignore[no-untyped-def]
    from tether import Agent, tool

    @tool(effect="none")
    def look(order_id: str) -> str:
        """Look up an order."""
        ran.append(f"look {order_id}")
        return f"{order_id}: $79"

    # Not support.refund: it writes into the same trace as look, so the order of the steps shows.
    @tool(approval=True)
    def refund(order_id: str) -> str:
        """Refund (a person approves)."""
        ran.append(f"refund {order_id}")
        return f"refunded {order_id}"

    def brain(ctx, tools):  # type: ignore[no-untyped-def]
        task = [m for m in ctx if m.role == "user"][-1].content
        if "Step 1" in task and ctx.last().role == "user":
            return Action("look", {"order_id": "A1"})
        if "Step 2" in task and ctx.last().role == "user":
            return Action("refund", {"order_id": "A1"})
        if "Step 3" in task:
            return "told: " + [m for m in ctx if m.role == "tool"][-1].content  # step 2's work, in this notebook
        return f"done: {ctx.last().content}"

    return Agent(FunctionPolicy(brain), [look, refund], store=store, name="executor")


PLAN = "1. look up A1\n2. refund A1\n3. tell the customer"


def test_a_plan_paused_in_step_two_is_approved_elsewhere_and_finishes_without_redoing_step_one() -> None:
    from tether import record_decisions
    from tether.stores.memory import MemoryStore

    store, ran = MemoryStore(), []
    paused = _run(plan_and_execute(ScriptedModel([PLAN]), _desk_executor(store, ran), "refund A1", run_id="p1"))
    assert paused.status == "paused" and ran == ["look A1"]
    assert paused.run is not None
    [item] = paused.run.items
    assert item.label == "plan-and-execute › executor › refund"
    _run(record_decisions(store, "p1", lambda s: s.approve(item.id, by="ana")))  # another process
    agent = plan_execute_agent(ScriptedModel([]), _desk_executor(store, ran))  # the planner is not asked again
    done = _run(agent.run(run_id="p1"))
    assert done.status == "finished" and ran == ["look A1", "refund A1"]
    assert done.output == "told: refunded A1"  # step 3 saw step 2's work


def test_a_plan_killed_mid_step_resumes_from_its_store() -> None:
    from tether.stores.memory import MemoryStore
    from tether.testing import CrashingStore, SimulatedCrash

    store, ran = MemoryStore(), []

    def look_finished(ev) -> bool:  # type: ignore[no-untyped-def]
        return ev.kind == "tool-finished" and ev.result.name == "look"

    crashing = CrashingStore(store, look_finished)
    with pytest.raises(SimulatedCrash):
        _run(plan_and_execute(ScriptedModel([PLAN]), _desk_executor(crashing, ran), "refund A1", run_id="p1"))
    agent = plan_execute_agent(ScriptedModel([]), _desk_executor(store, ran))
    paused = _run(agent.run(run_id="p1"))
    assert paused.status == "paused" and ran == ["look A1"]  # the finished look was not run again


def test_critic_verifies_with_its_own_tools_before_the_answer_is_accepted() -> None:
    from tether import tool

    checked: list[str] = []

    @tool(effect="none")
    def ledger(order_id: str) -> str:
        """What the ledger says about an order."""
        checked.append(order_id)
        return "A1 was refunded $79"

    def critic_brain(ctx, tools):  # type: ignore[no-untyped-def]
        if ctx.last().role == "user":
            return Action("ledger", {"order_id": "A1"})
        answer = [m for m in ctx if m.role == "user"][-1].content
        return "OK" if "$79" in answer else "The ledger says $79 was refunded; say so."

    writer = Agent(ScriptedModel(["A1 was refunded.", "A1 was refunded $79."]))
    result = _run(reflect(writer, "What happened to A1?", Agent(FunctionPolicy(critic_brain), [ledger])))
    assert result.output == "A1 was refunded $79." and checked == ["A1", "A1"]
    verdicts = [m.content for m in result.context if m.role == "assistant" and m.content.startswith("critic says")]
    assert verdicts == ["critic says: The ledger says $79 was refunded; say so."]
