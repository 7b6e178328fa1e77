"""OpenTelemetry spans built from a run's events, checked with the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from support import refund
from tether import Action, Agent, FunctionPolicy, Message, ProviderError, ToolCall, Usage, record_decisions, tool
from tether._loop.run import Settings
from tether.events import Event
from tether.stores.memory import MemoryStore
from tether.stores.sqlite import SQLiteStore
from tether.telemetry import Tracing, export, run_context
from tether.testing import CrashingStore, ScriptedModel, SimulatedCrash

from .conftest import Traces


def named(policy: Any, model: str = "gpt-4o") -> Any:
    policy.model = model  # what a provider's policy carries: the model's name
    return policy


def reply(*calls: ToolCall, text: str = "", usage: Usage | None = None) -> Message:
    return Message("assistant", text, calls, usage=usage or Usage(100, 20, 1))


@tool(effect="none")
def look_up(order: str) -> str:
    """Look an order up."""
    return f"{order}: delivered"


@tool(effect="none")
def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"{city}: sunny"


@tool(effect="none")
def broken() -> str:
    """A tool that always fails."""
    raise ValueError("the database is down")


def two_tools_agent(traces: Traces, **kw: Any) -> Agent:
    calls = (ToolCall.of("look_up", {"order": "A1"}, id="c1"), ToolCall.of("weather", {"city": "Oslo"}, id="c2"))
    model = named(
        ScriptedModel([reply(*calls), reply(text="A1 is delivered; sunny in Oslo.", usage=Usage(150, 10, 1))])
    )
    return Agent(model, [look_up, weather], name="support", observers=[Tracing(traces.tracer, **kw)])


def test_a_run_with_two_tools_is_an_agent_span_over_two_chats_and_two_tool_calls(traces: Traces) -> None:
    result = two_tools_agent(traces).run_sync("Where is A1, and the weather in Oslo?", run_id="run-1")
    assert result.status == "finished"
    root = traces.one("invoke_agent support")
    chats = traces.named("chat gpt-4o")
    tools = [traces.one("execute_tool look_up"), traces.one("execute_tool weather")]
    assert len(traces.spans) == 5 and len(chats) == 2
    assert root.parent is not None and root.parent.span_id == run_context("run-1").span_id
    assert root.context.trace_id == run_context("run-1").trace_id
    for child in [*chats, *tools]:
        assert child.parent is not None and child.parent.span_id == root.context.span_id
        assert child.context.trace_id == root.context.trace_id
    assert root.kind == SpanKind.INTERNAL and chats[0].kind == SpanKind.CLIENT and tools[0].kind == SpanKind.INTERNAL
    assert dict(root.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "support",
        "gen_ai.request.model": "gpt-4o",
        "tether.run.id": "run-1",
        "tether.run.resumed": False,
        "tether.run.status": "finished",
        "gen_ai.usage.input_tokens": 250,
        "gen_ai.usage.output_tokens": 30,
        "tether.cost.usd": pytest.approx((250 * 2.50 + 30 * 10.00) / 1e6),
    }
    assert dict(chats[0].attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 20,
    }
    assert dict(tools[0].attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "look_up",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Look an order up.",
    }
    assert all(s.status.status_code == StatusCode.UNSET for s in traces.spans)


def test_span_times_are_the_commit_times_of_the_events(traces: Traces) -> None:
    result = two_tools_agent(traces).run_sync("go")
    kinds = [ev.kind for ev in result.events]
    ns = [int(ev.at * 1e9) for ev in result.events]
    first, second = sorted(traces.named("chat gpt-4o"), key=lambda s: s.start_time or 0)
    root, tool_span = traces.one("invoke_agent support"), traces.one("execute_tool look_up")
    assert kinds[:2] == ["run-started", "model-replied"]
    assert (root.start_time, root.end_time) == (ns[0], ns[-1])
    assert (first.start_time, first.end_time) == (ns[0], ns[1])
    last_tool = max(i for i, k in enumerate(kinds) if k == "tool-finished")
    assert (second.start_time, second.end_time) == (ns[last_tool], ns[last_tool + 1])
    started = next(i for i, ev in enumerate(result.events) if ev.kind == "tool-started")
    assert tool_span.start_time == ns[started]


def test_a_tool_that_raises_sets_error_status_on_its_span_only(traces: Traces) -> None:
    model = named(ScriptedModel([Action("broken"), "It is broken."]))
    result = Agent(model, [broken], observers=[Tracing(traces.tracer)]).run_sync("try it")
    assert result.status == "finished"
    span = traces.one("execute_tool broken")
    assert span.status.status_code == StatusCode.ERROR
    assert span.status.description == "raised"  # the error text may quote content: not captured by default
    assert span.attributes is not None and span.attributes["error.type"] == "raised"
    assert traces.one("invoke_agent agent").status.status_code == StatusCode.UNSET


def test_a_failed_model_call_fails_its_chat_span_and_the_run_span(traces: Traces) -> None:
    def brain(context: Any, tools: Any) -> str:
        raise ProviderError("503 from the endpoint")

    result = Agent(named(FunctionPolicy(brain)), observers=[Tracing(traces.tracer)]).run_sync("hi")
    assert result.status == "failed"
    chat, root = traces.one("chat gpt-4o"), traces.one("invoke_agent agent")
    for span in (chat, root):
        assert span.status.status_code == StatusCode.ERROR
        assert span.attributes is not None and span.attributes["error.type"] == "ProviderError"
    assert root.attributes is not None and root.attributes["tether.run.status"] == "failed"


def test_content_is_not_captured_unless_asked(traces: Traces) -> None:
    two_tools_agent(traces).run_sync("Where is A1?")
    content_keys = {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments"}
    content_keys |= {"gen_ai.tool.call.result"}
    assert not any(content_keys & set(s.attributes or {}) for s in traces.spans)


def test_capture_content_records_prompts_replies_arguments_and_results(traces: Traces) -> None:
    two_tools_agent(traces, capture_content=True).run_sync("Where is A1?")
    root, tool_span = traces.one("invoke_agent support"), traces.one("execute_tool look_up")
    first_chat = min(traces.named("chat gpt-4o"), key=lambda s: s.start_time or 0)
    assert root.attributes is not None and tool_span.attributes is not None and first_chat.attributes is not None
    assert root.attributes["gen_ai.input.messages"] == (
        '[{"role":"user","parts":[{"type":"text","content":"Where is A1?"}]}]'
    )
    assert root.attributes["gen_ai.output.messages"] == (
        '[{"role":"assistant","parts":[{"type":"text","content":"A1 is delivered; sunny in Oslo."}]}]'
    )
    assert tool_span.attributes["gen_ai.tool.call.arguments"] == '{"order": "A1"}'
    assert tool_span.attributes["gen_ai.tool.call.result"] == "A1: delivered"
    assert '"type":"tool_call","id":"c1","name":"look_up","arguments":{"order":"A1"}' in str(
        first_chat.attributes["gen_ai.output.messages"]
    )


def test_a_pause_ends_the_run_span_and_a_denial_is_a_tool_span_of_no_length(traces: Traces) -> None:
    agent = Agent(named(ScriptedModel([Action("refund", {"order": "A1"}), "Not refunded."])), [refund],
                  observers=[Tracing(traces.tracer)])  # fmt: skip
    paused = agent.run_sync("Refund A1", run_id="r-pause")
    root = traces.one("invoke_agent agent")
    assert root.attributes is not None
    assert (root.attributes["tether.run.status"], root.attributes["tether.pause.reason"]) == ("paused", "approval")
    assert [e.name for e in root.events] == ["tether.approval-requested"]
    assert traces.named("execute_tool refund") == []
    done = agent.run_sync(paused.state.deny(paused.items[0].call.id, "not this one"))
    assert done.status == "finished"
    denied = traces.one("execute_tool refund")
    assert denied.start_time == denied.end_time
    assert denied.attributes is not None and denied.attributes["error.type"] == "denied"


def test_a_resumed_run_is_a_new_trace_linked_to_the_run(traces: Traces) -> None:
    agent = Agent(named(ScriptedModel([Action("refund", {"order": "A1"}), "Refunded."])), [refund],
                  observers=[Tracing(traces.tracer)])  # fmt: skip
    paused = agent.run_sync("Refund A1", run_id="r-link")
    agent.run_sync(paused.state.approve(paused.items[0].call.id))
    first, second = sorted(traces.named("invoke_agent agent"), key=lambda s: s.start_time or 0)
    run = run_context("r-link")
    assert first.context.trace_id == run.trace_id
    assert second.context.trace_id != run.trace_id and second.parent is None
    assert [(link.context.trace_id, link.context.span_id) for link in second.links] == [(run.trace_id, run.span_id)]
    assert second.attributes is not None and second.attributes["tether.run.resumed"] is True
    assert traces.one("execute_tool refund").context.trace_id == second.context.trace_id


def test_a_run_started_inside_a_span_links_to_it_and_keeps_its_own_trace(traces: Traces) -> None:
    agent = Agent(named(ScriptedModel(["hello"])), observers=[Tracing(traces.tracer)])
    with traces.tracer.start_as_current_span("request") as request:
        agent.run_sync("hi", run_id="r-nested")
    root = traces.one("invoke_agent agent")
    assert root.context.trace_id == run_context("r-nested").trace_id
    assert [link.context.span_id for link in root.links] == [request.get_span_context().span_id]


def test_export_after_the_fact_makes_the_spans_a_live_run_makes(traces: Traces) -> None:
    store = MemoryStore()
    agent = Agent(named(ScriptedModel([Action("refund", {"order": "A1"}), "Refunded."])), [refund, broken],
                  store=store, observers=[Tracing(traces.tracer)])  # fmt: skip
    paused = agent.run_sync("Refund A1", run_id="r-export")
    agent.run_sync(paused.state.approve(paused.items[0].call.id))
    live = shape(traces)
    traces.exporter.clear()
    export(asyncio.run(store.load("r-export")), traces.tracer, tools=[refund, broken])
    assert shape(traces) == live
    assert traces.named("invoke_agent agent")[0].context.trace_id == run_context("r-export").trace_id


def shape(traces: Traces) -> list[tuple[str, str, tuple[Any, ...], Any, Any]]:
    """Each span as (name, parent's name, attributes, start, end), sorted."""
    by_id = {s.context.span_id: s.name for s in traces.spans}
    return sorted(
        (s.name, by_id.get(s.parent.span_id, "-") if s.parent else "-", tuple(sorted((s.attributes or {}).items())),
         s.start_time, s.end_time)
        for s in traces.spans
    )  # fmt: skip


def test_a_run_that_dies_mid_call_ends_its_spans_as_interrupted(traces: Traces) -> None:
    store = MemoryStore()
    agent = Agent(named(ScriptedModel([Action("look_up", {"order": "A1"})])), [look_up],
                  store=CrashingStore(store, "tool-started"), observers=[Tracing(traces.tracer)])  # fmt: skip
    with pytest.raises(SimulatedCrash):
        agent.run_sync("Where is A1?", run_id="r-crash")
    live = traces.one("invoke_agent agent")  # the crash came right after the commit: the tool never ran
    assert live.attributes is not None and live.attributes["error.type"] == "interrupted"
    assert traces.named("execute_tool look_up") == []
    traces.exporter.clear()
    export(asyncio.run(store.load("r-crash")), traces.tracer)  # the store has the tool-started event
    for name in ("invoke_agent agent", "execute_tool look_up"):
        span = traces.one(name)
        assert span.status.status_code == StatusCode.ERROR
        assert span.attributes is not None and span.attributes["error.type"] == "interrupted"


class Recorder:
    """An observer that keeps what its watchers saw (the hook's contract, without OpenTelemetry)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def watch(self, agent: Settings) -> Recorder:
        return self

    def event(self, ev: Event) -> None:
        self.seen.append(ev.kind)

    def close(self) -> None:
        self.seen.append("closed")


def test_watchers_see_each_committed_event_once_then_close() -> None:
    recorder = Recorder()
    model = ScriptedModel([Action("look_up", {"order": "A1"}), "delivered, it is"], stream=True)
    result = Agent(model, [look_up], observers=[recorder]).run_sync("Where is A1?")
    assert recorder.seen == [*(ev.kind for ev in result.events if ev.kind != "token"), "closed"]
    assert "token" in {ev.kind for ev in result.events}  # streamed, but never committed: not watched


def test_import_tether_does_not_import_opentelemetry() -> None:
    code = "import sys, tether, tether.cost; print(any(m.startswith('opentelemetry') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_tracing_without_the_extra_says_which_extra_to_install() -> None:
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "from tether.telemetry import Tracing\n"
        "try:\n    Tracing()\nexcept Exception as exc:\n    print(type(exc).__name__, exc)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("UserError tether.telemetry needs OpenTelemetry: pip install 'tether[otel]'")


WORKER = Path(__file__).with_name("worker.py")


def in_a_process(step: str, db: Path, run_id: str, out: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(WORKER), step, str(db), run_id, str(out)],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def test_a_run_paused_in_one_process_and_resumed_in_another_has_two_linked_traces(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    first = in_a_process("start", db, "r-two-processes", tmp_path / "first.json")
    assert first["status"] == "paused"

    async def approve() -> None:
        store = SQLiteStore(db)
        await record_decisions(store, "r-two-processes", lambda s: s.approve(s.open_calls[0].call.id, by="ana"))
        await store.aclose()

    asyncio.run(approve())
    second = in_a_process("resume", db, "r-two-processes", tmp_path / "second.json")
    assert second["status"] == "finished"
    run = run_context("r-two-processes")
    trace_id, span_id = format(run.trace_id, "032x"), format(run.span_id, "016x")
    (root1,) = [s for s in first["spans"] if s["name"] == "invoke_agent agent"]
    (root2,) = [s for s in second["spans"] if s["name"] == "invoke_agent agent"]
    assert (root1["trace_id"], root1["parent"], root1["links"]) == (trace_id, span_id, [])
    assert root2["trace_id"] != trace_id and root2["parent"] is None
    assert root2["links"] == [[trace_id, span_id]]  # the second trace points at the first
    assert sorted(s["name"] for s in second["spans"]) == ["chat gpt-4o", "execute_tool refund", "invoke_agent agent"]
    assert {s["trace_id"] for s in second["spans"]} == {root2["trace_id"]}
    assert next(e for e in second["spans"] if e["name"] == "execute_tool refund")["parent"] == root2["span_id"]
    assert root2["attributes"]["tether.run.resumed"] is True


def test_after_a_handoff_model_calls_are_named_by_the_new_agents_model(traces: Traces) -> None:
    billing = Agent(named(ScriptedModel(["Refunded."]), "deepseek-chat"), name="billing")
    triage = Agent(named(ScriptedModel([Action("transfer_to_billing", {"reason": "money"})])), name="triage",
                   handoffs=[billing], observers=[Tracing(traces.tracer)])  # fmt: skip
    assert triage.run_sync("I want a refund").output == "Refunded."
    root = traces.one("invoke_agent triage")
    assert [(e.name, dict(e.attributes or {})) for e in root.events] == [
        ("tether.handed-off", {"gen_ai.agent.name": "billing"})
    ]
    assert len(traces.named("chat gpt-4o")) == 1 and len(traces.named("chat deepseek-chat")) == 1
    assert traces.one("execute_tool transfer_to_billing").status.status_code == StatusCode.UNSET


def test_a_call_waiting_on_a_paused_sub_agent_is_not_an_error(traces: Traces) -> None:
    clerk = Agent(named(ScriptedModel([Action("refund", {"order": "A1"})])), [refund], name="clerk")
    boss = Agent(named(ScriptedModel([Action("clerk", {"task": "refund A1"})])), [clerk.as_tool(description="Clerk.")],
                 observers=[Tracing(traces.tracer)])  # fmt: skip
    assert boss.run_sync("Refund A1").status == "paused"
    waiting = traces.one("execute_tool clerk")
    assert waiting.status.status_code == StatusCode.UNSET
    assert waiting.attributes is not None and waiting.attributes["tether.tool.waiting"] is True
    assert [e.name for e in traces.one("invoke_agent agent").events] == ["tether.child-stopped"]
