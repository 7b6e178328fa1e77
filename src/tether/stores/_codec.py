"""Rows for the SQL stores: events to JSON text and back, and the stale-writer refusal."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..events import PERSISTED, Event, from_dict, to_dict
from ..exceptions import LeaseConflict, StoreError
from ..store import Lease
from ._blobs import Blobs, by_reference, parts_of, with_bytes


def encode_events(events: Sequence[Event], blobs: dict[str, bytes] | None = None) -> list[tuple[str, str]]:
    """``(kind, JSON body)`` rows; refuses events that are never persisted.

    The bytes of images and files are left out of the bodies (a ``blob``
    digest stands in for each) and added to ``blobs``, digest to bytes, for
    the store to keep once per run (:mod:`tether.stores._blobs`).
    """
    rows: list[tuple[str, str]] = []
    for ev in events:
        if ev.kind not in PERSISTED:
            raise StoreError(f"{ev.kind!r} events are not persisted")
        data = to_dict(ev)
        if blobs is not None and (parts := parts_of((ev,))):
            by_reference(data, parts)
            blobs.update((digest, p.data) for digest, p in parts.items())
        try:
            text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            if not text.isascii() and not _utf8_ok(text):
                text = json.dumps(data, separators=(",", ":"))  # \u-escapes lone surrogates
        except (TypeError, ValueError, RecursionError) as exc:
            raise StoreError(f"a {ev.kind!r} event is not plain JSON: {exc}") from exc
        rows.append((ev.kind, text))
    return rows


def _utf8_ok(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def decode_event(run_id: str, seq: int, body: Any, blobs: Blobs | None = None) -> Event:
    """The event a stored body (JSON text or parsed) describes; a malformed row is a StoreError.

    ``blobs`` gives the bytes of the parts the body names by digest.
    """
    try:
        data = json.loads(body) if isinstance(body, str) else body
        if blobs is not None and isinstance(data, dict) and (not isinstance(body, str) or '"blob":' in body):
            with_bytes(data, blobs)
        return from_dict(data)
    except (ValueError, RecursionError) as exc:
        raise StoreError(f"event #{seq} of run {run_id!r} is malformed: {exc}") from exc


def conflict(run_id: str, found: int, expected: int) -> LeaseConflict:
    """The refusal a stale writer gets."""
    return LeaseConflict(
        f"run {run_id!r} has {found} events, the writer expected {expected}: "
        "another worker advanced it (this writer must stop and reload)"
    )


def held_by(run_id: str, lease: Lease | None, now: float) -> LeaseConflict:
    """The refusal a worker gets for a run whose lease it does not hold."""
    if lease is None or lease.expires_at <= now:
        return LeaseConflict(f"run {run_id!r}: this worker's lease was released or taken over; it must stop")
    return LeaseConflict(
        f"run {run_id!r} is being advanced by {lease.owner!r} "
        f"(lease token {lease.token}, {lease.expires_at - now:.0f} s left); try again after it ends or expires",
        holder=lease.owner,
    )
