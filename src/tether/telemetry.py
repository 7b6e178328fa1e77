"""OpenTelemetry spans for runs, model calls and tool calls, built from a run's events.

There is no second instrumentation path: the spans are made from the events a
run commits, which all carry their commit time (``at``), so the same
:class:`Spans` builder works live and after the fact.

* Live: ``Agent(observers=[Tracing(tracer)])``. Each run of the agent gets a
  :class:`Spans` that sees every event right after it is committed.
* After the fact: :func:`export` (``export(await store.load(run_id), tracer)``).

The spans follow the OpenTelemetry GenAI semantic conventions: a run is an
``invoke_agent`` span, each model call a ``chat`` span (from the commit before
the reply to the reply; usage, request and response model), each tool call an
``execute_tool`` span (from ``tool-started`` to ``tool-finished``; a note the
model reads instead of a run, such as a denial or invalid arguments, is a
span of no length). A tool error, a failed model call and a failed run set the
span's status to error with ``error.type``. Prompts, tool arguments and
results are recorded only with ``capture_content=True``.

**Traces across pauses.** Each segment of a run (its start, then each resume,
in whatever process) is its own trace, so a run paused for days does not make
one trace days long. The first segment's trace id is derived from the run id
(:func:`run_context`: its ``invoke_agent`` span is the child of a span context
made from the run id, which nothing exports), so a run's first trace can be
found from its id; every later segment starts a new trace whose root span links
to that context. Nothing about tracing is stored in the run.

Needs the extra: ``pip install 'tether[otel]'`` (``import tether`` never imports
OpenTelemetry; this module imports it only when used).

>>> from opentelemetry.sdk.trace import TracerProvider
>>> from opentelemetry.sdk.trace.export import SimpleSpanProcessor
>>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
>>> from tether import Agent
>>> from tether.testing import ScriptedModel
>>> spans, provider = InMemorySpanExporter(), TracerProvider()
>>> provider.add_span_processor(SimpleSpanProcessor(spans))
>>> agent = Agent(ScriptedModel(["hello"]), observers=[Tracing(provider.get_tracer("demo"))])
>>> agent.run_sync("hi").output
'hello'
>>> [s.name for s in spans.get_finished_spans()]
['chat', 'invoke_agent agent']
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .agent import Settings
from .cost import Price, total_cost
from .events import (
    TERMINAL,
    ApprovalDecided,
    ApprovalRequested,
    ChildStopped,
    Compacted,
    Event,
    Failed,
    HandedOff,
    LimitReached,
    ModelReplied,
    Paused,
    QuestionAsked,
    RunStarted,
    ToolFinished,
    ToolStarted,
)
from .exceptions import import_extra, install_hint
from .journal import next_status
from .messages import Message, Usage
from .tools import Tool

if TYPE_CHECKING:
    from opentelemetry.context import Context as OtelContext
    from opentelemetry.trace import Span, SpanContext, Tracer

__all__ = ["Spans", "Tracing", "export", "run_context"]

INSTALL = install_hint("otel")


def _api() -> ModuleType:
    """``opentelemetry.trace``, or a UserError naming the extra to install."""
    return import_extra("opentelemetry.trace", extra="otel", needs="tether.telemetry needs OpenTelemetry")


def _tracer(tracer: Tracer | None) -> Tracer:
    return tracer if tracer is not None else _api().get_tracer("tether")


def run_context(run_id: str) -> SpanContext:
    """The span context a run's id stands for: the parent of its first segment's span, and
    what every later segment links to. Its trace id is the run's first trace.

    >>> run_context("r1").trace_id == run_context("r1").trace_id != run_context("r2").trace_id
    True
    """
    trace = _api()
    digest = hashlib.sha256(b"tether-run:" + run_id.encode()).digest()
    trace_id = int.from_bytes(digest[:16], "big") or 1
    span_id = int.from_bytes(digest[16:24], "big") or 1
    flags = trace.TraceFlags(trace.TraceFlags.SAMPLED)
    context: SpanContext = trace.SpanContext(trace_id, span_id, is_remote=True, trace_flags=flags)
    return context


class Tracing:
    """An observer that traces every run of an agent: ``Agent(observers=[Tracing(tracer)])``.

    ``tracer`` defaults to the global tracer provider's tracer named ``tether``;
    ``capture_content=True`` records prompts, replies, tool arguments and
    results on the spans (off by default: they may hold personal data).
    """

    def __init__(self, tracer: Tracer | None = None, *, capture_content: bool = False) -> None:
        self.tracer = _tracer(tracer)
        self.capture_content = capture_content

    def watch(self, agent: Settings) -> Spans:
        """The span builder for one run of ``agent``."""
        return Spans(self.tracer, capture_content=self.capture_content, tools=agent.tools, prices=agent.prices)


def export(
    events: Iterable[Event],
    tracer: Tracer | None = None,
    *,
    capture_content: bool = False,
    tools: Iterable[Tool] = (),
    prices: Mapping[str, Price] | None = None,
) -> None:
    """Make the spans of a run's committed events (e.g. ``await store.load(run_id)``), after the fact.

    Each segment of the run (each ``run-started``) becomes a trace, linked as
    a live run's would be. ``tools`` (the agent's) describe the tool spans,
    ``prices`` override :data:`tether.cost.PRICES`. Export a run once: its
    first trace id comes from the run id, so exporting it again (or a run
    traced live) adds the spans again to the same trace.

    >>> from opentelemetry.sdk.trace import TracerProvider
    >>> from tether import Agent
    >>> from tether.testing import ScriptedModel
    >>> export(Agent(ScriptedModel(["hello"])).run_sync("hi").events, TracerProvider().get_tracer("demo"))
    """
    by_name = {t.name: t for t in tools}
    spans = Spans(_tracer(tracer), capture_content=capture_content, tools=by_name, prices=prices, link_current=False)
    for ev in events:
        spans.event(ev)
    spans.close()


class Spans:
    """Builds the spans of one run from its committed events, one event at a time.

    A :class:`tether.Watcher`: :meth:`event` for each committed event, then
    :meth:`close`, which ends any span still open (as ``interrupted``: the run
    stopped without a closing event, e.g. its process died or its store failed).
    """

    def __init__(
        self,
        tracer: Tracer,
        *,
        capture_content: bool = False,
        tools: Mapping[str, Tool] | None = None,
        prices: Mapping[str, Price] | None = None,
        link_current: bool = True,
    ) -> None:
        self.trace = _api()
        self.tracer = tracer
        self.capture = capture_content
        self.tools = tools or {}
        self.prices = prices
        self.link_current = link_current  # link a live run to the span that was current when it started
        self.root: Span | None = None
        self.context: OtelContext | None = None  # the root span's context, for its children
        self.model = ""
        self.last_at = 0.0  # commit time of the previous event: when the next model call began
        self.open: dict[str, Span] = {}  # tool calls started and not finished
        self.spent: dict[str, Usage] = {}  # this segment's usage per model

    def event(self, ev: Event) -> None:
        """Turn one committed event into span starts, ends and span events."""
        if ev.kind == "token":
            return
        if isinstance(ev, RunStarted):
            self._start(ev)
        elif self.root is None:
            return  # events of a segment whose start we did not see
        elif isinstance(ev, ModelReplied):
            self._chat(ev)
        elif isinstance(ev, ToolStarted):
            self._tool_started(ev)
        elif isinstance(ev, ToolFinished):
            self._tool_finished(ev)
        elif ev.kind in TERMINAL:
            self._end(ev)
        else:
            self._mark(ev)
        self.last_at = ev.at

    def close(self) -> None:
        """End whatever is still open (at the last commit): the run stopped without a closing event."""
        if self.root is not None:
            at = self.last_at or None
            self._finish_tools(at, "interrupted")
            self._fail(self.root, "interrupted", "the run stopped without a closing event")
            self._close_root(at)

    # -- the run -------------------------------------------------------------

    def _start(self, ev: RunStarted) -> None:
        trace = self.trace
        self.close()  # a segment that never ended (it crashed) ends where the next one starts
        self.model, self.spent = ev.model, {}
        links = []
        if ev.resumed:
            parent = trace.set_span_in_context(trace.INVALID_SPAN)  # a new trace, not a child of anything
            links.append(trace.Link(run_context(ev.run_id), {"tether.link": "resumed-from"}))
        else:
            parent = trace.set_span_in_context(trace.NonRecordingSpan(run_context(ev.run_id)))
        current = trace.get_current_span().get_span_context()
        if self.link_current and current.is_valid:
            links.append(trace.Link(current, {"tether.link": "started-from"}))
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": ev.agent or "agent",
            "tether.run.id": ev.run_id,
            "tether.run.resumed": ev.resumed,
        }
        if ev.model:
            attributes["gen_ai.request.model"] = ev.model
        if self.capture and ev.messages:
            attributes["gen_ai.input.messages"] = _json([_message(m) for m in ev.messages])
        self.root = self.tracer.start_span(
            f"invoke_agent {ev.agent or 'agent'}",
            context=parent,
            kind=trace.SpanKind.INTERNAL,
            attributes=attributes,
            links=links,
            start_time=_ns(ev.at),
        )
        self.context = trace.set_span_in_context(self.root)

    def _end(self, ev: Event) -> None:
        assert self.root is not None
        root = self.root
        if isinstance(ev, Failed):
            if not self.open:  # nothing was running but the brain: the model call failed
                self._failed_chat(ev)
            self._fail(root, ev.error_type or "failed", ev.error)
        if isinstance(ev, Paused):  # a delegating call waits with its child run: not an error
            self._finish_tools(ev.at, None)
        else:
            self._finish_tools(ev.at, ev.kind)
        root.set_attribute("tether.run.status", next_status(ev) or "running")
        if isinstance(ev, LimitReached):
            root.set_attribute("tether.run.limit", ev.limit)
        if isinstance(ev, Paused):
            root.set_attribute("tether.pause.reason", ev.reason)
        if self.capture and ev.kind == "finished":
            root.set_attribute("gen_ai.output.messages", _json([_text("assistant", getattr(ev, "output", ""))]))
        self._close_root(ev.at)

    def _close_root(self, at: float | None) -> None:
        assert self.root is not None
        usage = sum(self.spent.values(), Usage())
        self.root.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
        self.root.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        cost = total_cost(self.spent, self.prices, default_model=self.model) if self.spent else None
        if cost is not None:
            self.root.set_attribute("tether.cost.usd", cost)
        self.root.end(end_time=_ns(at))
        self.root = self.context = None

    def _mark(self, ev: Event) -> None:
        """Events that are moments of the run, not operations: span events on the run's span."""
        assert self.root is not None
        attributes: dict[str, Any] = {}
        if isinstance(ev, ApprovalRequested | QuestionAsked):
            attributes = {"gen_ai.tool.name": ev.call.name, "gen_ai.tool.call.id": ev.call.id}
        elif isinstance(ev, ApprovalDecided):
            attributes = {"gen_ai.tool.call.id": ev.decision.call_id, "tether.verdict": ev.decision.verdict}
        elif isinstance(ev, Compacted):
            attributes = {"tether.messages": len(ev.messages)}
        elif isinstance(ev, HandedOff):  # another agent (maybe another model) drives the run from here
            self.model = ev.model
            attributes = {"gen_ai.agent.name": ev.agent}
        elif isinstance(ev, ChildStopped):
            attributes = {"gen_ai.tool.call.id": ev.call_id, "tether.child.status": ev.state.status}
        self.root.add_event(f"tether.{ev.kind}", attributes, timestamp=_ns(ev.at))

    # -- model calls ---------------------------------------------------------

    def _chat_span(self, end: float) -> Span:
        attributes: dict[str, Any] = {"gen_ai.operation.name": "chat"}
        if self.model:
            attributes["gen_ai.request.model"] = self.model
        name = f"chat {self.model}" if self.model else "chat"
        start = self.last_at or end
        kind = self.trace.SpanKind.CLIENT
        return self.tracer.start_span(
            name, context=self.context, kind=kind, attributes=attributes, start_time=_ns(start)
        )

    def _chat(self, ev: ModelReplied) -> None:
        span, reply = self._chat_span(ev.at), ev.message
        response_model = reply.model  # the model that answered, when the brain says
        if response_model:
            span.set_attribute("gen_ai.response.model", response_model)
        if reply.usage is not None:
            _set_usage(span, reply.usage)
            key = response_model or self.model
            self.spent[key] = self.spent.get(key, Usage()) + reply.usage
        if self.capture:
            span.set_attribute("gen_ai.output.messages", _json([_message(reply)]))
        span.end(end_time=_ns(ev.at))

    def _failed_chat(self, ev: Failed) -> None:
        span = self._chat_span(ev.at)
        self._fail(span, ev.error_type or "failed", ev.error)
        span.end(end_time=_ns(ev.at))

    # -- tool calls ----------------------------------------------------------

    def _tool_span(self, call_id: str, name: str, at: float) -> Span:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        }
        tool = self.tools.get(name)
        if tool is not None and tool.description:
            attributes["gen_ai.tool.description"] = tool.description
        return self.tracer.start_span(
            f"execute_tool {name}",
            context=self.context,
            kind=self.trace.SpanKind.INTERNAL,
            attributes=attributes,
            start_time=_ns(at),
        )

    def _tool_started(self, ev: ToolStarted) -> None:
        span = self._tool_span(ev.call.id, ev.call.name, ev.at)
        if ev.attempt > 1:
            span.set_attribute("tether.tool.attempt", ev.attempt)
        if self.capture:
            span.set_attribute("gen_ai.tool.call.arguments", ev.call.arguments)
        self.open[ev.call.id] = span

    def _tool_finished(self, ev: ToolFinished) -> None:
        result = ev.result
        span = self.open.pop(ev.call_id, None)
        if span is None:  # a note instead of a run (denied, invalid arguments...): a span of no length
            span = self._tool_span(ev.call_id, result.name or "tool", ev.at)
        if ev.error is not None:
            self._fail(span, ev.error, ev.error)
        if self.capture:
            span.set_attribute("gen_ai.tool.call.result", result.text)
        span.end(end_time=_ns(ev.at))

    def _finish_tools(self, at: float | None, why: str | None) -> None:
        """End the tool spans the run stopped in the middle of: failed (``why``: cancelled,
        failed, interrupted...) or, with no ``why``, waiting (a sub-agent's call at a pause)."""
        for span in self.open.values():
            if why is None:
                span.set_attribute("tether.tool.waiting", True)
            else:
                self._fail(span, why, f"the run stopped ({why}) while the tool ran")
            span.end(end_time=_ns(at))
        self.open.clear()

    def _fail(self, span: Span, error_type: str, description: str) -> None:
        span.set_attribute("error.type", error_type)
        text = description if self.capture else error_type  # an error message may quote content
        span.set_status(self.trace.Status(self.trace.StatusCode.ERROR, text))


def _ns(at: float | None) -> int | None:
    """Epoch nanoseconds of a commit time (None, "now", for an event that was never committed)."""
    return int(at * 1e9) if at else None


def _set_usage(span: Span, usage: Usage) -> None:
    span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
    if usage.cache_read_tokens:  # reported by some providers only
        span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cache_read_tokens)
    if usage.cache_write_tokens:
        span.set_attribute("gen_ai.usage.cache_creation.input_tokens", usage.cache_write_tokens)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _text(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": content}]}


def _message(m: Message) -> dict[str, Any]:
    """A message in the GenAI conventions' shape: a role and its parts."""
    if m.role == "tool":
        return {"role": "tool", "parts": [{"type": "tool_call_response", "id": m.tool_call_id, "response": m.text}]}
    out = _text(m.role, m.text) if m.content else {"role": m.role, "parts": []}
    for c in m.tool_calls:
        out["parts"].append({"type": "tool_call", "id": c.id, "name": c.name, "arguments": _arguments(c.arguments)})
    return out


def _arguments(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text  # the model's malformed arguments, verbatim
