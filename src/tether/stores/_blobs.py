"""A part's bytes once per run: what the SQL stores share.

An event that holds an image or a file (a user note, a tool's screenshot, a
pause's state, a compacted notebook) is stored with each part's base64
``data`` replaced by ``"blob": <sha256>``, and the bytes go to the ``blobs``
table under ``(run_id, sha256)``, written once however many events name them.
Loading puts the bytes back (checking each against its digest), so a store
gives back exactly the events it was given: the journal, the signatures on
paused states and the tamper checks see what they always saw.

>>> from tether.events import ModelReplied
>>> from tether.messages import Message
>>> parts_of([ModelReplied(Message.assistant("hi"))])
{}
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..events import Event
from ..exceptions import StoreError
from ..messages import Message
from ..parts import File, Image
from ..state import RunState

_MESSAGE_KEYS = ("message", "result")


def parts_of(events: Sequence[Event]) -> dict[str, Any]:
    """The parts with bytes that ``events`` hold, by digest (empty for the text-only events of a run)."""
    found: dict[str, Any] = {}
    for ev in events:
        for m in _messages(ev):
            if not isinstance(m.content, str):
                found.update((p.sha256, p) for p in m.content if isinstance(p, Image | File) and p.data is not None)
    return found


def _messages(ev: Any) -> Iterator[Message]:
    for key in _MESSAGE_KEYS:
        m = getattr(ev, key, None)
        if isinstance(m, Message):
            yield m
    yield from getattr(ev, "messages", ())
    state = getattr(ev, "state", None)
    if isinstance(state, RunState):
        yield from _state_messages(state)


def _state_messages(state: RunState) -> Iterator[Message]:
    yield from state.messages
    for child in state.children:
        yield from _state_messages(child)


def by_reference(body: dict[str, Any], parts: dict[str, Any]) -> None:
    """Replace each part's ``data`` in an event's JSON with ``blob``, its digest (in place).

    ``parts`` are the event's parts (:func:`parts_of`): their base64 is the very
    string in the JSON, so the digest is found without decoding it again.
    """
    known = {p.base64: digest for digest, p in parts.items()}
    for part in _part_dicts(body):
        if "data" in part:
            data = part.pop("data")
            part["blob"] = known.get(data) or hashlib.sha256(base64.b64decode(data)).hexdigest()


def with_bytes(body: dict[str, Any], blob: Callable[[str], str]) -> None:
    """Put the bytes back into an event's JSON: ``blob(digest)`` gives a part's base64 (in place)."""
    for part in _part_dicts(body):
        if "blob" in part:
            part["data"] = blob(part.pop("blob"))


def names_blobs(body: Any) -> bool:
    """Whether a stored event's JSON (parsed, or text) names a part's bytes by digest."""
    if isinstance(body, str):
        return '"blob":' in body
    return isinstance(body, dict) and any("blob" in p for p in _part_dicts(body))


def _part_dicts(data: dict[str, Any]) -> Iterator[dict[str, Any]]:
    messages = [data[k] for k in _MESSAGE_KEYS if isinstance(data.get(k), dict)]
    messages += data.get("messages") or []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            yield from (p for p in content if isinstance(p, dict))
    for nested in (data.get("state"), *(data.get("children") or ())):
        if isinstance(nested, dict):
            yield from _part_dicts(nested)


def checked(run_id: str, digest: str, data: bytes | None) -> bytes:
    """A stored part's bytes, refused unless they are what the digest says."""
    if data is None:
        raise StoreError(f"run {run_id!r} names a part {digest[:12]}... whose bytes are not in the store")
    if hashlib.sha256(data).hexdigest() != digest:
        raise StoreError(f"the stored bytes of part {digest[:12]}... of run {run_id!r} do not match their digest")
    return data


class Blobs:
    """The base64 of one run's stored parts, fetched on first need and kept for one load."""

    def __init__(self, run_id: str, fetch: Callable[[], dict[str, bytes]]) -> None:
        self.run_id, self._fetch = run_id, fetch
        self._raw: dict[str, bytes] | None = None
        self._b64: dict[str, str] = {}

    def __call__(self, digest: str) -> str:
        if digest not in self._b64:
            if self._raw is None:
                self._raw = self._fetch()
            data = checked(self.run_id, digest, self._raw.get(digest))
            self._b64[digest] = base64.b64encode(data).decode("ascii")
        return self._b64[digest]
