"""Helpers shared by the core tests."""

from __future__ import annotations

from typing import Any

from tether import ChildEvent, Event
from tether.events import to_dict


def kinds(events: tuple[Event, ...] | list[Event]) -> list[str]:
    return [e.kind for e in events]


def compact(events: tuple[Event, ...] | list[Event]) -> list[Any]:
    """Events as short, stable tuples for snapshots (no run ids, no fingerprints)."""
    out: list[Any] = []
    for e in events:
        if isinstance(e, ChildEvent):  # a child run's event: who, and the event as compact as ours
            out.append(("child", e.agent, compact([e.event])[0]))
            continue
        d = to_dict(e)
        kind = d.pop("kind")
        d.pop("run_id", None)
        d.pop("fingerprint", None)
        d.pop("state", None)
        d.pop("at", None)
        if kind == "model-replied":
            m = d["message"]
            d = {
                "text": m["content"],
                "calls": [f"{c['id']}:{c['name']}{c['arguments']}" for c in m.get("tool_calls", [])],
            }
        elif kind == "tool-finished":
            r = d["result"]
            d = {"id": r["tool_call_id"], "content": r["content"], "error": d["error"]}
        elif kind == "tool-started":
            d = {"id": d["call"]["id"], "attempt": d["attempt"]}
        elif kind == "run-started":
            d = {"messages": [f"{m['role']}: {m['content']}" for m in d["messages"]], "resumed": d["resumed"]}
        out.append((kind, d) if d else kind)
    return out
