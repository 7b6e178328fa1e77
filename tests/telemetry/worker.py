"""One process of a traced run: ``start DB RUN_ID OUT`` runs it to its pause, ``resume DB RUN_ID OUT``
resumes it from the store; each writes the spans it made to OUT as JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tether import Action, Agent
from tether.stores.sqlite import SQLiteStore
from tether.telemetry import Tracing
from tether.testing import ScriptedModel

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]  # tests/, for support (run as a script)
from support import refund  # noqa: E402


def main(step: str, db: str, run_id: str, out: str) -> None:
    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    replies = [Action("refund", {"order": "A1"})] if step == "start" else ["Refunded A1."]
    model = ScriptedModel(replies)
    model.model = "gpt-4o"  # type: ignore[attr-defined]  # the name a provider's policy carries
    agent = Agent(model, [refund], store=SQLiteStore(db), observers=[Tracing(provider.get_tracer("worker"))])
    result = agent.run_sync("Refund A1", run_id=run_id) if step == "start" else agent.run_sync(run_id=run_id)
    spans = [
        {
            "name": s.name,
            "trace_id": format(s.context.trace_id, "032x"),
            "span_id": format(s.context.span_id, "016x"),
            "parent": format(s.parent.span_id, "016x") if s.parent else None,
            "links": [
                [format(link.context.trace_id, "032x"), format(link.context.span_id, "016x")] for link in s.links
            ],
            "attributes": dict(s.attributes or {}),
        }
        for s in exporter.get_finished_spans()
    ]
    Path(out).write_text(json.dumps({"status": result.status, "spans": spans}))


if __name__ == "__main__":
    main(*sys.argv[1:5])
