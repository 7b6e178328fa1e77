"""Regression tests for defects a code review reproduced (each failed before its fix)."""

from __future__ import annotations

import asyncio

import pytest

from tether import Action, Agent, Invocation, Message, StateError, StateTampered, ToolCall, UserError, tool
from tether.stores.memory import MemoryStore
from tether.testing import CrashingStore, ScriptedModel, SimulatedCrash


def test_a_call_waiting_for_approval_stays_gated_for_an_agent_without_the_gate() -> None:
    ran: list[int] = []

    @tool(effect="once")
    def wire(amount: int) -> str:
        ran.append(amount)
        return "sent"

    store = MemoryStore()
    gate = lambda t, args, ctx: args["amount"] > 100  # noqa: E731
    first = Agent(ScriptedModel([Action("wire", {"amount": 5000})]), [wire], store=store, approver=gate)
    assert first.run_sync("pay", run_id="r1").status == "paused"
    ungated = Agent(ScriptedModel(["done"]), [wire], store=store)
    assert ungated.run_sync(run_id="r1").status == "paused"
    assert ran == []


def test_a_tools_own_timeout_error_is_a_failure_note_and_siblings_finish() -> None:
    finished: list[str] = []

    @tool(effect="none")
    async def flaky() -> str:
        raise TimeoutError("upstream read timed out")

    @tool(effect="once")
    async def deploy() -> str:
        await asyncio.sleep(0.05)
        finished.append("deploy")
        return "deployed"

    result = Agent(ScriptedModel([[Action("flaky"), Action("deploy")], "ok"]), [flaky, deploy]).run_sync("go")
    notes = {e.result.name: (e.error, e.result.content) for e in result.events if e.kind == "tool-finished"}
    assert notes["flaky"] == ("raised", "tool 'flaky' failed: TimeoutError: upstream read timed out")
    assert notes["deploy"] == (None, "deployed") and finished == ["deploy"]
    assert result.status == "finished"


def test_duplicate_and_empty_call_ids_get_fresh_ids_and_each_call_one_result() -> None:
    ran: list[str] = []

    @tool(effect="none")
    def greet(name: str) -> str:
        ran.append(name)
        return f"hi {name}"

    twice = Message.assistant("", [ToolCall("call_0", "greet", '{"name": "alice"}'),
                                   ToolCall("call_0", "greet", '{"name": "bob"}'),
                                   ToolCall("", "greet", '{"name": "eve"}')])  # fmt: skip
    again = Message.assistant("", [ToolCall("call_0", "greet", '{"name": "zed"}')])
    result = Agent(ScriptedModel([twice, again, "done"]), [greet]).run_sync("go")
    assert result.status == "finished" and ran == ["alice", "bob", "eve", "zed"]
    ids = [c.id for m in result.context for c in m.tool_calls]
    assert len(set(ids)) == 4 and "" not in ids
    assert sorted(ids) == sorted(m.tool_call_id for m in result.context if m.role == "tool")


def test_idempotency_keys_are_unique_across_turns() -> None:
    keys: list[str] = []

    @tool(effect="idempotent")
    def charge(amount: int, call: Invocation) -> str:
        keys.append(call.idempotency_key)
        return "charged"

    same_id = Message.assistant("", [ToolCall("c1", "charge", '{"amount": 10}')])
    Agent(ScriptedModel([same_id, same_id, "done"]), [charge]).run_sync("go")
    assert len(keys) == 2 and len(set(keys)) == 2


def test_a_cancelled_run_can_be_resumed() -> None:
    @tool(effect="none")
    async def slow() -> str:
        await asyncio.sleep(0.2)
        return "done slowly"

    async def main():
        store, cancel = MemoryStore(), asyncio.Event()
        agent = Agent(ScriptedModel([[Action("slow"), Action("slow")], "all done"]), [slow], store=store)
        asyncio.get_running_loop().call_later(0.05, cancel.set)
        first = await agent.run("go", run_id="r", cancel=cancel)
        resumed = await Agent(ScriptedModel(["all done"]), [slow], store=store).run(run_id="r")
        return first, resumed

    first, resumed = asyncio.run(main())
    assert first.status == "cancelled"
    assert resumed.status == "finished" and resumed.output == "all done"


def test_an_expired_or_mistyped_decision_is_refused_without_a_key() -> None:
    @tool(approval=True)
    def pay(amount: int) -> str:
        return "paid"

    agent = Agent(ScriptedModel([Action("pay", {"amount": 5})]), [pay])
    paused = agent.run_sync("pay")
    with pytest.raises(StateError, match="expired"):
        Agent(ScriptedModel(["x"]), [pay]).run_sync(paused.state.approve("call_1_0", ttl=-1))
    data = paused.state.approve("call_1_0").to_dict()
    data["decisions"][0]["expires_at"] = "tomorrow"
    with pytest.raises(StateError, match="expires_at"):
        from tether import RunState

        RunState.from_dict(data)


def test_a_skip_verdict_cannot_approve_a_gated_call() -> None:
    ran: list[int] = []

    @tool(approval=True)
    def pay(amount: int) -> str:
        ran.append(amount)
        return "paid"

    paused = Agent(ScriptedModel([Action("pay", {"amount": 5})]), [pay]).run_sync("pay")
    from dataclasses import replace

    decision = replace(paused.state.approve("call_1_0").decisions[0], verdict="skip")
    with pytest.raises(StateTampered, match="does not fit"):
        Agent(ScriptedModel(["x"]), [pay]).run_sync(replace(paused.state, decisions=(decision,)))
    assert ran == []


def test_resuming_an_interrupted_call_is_not_blocked_by_the_step_budget() -> None:
    ran: list[str] = []

    @tool(effect="none")
    def look(key: str) -> str:
        ran.append(key)
        return key

    store = MemoryStore()
    with pytest.raises(SimulatedCrash):
        crashing = CrashingStore(store, "tool-started")
        Agent(ScriptedModel([Action("look", {"key": "a"})]), [look], store=crashing, max_steps=1).run_sync(
            "go", run_id="r"
        )
    resumed = Agent(ScriptedModel([]), [look], store=store, max_steps=1).run_sync(run_id="r")
    assert ran == ["a"] and resumed.status == "limit-reached" and resumed.items == ()


def test_cancelling_during_a_slow_store_write_keeps_journal_and_store_in_step() -> None:
    class NetStore(MemoryStore):
        async def append(self, run_id, events, *, expected_seq, lease=None):
            n = await super().append(run_id, events, expected_seq=expected_seq, lease=lease)
            await asyncio.sleep(0.05)  # the write landed; the reply is on its way
            return n

    @tool(effect="none")
    async def fast(n: int) -> int:
        await asyncio.sleep(0.01)
        return n

    async def main():
        store, cancel = NetStore(), asyncio.Event()
        agent = Agent(
            ScriptedModel([[Action("fast", {"n": 1}), Action("fast", {"n": 2})], "done"]), [fast], store=store
        )

        async def trigger():
            while not any(e.kind == "tool-finished" for e in await MemoryStore.load(store, "r")):
                await asyncio.sleep(0.001)
            cancel.set()

        task = asyncio.create_task(trigger())
        result = await agent.run("go", run_id="r", cancel=cancel)
        await task
        return result, await store.load("r")

    result, events = asyncio.run(main())
    assert result.status == "cancelled" and events[-1].kind == "cancelled"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_steps": "5"}, "max_steps must be a positive integer"),
        ({"max_steps": 0}, "max_steps must be a positive integer"),
        ({"max_tool_calls": -1}, "max_tool_calls"),
        ({"max_seconds": 0}, "max_seconds"),
        ({"signing_key": "secret"}, "signing_key must be at least 16 random bytes"),
    ],
)
def test_bad_agent_configuration_is_a_clear_user_error(kwargs: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        Agent(ScriptedModel([]), **kwargs)


def test_starting_a_new_run_with_an_existing_run_id_is_a_clear_user_error() -> None:
    store = MemoryStore()
    Agent(ScriptedModel(["one"]), store=store).run_sync("go", run_id="r")
    with pytest.raises(UserError, match="already exists"):
        Agent(ScriptedModel(["two"]), store=store).run_sync("again", run_id="r")


def test_a_policy_raising_timeout_error_fails_the_run_instead_of_a_budget_limit() -> None:
    from tether import FunctionPolicy

    def brain(ctx, tools):
        raise TimeoutError("model server read timed out")

    store = MemoryStore()
    with pytest.raises(TimeoutError):
        Agent(FunctionPolicy(brain), store=store).run_sync("go", run_id="r")
    assert asyncio.run(store.get("r")).status == "failed"


def test_run_sync_inside_a_running_event_loop_says_to_await_run() -> None:
    agent = Agent(ScriptedModel(["hi"]))

    async def main() -> None:
        with pytest.raises(UserError, match=r"await agent.run\(\.\.\.\)"):
            agent.run_sync("hello")

    asyncio.run(main())  # and no "coroutine was never awaited" warning (warnings are errors here)
