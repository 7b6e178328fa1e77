"""A small incremental decoder for server-sent events (SSE).

Bytes go in, in whatever pieces the network delivers them; complete events
come out. The decoder is pure (no I/O), so any chunking of the same byte stream
gives the same events. It follows the WHATWG rules that matter to model
providers: lines end with ``\\r\\n``, ``\\n`` or ``\\r``; a blank line ends an
event; ``:`` starts a comment; several ``data:`` lines join with ``\\n``; one
space after the colon is dropped; an event with no data is not dispatched; an
unfinished event at the end of the stream is discarded.

>>> d = SSEDecoder()
>>> d.feed(b'event: ping\\ndata: {"a"') + d.feed(b': 1}\\n\\ndata: [DONE]\\n\\n')
[ServerSentEvent(data='{"a": 1}', event='ping', id=None), ServerSentEvent(data='[DONE]', event='message', id=None)]
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SSEDecoder", "ServerSentEvent"]


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One dispatched event: its ``data`` text, ``event`` type and last ``id``."""

    data: str
    event: str = "message"
    id: str | None = None


class SSEDecoder:
    """Turns a byte stream into :class:`ServerSentEvent` values, chunk by chunk."""

    __slots__ = ("_data", "_event", "_id", "_parts")

    def __init__(self) -> None:
        self._parts: list[bytes] = []  # the unfinished last line
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode ``chunk`` and return the events it completes."""
        if not chunk:
            return []
        if b"\n" not in chunk and b"\r" not in chunk:
            self._parts.append(chunk)  # no line ends yet: avoid re-scanning a long line
            return []
        self._parts.append(chunk)
        buffer = b"".join(self._parts)
        lines = buffer.splitlines(keepends=True)
        last = lines[-1]
        # An unfinished line waits; so does a final bare "\r", whose "\n" may be next.
        if last.endswith(b"\r") or not last.endswith((b"\n", b"\r")):
            self._parts = [lines.pop()]
        else:
            self._parts = []
        events: list[ServerSentEvent] = []
        for line in lines:
            event = self._line(line.rstrip(b"\r\n").decode("utf-8", "replace"))
            if event is not None:
                events.append(event)
        return events

    def close(self) -> list[ServerSentEvent]:
        """The stream ended: finish a pending line; an unterminated event is dropped."""
        tail = b"".join(self._parts)
        self._parts = []
        if tail.endswith(b"\r"):  # a complete line after all
            event = self._line(tail[:-1].decode("utf-8", "replace"))
            if event is not None:
                return [event]
        self._data, self._event = [], ""
        return []

    def _line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line[0] == ":":
            return None  # a comment (keep-alive)
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        return None  # "retry" and unknown fields are ignored

    def _dispatch(self) -> ServerSentEvent | None:
        data, event = self._data, self._event
        self._data, self._event = [], ""
        if not data:
            return None
        return ServerSentEvent("\n".join(data), event or "message", self._id)
