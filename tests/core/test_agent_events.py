"""The loop's event sequences, snapshotted, and replay of each one."""

from __future__ import annotations

import asyncio
import contextlib
import time

from inline_snapshot import snapshot

from tether import Action, Agent, Message, ToolCall, replay, tool
from tether.testing import ScriptedModel

from .helpers import compact


@tool(effect="none")
def look_up_order(order_id: str) -> str:
    """Find an order.

    Args:
        order_id: the order number, like A1234.
    """
    return f"{order_id}: Wireless Headphones, $79, delivered, reported defective"


@tool(effect="none")
def check_policy(reason: str) -> str:
    """Check the refund policy for a reason."""
    return "eligible" if reason == "defective" else "not eligible"


@tool(effect="once")
def issue_refund(order_id: str, amount: int) -> str:
    """Refund an order."""
    return f"${amount} refunded for {order_id}"


def run(replies: list, tools: list, **kw) -> tuple:
    model = ScriptedModel(replies)
    result = Agent(model, tools, **kw).run_sync("help me", run_id="r1")
    assert replay(result.events) == result.context
    return result, model


def test_a_plain_answer_is_one_model_reply_then_finished() -> None:
    result, model = run(["Hello!"], [])
    assert result.status == "finished" and result.output == "Hello!"
    assert compact(result.events) == snapshot(
        [
            ("run-started", {"messages": ["user: help me"], "resumed": False}),
            ("model-replied", {"text": "Hello!", "calls": []}),
            ("finished", {"output": "Hello!", "usage": {"input_tokens": 0, "output_tokens": 0, "requests": 0}}),
        ]
    )
    model.assert_consumed()


def test_a_three_tool_run_records_each_call_and_result_in_order() -> None:
    result, model = run(
        [
            Action("look_up_order", {"order_id": "A1234"}, "pull up the order"),
            Action("check_policy", {"reason": "defective"}, "check the policy"),
            Action("issue_refund", {"order_id": "A1234", "amount": 79}, "refund it"),
            "Refunded $79.",
        ],
        [look_up_order, check_policy, issue_refund],
        instructions="You are a support agent.",
    )
    assert result.output == "Refunded $79."
    assert compact(result.events) == snapshot(
        [
            (
                "run-started",
                {"messages": ["system: You are a support agent.", "user: help me"], "resumed": False},
            ),
            ("model-replied", {"text": "pull up the order", "calls": ['call_1_0:look_up_order{"order_id": "A1234"}']}),
            ("tool-started", {"id": "call_1_0", "attempt": 1}),
            (
                "tool-finished",
                {
                    "id": "call_1_0",
                    "content": "A1234: Wireless Headphones, $79, delivered, reported defective",
                    "error": None,
                },
            ),
            ("model-replied", {"text": "check the policy", "calls": ['call_2_0:check_policy{"reason": "defective"}']}),
            ("tool-started", {"id": "call_2_0", "attempt": 1}),
            ("tool-finished", {"id": "call_2_0", "content": "eligible", "error": None}),
            (
                "model-replied",
                {"text": "refund it", "calls": ['call_3_0:issue_refund{"order_id": "A1234", "amount": 79}']},
            ),
            ("tool-started", {"id": "call_3_0", "attempt": 1}),
            ("tool-finished", {"id": "call_3_0", "content": "$79 refunded for A1234", "error": None}),
            ("model-replied", {"text": "Refunded $79.", "calls": []}),
            ("finished", {"output": "Refunded $79.", "usage": {"input_tokens": 0, "output_tokens": 0, "requests": 0}}),
        ]
    )
    assert [m.role for m in result.context] == ["system", "user"] + ["assistant", "tool"] * 3 + ["assistant"]
    model.assert_consumed()


def test_parallel_calls_run_concurrently_and_results_keep_call_order() -> None:
    both_started = asyncio.Event()
    seen: list[str] = []

    @tool(effect="none")
    async def slow(name: str) -> str:
        seen.append(name)
        if len(seen) == 2:
            both_started.set()
        # Deadlocks (and times out) unless both calls run at the same time.
        await asyncio.wait_for(both_started.wait(), timeout=5)
        await asyncio.sleep(0.05 if name == "first" else 0)
        return f"{name} done"

    result, _ = run(
        [[Action("slow", {"name": "first"}), Action("slow", {"name": "second"})], "both done"],
        [slow],
    )
    assert compact(result.events) == snapshot(
        [
            ("run-started", {"messages": ["user: help me"], "resumed": False}),
            (
                "model-replied",
                {"text": "", "calls": ['call_1_0:slow{"name": "first"}', 'call_1_1:slow{"name": "second"}']},
            ),
            ("tool-started", {"id": "call_1_0", "attempt": 1}),
            ("tool-started", {"id": "call_1_1", "attempt": 1}),
            ("tool-finished", {"id": "call_1_1", "content": "second done", "error": None}),
            ("tool-finished", {"id": "call_1_0", "content": "first done", "error": None}),
            ("model-replied", {"text": "both done", "calls": []}),
            ("finished", {"output": "both done", "usage": {"input_tokens": 0, "output_tokens": 0, "requests": 0}}),
        ]
    )
    # Finished out of order, written in call order.
    tool_notes = [m.content for m in result.context if m.role == "tool"]
    assert tool_notes == ["first done", "second done"]


def test_sync_tools_run_in_threads_in_parallel() -> None:
    import threading

    barrier = threading.Barrier(2, timeout=5)

    @tool(effect="none")
    def blocking(n: int) -> int:
        barrier.wait()  # raises BrokenBarrierError unless both run at once
        return n * 10

    result, _ = run([[Action("blocking", {"n": 1}), Action("blocking", {"n": 2})], "ok"], [blocking])
    assert [m.content for m in result.context if m.role == "tool"] == ["10", "20"]


def test_each_model_error_becomes_a_note_and_the_loop_goes_on() -> None:
    @tool(effect="none")
    def boom() -> str:
        raise RuntimeError("disk on fire")

    @tool(effect="none", timeout=0.05)
    async def sleepy() -> str:
        await asyncio.sleep(5)
        return "never"

    bad_json = ToolCall("c_json", "check_policy", '{"reason": ')
    not_object = ToolCall("c_list", "check_policy", "[1, 2]")
    result, model = run(
        [
            Message.assistant(
                "",
                [
                    ToolCall.of("refund_everything", {}, id="c_unknown"),
                    bad_json,
                    not_object,
                    ToolCall.of("look_up_order", {"order_id": 5, "extra": True}, id="c_invalid"),
                    ToolCall.of("boom", {}, id="c_raised"),
                    ToolCall.of("sleepy", {}, id="c_timeout"),
                ],
            ),
            "I could not do it.",
        ],
        [look_up_order, check_policy, boom, sleepy],
    )
    assert result.status == "finished"
    errors = {e.result.tool_call_id: (e.error, e.result.content) for e in result.events if e.kind == "tool-finished"}
    assert errors == snapshot(
        {
            "c_unknown": (
                "unknown-tool",
                "unknown tool 'refund_everything'; available tools: boom, check_policy, look_up_order, sleepy",
            ),
            "c_json": (
                "bad-json",
                'arguments for tool \'check_policy\' are not a JSON object (Expecting value: line 1 column 12 (char 11)); send an object matching this schema: {"additionalProperties": false, "properties": {"reason": {"type": "string"}}, "required": ["reason"], "type": "object"}',
            ),
            "c_list": (
                "bad-json",
                'arguments for tool \'check_policy\' are not a JSON object (expected a JSON object, got list); send an object matching this schema: {"additionalProperties": false, "properties": {"reason": {"type": "string"}}, "required": ["reason"], "type": "object"}',
            ),
            "c_invalid": (
                "invalid-arguments",
                """\
invalid arguments for tool 'look_up_order':
- field 'order_id': Input should be a valid string (got 5)
  expected: {"description": "the order number, like A1234.", "type": "string"}
- field 'extra': Extra inputs are not permitted (got true)
  allowed fields here: 'order_id'
corrected (only the mechanical fixes applied; check it says what you mean): {"order_id": "5"}\
""",
            ),
            "c_raised": ("raised", "tool 'boom' failed: RuntimeError: disk on fire"),
            "c_timeout": ("timeout", "tool 'sleepy' timed out after 0.05 seconds"),
        }
    )
    # The model saw exactly one result per call, each marked as an error.
    second_request = model.requests[1]
    results = [m for m in second_request if m.role == "tool"]
    assert [m.tool_call_id for m in results] == ["c_unknown", "c_json", "c_list", "c_invalid", "c_raised", "c_timeout"]
    assert all(m.is_error for m in results)


def test_step_budget_ends_the_run_with_limit_reached() -> None:
    result, _ = run([Action("check_policy", {"reason": "x"})] * 3, [check_policy], max_steps=2)
    assert result.status == "limit-reached" and result.limit == "steps"
    assert compact(result.events) == snapshot(
        [
            ("run-started", {"messages": ["user: help me"], "resumed": False}),
            ("model-replied", {"text": "", "calls": ['call_1_0:check_policy{"reason": "x"}']}),
            ("tool-started", {"id": "call_1_0", "attempt": 1}),
            ("tool-finished", {"id": "call_1_0", "content": "not eligible", "error": None}),
            ("model-replied", {"text": "", "calls": ['call_2_0:check_policy{"reason": "x"}']}),
            ("tool-started", {"id": "call_2_0", "attempt": 1}),
            ("tool-finished", {"id": "call_2_0", "content": "not eligible", "error": None}),
            ("limit-reached", {"limit": "steps", "value": 2}),
        ]
    )
    assert result.state.steps == 2


def test_tool_call_budget_stops_before_the_call_and_keeps_it_pending() -> None:
    result, _ = run(
        [Action("check_policy", {"reason": "x"}), [Action("check_policy", {"reason": "y"})] * 2],
        [check_policy],
        max_tool_calls=2,
    )
    assert result.status == "limit-reached" and result.limit == "tool_calls"
    assert compact(result.events) == snapshot(
        [
            ("run-started", {"messages": ["user: help me"], "resumed": False}),
            ("model-replied", {"text": "", "calls": ['call_1_0:check_policy{"reason": "x"}']}),
            ("tool-started", {"id": "call_1_0", "attempt": 1}),
            ("tool-finished", {"id": "call_1_0", "content": "not eligible", "error": None}),
            (
                "model-replied",
                {"text": "", "calls": ['call_2_0:check_policy{"reason": "y"}', 'call_2_1:check_policy{"reason": "y"}']},
            ),
            ("limit-reached", {"limit": "tool_calls", "value": 2}),
        ]
    )
    assert result.state.tool_calls == 1
    assert [p.call.id for p in result.items] == ["call_2_0", "call_2_1"]


def test_token_budget_ends_the_run() -> None:
    from tether import Usage

    reply = Message("assistant", "", (ToolCall.of("check_policy", {"reason": "x"}, id="c1"),), usage=Usage(900, 200, 1))
    result, _ = run([reply, "never"], [check_policy], max_tokens=1000)
    assert (result.status, result.limit, result.usage.total_tokens) == ("limit-reached", "tokens", 1100)
    assert compact(result.events) == snapshot(
        [
            ("run-started", {"messages": ["user: help me"], "resumed": False}),
            ("model-replied", {"text": "", "calls": ['c1:check_policy{"reason": "x"}']}),
            ("limit-reached", {"limit": "tokens", "value": 1000}),
        ]
    )


def test_wall_time_budget_interrupts_a_slow_tool() -> None:
    @tool(effect="none")
    async def forever() -> str:
        await asyncio.sleep(30)
        return "never"

    start = time.monotonic()
    result, _ = run([Action("forever"), "never"], [forever], max_seconds=0.2)
    assert result.status == "limit-reached" and result.limit == "seconds"
    assert time.monotonic() - start < 10
    assert compact(result.events) == snapshot(
        [
            ("run-started", {"messages": ["user: help me"], "resumed": False}),
            ("model-replied", {"text": "", "calls": ["call_1_0:forever{}"]}),
            ("tool-started", {"id": "call_1_0", "attempt": 1}),
            (
                "tool-finished",
                {
                    "id": "call_1_0",
                    "content": "tool 'forever' was stopped: the run's time budget ran out",
                    "error": "timeout",
                },
            ),
            ("limit-reached", {"limit": "seconds", "value": 0.2}),
        ]
    )


def test_wall_time_budget_bounds_a_slow_model_too() -> None:
    from tether import FunctionPolicy

    async def slow_brain(ctx, tools):
        await asyncio.sleep(30)
        return "never"

    result = Agent(FunctionPolicy(slow_brain), max_seconds=0.2).run_sync("go")
    assert (result.status, result.limit) == ("limit-reached", "seconds")
    assert [e.kind for e in result.events] == ["run-started", "limit-reached"]


def test_a_cancel_event_cancels_running_tools_and_ends_with_cancelled() -> None:
    cancelled_inside: list[bool] = []

    @tool(effect="none")
    async def slow() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled_inside.append(True)
            raise
        return "never"

    async def main():
        cancel = asyncio.Event()
        agent = Agent(ScriptedModel([[Action("slow"), Action("slow")], "never"]), [slow])
        events = []
        async for ev in agent.stream("go", run_id="r1", cancel=cancel):
            events.append(ev)
            if ev.kind == "tool-started":
                cancel.set()
        return events

    events = asyncio.run(main())
    assert compact(events) == snapshot(
        [
            ("run-started", {"messages": ["user: go"], "resumed": False}),
            ("model-replied", {"text": "", "calls": ["call_1_0:slow{}", "call_1_1:slow{}"]}),
            ("tool-started", {"id": "call_1_0", "attempt": 1}),
            ("tool-started", {"id": "call_1_1", "attempt": 1}),
            ("cancelled", {"reason": "cancel requested", "final": False}),
        ]
    )
    assert cancelled_inside == [True, True]


def test_a_cancel_event_that_is_never_set_changes_nothing() -> None:
    async def main():
        agent = Agent(ScriptedModel([[Action("check_policy", {"reason": "x"})] * 2, "done"]), [check_policy])
        return await asyncio.wait_for(agent.run("go", cancel=asyncio.Event()), timeout=10)

    result = asyncio.run(main())
    assert result.status == "finished" and result.output == "done"


def test_cancelling_the_consuming_task_commits_cancelled_and_stops_tools() -> None:
    from tether.stores.memory import MemoryStore

    store = MemoryStore()
    stopped: list[bool] = []

    @tool(effect="none")
    async def slow() -> str:
        try:
            await asyncio.sleep(30)
        finally:
            stopped.append(True)
        return "never"

    async def main():
        agent = Agent(ScriptedModel([Action("slow"), "never"]), [slow], store=store)
        task = asyncio.create_task(agent.run("go", run_id="r1"))
        await asyncio.sleep(0.1)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return await store.load("r1"), await store.get("r1")

    events, info = asyncio.run(main())
    assert [e.kind for e in events][-1] == "cancelled"
    assert info.status == "cancelled"
    assert stopped == [True]


def test_a_terminal_tool_ends_the_run_with_its_result() -> None:
    @tool(terminal=True, effect="none")
    def final_answer(text: str) -> str:
        return text

    result, model = run([Action("final_answer", {"text": "all set"})], [final_answer])
    assert result.status == "finished" and result.output == "all set"
    assert compact(result.events)[-1] == (
        "finished",
        {"output": "all set", "usage": {"input_tokens": 0, "output_tokens": 0, "requests": 0}},
    )
    model.assert_consumed()


def test_agent_as_tool_delegates_to_a_sub_agent() -> None:
    researcher = Agent(
        ScriptedModel([Action("look_up_order", {"order_id": "B7"}), "B7 is delivered"]),
        [look_up_order],
        name="researcher",
    )
    boss_model = ScriptedModel([Action("researcher", {"task": "where is B7?"}), "Your order B7 is delivered."])
    result = Agent(boss_model, [researcher.as_tool(description="Research orders.")]).run_sync(
        "where is B7?", run_id="r1"
    )
    assert compact(result.events) == snapshot(
        [
            ("run-started", {"messages": ["user: where is B7?"], "resumed": False}),
            ("model-replied", {"text": "", "calls": ['call_1_0:researcher{"task": "where is B7?"}']}),
            ("tool-started", {"id": "call_1_0", "attempt": 1}),
            ("child", "researcher", ("run-started", {"messages": ["user: where is B7?"], "resumed": False})),
            (
                "child",
                "researcher",
                ("model-replied", {"text": "", "calls": ['call_1_0:look_up_order{"order_id": "B7"}']}),
            ),
            ("child", "researcher", ("tool-started", {"id": "call_1_0", "attempt": 1})),
            (
                "child",
                "researcher",
                (
                    "tool-finished",
                    {
                        "id": "call_1_0",
                        "content": "B7: Wireless Headphones, $79, delivered, reported defective",
                        "error": None,
                    },
                ),
            ),
            ("child", "researcher", ("model-replied", {"text": "B7 is delivered", "calls": []})),
            (
                "child",
                "researcher",
                (
                    "finished",
                    {"output": "B7 is delivered", "usage": {"input_tokens": 0, "output_tokens": 0, "requests": 0}},
                ),
            ),
            ("tool-finished", {"id": "call_1_0", "content": "B7 is delivered", "error": None}),
            ("model-replied", {"text": "Your order B7 is delivered.", "calls": []}),
            (
                "finished",
                {
                    "output": "Your order B7 is delivered.",
                    "usage": {"input_tokens": 0, "output_tokens": 0, "requests": 0},
                },
            ),
        ]
    )
