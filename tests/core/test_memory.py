"""Compaction keeps calls with their results and is replayable."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tether import Action, Agent, Context, Message, ToolCall, replay, tool
from tether.memory import compact, compactor
from tether.testing import ScriptedModel


def _turns(n: int, calls_per_turn: int) -> Context:
    msgs = [Message.system("be brief"), Message.user("go")]
    for t in range(n):
        calls = [ToolCall(f"c{t}_{i}", "f") for i in range(calls_per_turn)]
        msgs.append(Message.assistant(f"turn {t}", calls))
        msgs += [Message.tool_result(c.id, f"r{t}", name="f") for c in calls]
    return Context(msgs)


@given(st.integers(0, 12), st.integers(1, 4), st.integers(1, 30))
def test_compaction_never_splits_a_call_from_its_result(turns: int, per_turn: int, keep: int) -> None:
    ctx = _turns(turns, per_turn)
    out = compact(ctx, keep_last=keep)
    assert out[0] == Message.system("be brief")
    asked = {c.id for m in out for c in m.tool_calls}
    answered = {m.tool_call_id for m in out if m.role == "tool"}
    assert asked == answered
    assert len(out) <= len(ctx)
    if len(out) < len(ctx):
        assert out[1].content.startswith("Summary of earlier notes:")


def test_the_agent_compacts_before_asking_and_replay_rebuilds_it() -> None:
    @tool(effect="none")
    def f() -> str:
        return "ok"

    model = ScriptedModel([Action("f")] * 6 + ["done"])
    result = Agent(model, [f], compactor=compactor(max_messages=6, keep_last=3)).run_sync("go")
    assert result.status == "finished"
    assert any(e.kind == "compacted" for e in result.events)
    assert replay(result.events) == result.context
    assert max(len(ctx) for ctx in model.requests) <= 7
    last = model.requests[-1]
    assert {c.id for m in last for c in m.tool_calls} == {m.tool_call_id for m in last if m.role == "tool"}
