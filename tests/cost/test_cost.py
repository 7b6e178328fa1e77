"""What runs cost: prices, a run's cost from the usage its replies recorded, and the cost budget."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from support import refund
from tether import Action, Agent, FunctionPolicy, Message, ToolCall, Usage, UserError, state_of, tool
from tether.cost import PRICES, PRICES_AS_OF, Price, cost_of, price_of, total_cost
from tether.journal import Journal
from tether.stores.memory import MemoryStore
from tether.testing import ScriptedModel


def named(policy: Any, model: str) -> Any:
    policy.model = model  # what a provider's policy carries: the model's name
    return policy


def said(text: str = "", *calls: Any, tokens: tuple[int, int] = (1_000, 100)) -> Message:
    """A reply that reports its usage, as a provider's does."""
    return Message("assistant", text, calls, usage=Usage(tokens[0], tokens[1], 1))


@tool(effect="none")
def look_up(order: str) -> str:
    """Look an order up."""
    return f"{order}: delivered"


def call(name: str, **args: Any) -> ToolCall:
    return ToolCall.of(name, args)


# -- prices ------------------------------------------------------------------


def test_the_shipped_prices_are_dated_and_cover_the_four_vendors() -> None:
    assert PRICES_AS_OF == "2026-12-01"
    for model in ("gpt-4o", "claude-sonnet-4-5", "deepseek-chat", "llama-3.3-70b-versatile"):
        assert price_of(model) is PRICES[model]


def test_a_dated_snapshot_name_is_priced_as_its_model() -> None:
    assert price_of("claude-sonnet-4-5-20250929") is PRICES["claude-sonnet-4-5"]
    assert price_of("gpt-4o-2024-08-06") is PRICES["gpt-4o"]
    assert price_of("gpt-4o-mini") is PRICES["gpt-4o-mini"]  # not mistaken for gpt-4o
    assert price_of("nobody-priced-me") is None and price_of(None) is None


def test_your_prices_come_before_the_shipped_ones() -> None:
    mine = Price(input=1.0, output=1.0)
    assert price_of("gpt-4o", {"gpt-4o": mine}) is mine
    assert cost_of(Usage(2_000_000, 1_000_000), "gpt-4o", {"gpt-4o": mine}) == 3.0


def test_cache_reads_and_writes_are_priced_apart_from_fresh_input() -> None:
    price = Price(input=3.0, output=15.0, cached_input=0.30, cache_write=3.75)
    # A provider's usage with cache counts (inside input_tokens, as OpenAI reports them).
    usage: Any = SimpleNamespace(
        input_tokens=1_000_000, output_tokens=0, cache_read_tokens=600_000, cache_write_tokens=100_000
    )
    assert price.cost(usage) == pytest.approx(0.3 * 3.0 + 0.6 * 0.30 + 0.1 * 3.75)
    assert Price(input=3.0, output=15.0).cost(usage) == pytest.approx(3.0)  # no cache prices: plain input


def test_total_cost_prices_each_model_and_is_unknown_when_one_is_unpriced() -> None:
    by_model = {"gpt-4o": Usage(1_000_000, 0), "deepseek-chat": Usage(0, 1_000_000)}
    assert total_cost(by_model) == pytest.approx(2.50 + 0.42)
    assert total_cost({**by_model, "mystery": Usage(1, 0)}) is None
    assert total_cost({"mystery": Usage(0, 0, 1)}) == 0.0  # nothing spent costs nothing


# -- a run's cost -----------------------------------------------------------


def test_a_runs_cost_comes_from_the_usage_its_replies_recorded() -> None:
    model = named(
        ScriptedModel([said("", call("look_up", order="A1")), said("Delivered.", tokens=(3_000, 50))]), "gpt-4o"
    )
    result = Agent(model, [look_up]).run_sync("Where is A1?")
    assert result.usage == Usage(4_000, 150, 2)
    assert result.cost == pytest.approx((4_000 * 2.50 + 150 * 10.00) / 1e6)


def test_a_function_policy_is_priced_under_the_name_it_is_given() -> None:
    brain = named(FunctionPolicy(lambda ctx, tools: said("hi", tokens=(1_000_000, 0))), "house-model")
    agent = Agent(brain, prices={"house-model": Price(input=0.5, output=1.0)})
    assert agent.run_sync("hello").cost == pytest.approx(0.5)


def test_a_brain_without_a_price_gives_an_unknown_cost() -> None:
    assert Agent(ScriptedModel([said("hi")])).run_sync("hello").cost is None


def test_each_segment_of_a_stored_run_is_priced_by_the_model_that_drove_it() -> None:
    store = MemoryStore()
    first = named(ScriptedModel([said("", call("refund", order="A1"), tokens=(1_000_000, 0))]), "gpt-4o")
    paused = Agent(first, [refund], store=store).run_sync("Refund A1", run_id="r1")
    approved = paused.state.approve(paused.items[0].call.id)
    second = named(ScriptedModel([said("Refunded.", tokens=(1_000_000, 0))]), "deepseek-chat")
    done = Agent(second, [refund], store=store).run_sync(approved)
    assert done.cost == pytest.approx(2.50 + 0.28)
    journal = Journal.of(asyncio.run(store.load("r1")))
    assert journal.usage_by_model == {"gpt-4o": Usage(1_000_000, 0, 1), "deepseek-chat": Usage(1_000_000, 0, 1)}


def test_a_state_resumed_without_a_store_prices_its_past_as_the_current_model() -> None:
    first = named(ScriptedModel([said("", call("refund", order="A1"), tokens=(1_000_000, 0))]), "gpt-4o")
    paused = Agent(first, [refund]).run_sync("Refund A1")
    second = named(ScriptedModel([said("Refunded.", tokens=(1_000_000, 0))]), "deepseek-chat")
    done = Agent(second, [refund]).run_sync(paused.state.approve(paused.items[0].call.id))
    assert done.cost == pytest.approx(0.28 + 0.28)  # a state keeps the total usage only


# -- the cost budget ---------------------------------------------------------


def looping(model: str = "gpt-4o", n: int = 5) -> Any:
    """A brain that looks A1 up again and again, each reply costing $0.0035 at gpt-4o prices."""
    replies = [said("", call("look_up", order="A1"), tokens=(1_000, 100)) for _ in range(n)]
    return named(ScriptedModel([*replies, said("Delivered.")]), model)


def test_max_cost_ends_the_run_with_limit_reached_before_the_next_model_call() -> None:
    brain = looping()
    result = Agent(brain, [look_up], max_cost=0.006).run_sync("Where is A1?")
    assert (result.status, result.limit) == ("limit-reached", "cost")
    assert result.events[-1].kind == "limit-reached" and result.events[-1].value == 0.006  # type: ignore[union-attr]
    assert brain.remaining == 4  # two replies made ($0.007), then no more model calls
    assert result.cost == pytest.approx(0.007)


def test_a_run_stopped_by_its_cost_budget_resumes_with_a_bigger_one() -> None:
    store = MemoryStore()
    stopped = Agent(looping(), [look_up], store=store, max_cost=0.006).run_sync("Where is A1?", run_id="r1")
    assert stopped.status == "limit-reached"
    brain = named(ScriptedModel([said("Delivered.")]), "gpt-4o")
    done = Agent(brain, [look_up], store=store, max_cost=1.0).run_sync(run_id="r1")
    assert (done.status, done.output) == ("finished", "Delivered.")
    assert state_of(asyncio.run(store.load("r1"))).status == "finished"


def test_a_stopped_state_resumes_with_a_bigger_budget_without_a_store() -> None:
    stopped = Agent(looping(), [look_up], max_cost=0.006).run_sync("Where is A1?")
    again = Agent(named(ScriptedModel([said("Delivered.")]), "gpt-4o"), [look_up], max_cost=0.006)
    assert again.run_sync(stopped.state).limit == "cost"  # the spending so far still counts
    done = Agent(named(ScriptedModel([said("Delivered.")]), "gpt-4o"), [look_up], max_cost=1.0).run_sync(stopped.state)
    assert done.status == "finished"


def test_max_cost_refuses_a_brain_whose_model_has_no_price() -> None:
    with pytest.raises(UserError, match=r"needs the price of model 'house-model'.*prices="):
        Agent(named(ScriptedModel(["hi"]), "house-model"), max_cost=1.0)
    Agent(named(ScriptedModel(["hi"]), "house-model"), max_cost=1.0, prices={"house-model": Price(1.0, 1.0)})


def test_a_budget_that_cannot_be_kept_fails_the_run_before_the_next_model_call() -> None:
    # No model name on the brain (a Fallback, a FunctionPolicy): each reply must name its model.
    replies = [said("", call("look_up", order="A1")), said("Delivered.")]
    result = Agent(ScriptedModel(replies), [look_up], max_cost=1.0).run_sync("Where is A1?")
    assert result.status == "failed"
    assert result.error == "max_cost cannot be kept: no price for a brain without a model name (give Agent(prices=...))"
    named_replies = [Message("assistant", "Delivered.", usage=Usage(1_000, 100, 1), model="gpt-4o")]
    assert Agent(ScriptedModel(named_replies), max_cost=1.0).run_sync("Where is A1?").cost == pytest.approx(0.0035)


@pytest.mark.parametrize("bad", [0, -1.0, True, "1"])
def test_max_cost_must_be_a_positive_number(bad: Any) -> None:
    with pytest.raises(UserError, match="max_cost must be a positive number"):
        Agent(named(ScriptedModel(["hi"]), "gpt-4o"), max_cost=bad)


def test_prices_must_be_price_values() -> None:
    with pytest.raises(UserError, match=r"prices must map model names to tether\.cost\.Price"):
        Agent(ScriptedModel(["hi"]), prices={"gpt-4o": (2.5, 10.0)})  # type: ignore[dict-item]


def test_a_brain_that_reports_no_usage_costs_nothing_and_never_trips_the_budget() -> None:
    brain = named(ScriptedModel([Action("look_up", {"order": "A1"}), "Delivered."]), "gpt-4o")
    result = Agent(brain, [look_up], max_cost=0.0001).run_sync("Where is A1?")
    assert (result.status, result.cost) == ("finished", 0.0)


def test_a_reply_is_priced_by_the_model_its_provider_reports() -> None:
    brain = named(
        ScriptedModel([Message("assistant", "hi", usage=Usage(1_000_000, 0, 1), model="deepseek-chat")]), "gpt-4o"
    )
    assert Agent(brain).run_sync("hello").cost == pytest.approx(0.28)


def test_after_a_handoff_replies_are_priced_by_the_new_agents_model() -> None:
    billing = Agent(named(ScriptedModel([said("Refunded.", tokens=(1_000_000, 0))]), "deepseek-chat"), name="billing")
    transfer = said("", call("transfer_to_billing", reason="money"), tokens=(1_000_000, 0))
    triage = Agent(named(ScriptedModel([transfer]), "gpt-4o"), name="triage", handoffs=[billing])
    result = triage.run_sync("I want a refund")
    assert result.output == "Refunded."
    assert result.cost == pytest.approx(2.50 + 0.28)


def test_a_sub_agents_spending_counts_in_its_parents_cost_and_budget() -> None:
    researcher = Agent(
        named(ScriptedModel([said("B7 is delivered", tokens=(1_000_000, 0))]), "gpt-4o"), name="researcher"
    )
    boss = named(
        ScriptedModel([said("", call("researcher", task="where is B7?"), tokens=(0, 0)), said("Delivered.")]), "gpt-4o"
    )
    result = Agent(boss, [researcher.as_tool(description="Research orders.")], max_cost=1.0).run_sync("where is B7?")
    assert result.status == "limit-reached" and result.limit == "cost"  # the child spent $2.50 of the $1
    assert result.cost == pytest.approx(2.50)
