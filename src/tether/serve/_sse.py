"""Server-sent event streams: one run's events from a position, and which runs change.

A run's stream sends each committed event as ``id: <position>``,
``event: <kind>``, ``data: <the event as JSON>``; the position is the event's
place in the run's log (1 for ``run-started``). A client that reconnects with
``Last-Event-ID: n`` (browsers do it by themselves) gets everything after
``n``, so nothing is lost and nothing repeats. The stream ends (``event: end``)
once the run can never change again: finished, or cancelled for good. A
comment line every 15 s keeps proxies from closing a quiet stream.

>>> frame(3, "finished", {"kind": "finished"})
'id: 3\\nevent: finished\\ndata: {"kind": "finished"}\\n\\n'
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ..events import Cancelled, Event, to_dict
from ..parts import safe_text
from ..store import RunStore
from ._hub import Hub, wait_for

__all__ = ["change_stream", "frame", "position_from", "run_stream"]

KEEPALIVE = 15.0


def frame(position: int | None, kind: str, data: Any) -> str:
    """One SSE message (the JSON has no newlines, so it is one ``data:`` line)."""
    head = f"id: {position}\n" if position is not None else ""
    return f"{head}event: {kind}\ndata: {safe_text(json.dumps(data, ensure_ascii=False))}\n\n"


def event_frame(position: int, ev: Event) -> str:
    return frame(position, ev.kind, to_dict(ev))


def position_from(last_event_id: str | None, after: str | None) -> int | None:
    """Where a stream starts: ``Last-Event-ID`` (a reconnect) wins over ``?after=``; None if malformed."""
    text = last_event_id if last_event_id is not None else after
    if text is None or text == "":
        return 0
    return int(text) if text.isdigit() and len(text) < 10 else None


def ended(events: Sequence[Event]) -> bool:
    """Whether a run can never change again."""
    if not events:
        return False
    return events[-1].kind == "finished" or any(isinstance(e, Cancelled) and e.final for e in events)


async def run_stream(hub: Hub, store: RunStore, run_id: str, after: int) -> AsyncIterator[str]:
    """The events of ``run_id`` after position ``after``, then live until the run ends."""
    yield "retry: 2000\n\n"
    with hub.subscription(run_id) as changed, hub.feed(store, run_id, event_frame) as feed:
        position = after
        while True:
            changed.clear()
            for text in await feed.after(position):
                position += 1
                yield text
            if ended(feed.events):
                yield frame(None, "end", {"run_id": run_id, "position": position})
                return
            if not await wait_for(changed, KEEPALIVE):
                yield ": keep-alive\n\n"


async def change_stream(hub: Hub, store: RunStore) -> AsyncIterator[str]:
    """``event: run`` with ``{"run_id", "status", "seq"}`` whenever a run changes."""
    yield "retry: 2000\n\n"
    with hub.listen() as listener:
        while True:
            if not await wait_for(listener.flag, KEEPALIVE):
                yield ": keep-alive\n\n"
                continue
            for run_id in sorted({r.partition("/")[0] for r in listener.take()}):  # a child run: its root
                info = await store.get(run_id)
                status = info.status if info else "deleted"
                yield frame(None, "run", {"run_id": run_id, "status": status, "seq": info.seq if info else 0})
