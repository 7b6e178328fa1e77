"""Events for the store tests: one of every persisted kind, and a real run's journal."""

from __future__ import annotations

from tether import (
    Action,
    Agent,
    ApprovalDecided,
    ApprovalRequested,
    Cancelled,
    ChildStopped,
    Compacted,
    Decision,
    Failed,
    Finished,
    HandedOff,
    LimitReached,
    Message,
    ModelReplied,
    Noted,
    Paused,
    PendingCall,
    QuestionAsked,
    RunStarted,
    RunState,
    ToolCall,
    ToolFinished,
    ToolStarted,
    Usage,
    tool,
)
from tether.events import PERSISTED, Event
from tether.stores.memory import MemoryStore
from tether.testing import ScriptedModel

CALL = ToolCall.of("refund", {"order": "A1", "amount": 12.5}, id="call_1_0")


def every_kind() -> list[Event]:
    """Hand-built events, one (at least) of each persisted kind, with non-trivial fields."""
    reply = Message("assistant", "let me check", (CALL,), usage=Usage(120, 8, 1))
    result = Message.tool_result(CALL.id, "refunded 12.5 €", name="refund")
    events: list[Event] = [
        RunStarted("run-1", (Message.system("be brief"), Message.user("refund A1")), False, "fp01"),
        ModelReplied(reply),
        ApprovalRequested(CALL, "ab" * 16),
        QuestionAsked(ToolCall("c9", "ask_human", '{"question": "Which size?"}'), "cd" * 16, "Which size?"),
        Paused("approval", (CALL.id,), RunState("run-1", (reply,), (PendingCall(CALL, "awaiting-approval"),), seq=4)),
        ApprovalDecided(Decision("run-1", CALL.id, "approve", "ab" * 16, 4, args={"amount": 10}, by="ana")),
        ApprovalDecided(Decision("run-1", "c9", "answer", "cd" * 16, 4, answer="large ✓", by="ana")),
        ToolStarted(CALL, attempt=2),
        HandedOff("billing", (Message.system("You handle money."),)),
        ChildStopped(CALL.id, RunState("run-1/call_1_0", (Message.user("refund"),), parent_call=CALL.id, agent="b")),
        ToolFinished(result),
        ToolFinished(Message.tool_result("c2", "boom", name="x", is_error=True), "raised"),
        Compacted((Message.user("summary so far"), Message.assistant("ok"))),
        Noted(Message("user", "call final_result ✓", name="final_result", is_error=True)),
        LimitReached("tool_calls", 3),
        Failed("ProviderError: 503", "ProviderError"),
        Cancelled("cancel requested"),
        Finished("all done ✓", Usage(1, 2, 3)),
    ]
    assert {ev.kind for ev in events} == PERSISTED
    return events


async def real_journal() -> list[Event]:
    """The committed events of a real run: parallel calls, a pause, a resume, an answer."""

    @tool(effect="none")
    def look_up(order: str) -> str:
        """Find an order."""
        return f"order {order}: 2 items, paid"

    # Not support.refund: the amounts (one refund approved, one denied) are part of the events compared.
    @tool(approval=True)
    def refund(order: str, amount: float) -> str:
        """Refund an order."""
        return f"refunded {amount} on {order}"

    model = ScriptedModel(
        [
            Action("look_up", {"order": "A1"}, reasoning="check the order first"),
            [Action("refund", {"order": "A1", "amount": 20}), Action("refund", {"order": "B2", "amount": 5})],
            "Refunded 15 on A1; B2 was denied.",
        ],
        stream=True,
    )
    memory = MemoryStore()
    agent = Agent(model, [look_up, refund], instructions="You are a support agent.", store=memory)
    first = await agent.run("Refund my orders")
    assert first.status == "paused"
    a, b = (p.call.id for p in first.items)
    state = first.state.approve(a, {"order": "A1", "amount": 15}, by="ana").deny(b, "not eligible")
    second = await agent.run(state)
    assert second.status == "finished"
    model.assert_consumed()
    return await memory.load(first.run_id)
