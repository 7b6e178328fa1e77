"""Plan-and-Execute and Reflection drive ordinary agents."""

from __future__ import annotations

from tether import Action, Agent, FunctionPolicy, tool
from tether.strategies import parse_plan, plan_and_execute, reflect
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
