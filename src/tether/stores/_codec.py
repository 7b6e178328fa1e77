"""Rows for the SQL stores: events to JSON text and back."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..events import Event, from_dict, to_dict
from ..exceptions import StoreError
from ._blobs import Blobs, by_reference, parts_of, with_bytes
from .rules import check_persisted


def encode_events(events: Sequence[Event], blobs: dict[str, bytes] | None = None) -> list[tuple[str, str]]:
    """``(kind, JSON body)`` rows; refuses events that are never persisted.

    The bytes of images and files are left out of the bodies (a ``blob``
    digest stands in for each) and added to ``blobs``, digest to bytes, for
    the store to keep once per run (:mod:`tether.stores._blobs`).
    """
    check_persisted(events)
    rows: list[tuple[str, str]] = []
    for ev in events:
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
