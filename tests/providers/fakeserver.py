"""A scripted fake model provider: a real HTTP server on 127.0.0.1.

It speaks the OpenAI chat-completions shape (``POST /v1/chat/completions``)
and the Anthropic Messages shape (``POST /v1/messages``), plain JSON or
server-sent events, whichever the request asks for. Each test scripts what it
answers, in order, and reads back every request it received (path, headers,
body bytes). It runs its own event loop in a background thread, so sync and
async tests, and subprocesses pointed at its URL, can all use it.

Script model turns without caring about the wire shape, or whole HTTP replies
(faults, headers, delays, broken streams)::

    from providers.fakeserver import FakeServer, Reply, turn   # from any test under tests/
    from tether import Agent, tool
    from tether.providers import OpenAICompatible

    @tool(effect="none")
    def add(a: int, b: int) -> int:
        '''Add two numbers.'''
        return a + b

    with FakeServer() as server:
        server.push(
            Reply.error(503, headers={"retry-after-ms": "10"}),    # a fault, retried
            turn(tool_calls=[("add", {"a": 2, "b": 3})]),          # a tool call
            turn("2 + 3 = 5", reset_after=1),                      # a stream broken after 1 event
            turn("2 + 3 = 5"),                                     # the retry succeeds
        )
        model = OpenAICompatible("fake", base_url=server.openai_url, api_key="k")
        result = Agent(model, [add]).run_sync("2 + 3?")
        assert result.output == "2 + 3 = 5" and len(server.requests) == 4
        assert server.requests[2].json()["messages"][-1]["content"] == "5"  # the tool result
        server.assert_consumed()

Instead of (or after) the queue, ``handler`` answers every request:
``FakeServer(handler=lambda request: Reply.error(503))`` plays an outage. A
request that finds neither gets a 500 with ``x-should-retry: false`` and is
listed in ``server.errors``.
"""

from __future__ import annotations

import asyncio
import collections
import json
import socket
import struct
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

__all__ = ["FakeServer", "Reply", "Request", "Turn", "anthropic_events", "openai_events", "turn"]

SSEItem = dict[str, Any] | str | tuple[str, dict[str, Any] | str]
"""One server-sent event: JSON data, raw data text, or ``(event name, data)``; ``(":", text)`` is a comment."""


@dataclass(frozen=True)
class Request:
    """What the server received."""

    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def shape(self) -> str:
        """``"anthropic"`` for ``/v1/messages``, else ``"openai"``."""
        return "anthropic" if self.path.rstrip("/").endswith("/messages") else "openai"

    @property
    def streaming(self) -> bool:
        try:
            return bool(self.json().get("stream"))
        except (ValueError, AttributeError):
            return False


@dataclass(frozen=True)
class Reply:
    """An HTTP reply: a status and JSON ``body``, or an SSE stream of ``events``.

    ``reset_after=k`` resets the connection (TCP RST) after k events;
    ``close_after=k`` closes it (FIN) after k events without ending the body;
    ``reset=True`` resets before sending anything. ``delay`` waits before the
    status line, ``event_delay`` between events.
    """

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    events: list[SSEItem] | None = None
    reset_after: int | None = None
    close_after: int | None = None
    reset: bool = False
    delay: float = 0.0
    event_delay: float = 0.0

    @classmethod
    def error(
        cls, status: int, message: str = "fake error", *, kind: str = "api_error", headers: dict[str, str] | None = None
    ) -> Reply:
        """An error in the shape both OpenAI and Anthropic clients read (``error.message``)."""
        body = {"type": "error", "error": {"type": kind, "message": message}}
        return cls(status, body, headers=dict(headers or {}))

    @classmethod
    def sse(cls, events: list[SSEItem], **options: Any) -> Reply:
        return cls(200, events=events, **options)


@dataclass(frozen=True)
class Turn:
    """One model reply, rendered in whatever shape and mode the request asks for.

    ``tool_calls`` holds ``(id, name, arguments JSON)``; ``chunk`` is how many
    characters each streamed text or argument fragment carries. The fault
    options break the stream: ``reset_after`` / ``close_after`` (as in
    :class:`Reply`) or ``error_after=k``, an error event after k events
    (``overloaded_error`` in the Anthropic shape). Without streaming, any fault
    resets the connection before the reply.
    """

    text: str = ""
    tool_calls: tuple[tuple[str, str, str], ...] = ()
    usage: tuple[int, int] = (10, 5)
    chunk: int = 8
    reset_after: int | None = None
    close_after: int | None = None
    error_after: int | None = None
    model: str = "fake-model"


def turn(
    text: str = "",
    tool_calls: Iterable[tuple[Any, ...]] = (),
    *,
    usage: tuple[int, int] = (10, 5),
    chunk: int = 8,
    reset_after: int | None = None,
    close_after: int | None = None,
    error_after: int | None = None,
) -> Turn:
    """A :class:`Turn`; each call is ``(name, args)`` or ``(id, name, args)``, args a dict or raw text.

    >>> turn(tool_calls=[("add", {"a": 1})]).tool_calls[0][1:]
    ('add', '{"a": 1}')
    """
    calls = []
    for i, call in enumerate(tool_calls):
        call_id, name, args = call if len(call) == 3 else (None, *call)
        text_args = args if isinstance(args, str) else json.dumps(args)
        calls.append((call_id or f"call_{_next_id()}_{i}", name, text_args))
    return Turn(text, tuple(calls), usage, chunk, reset_after, close_after, error_after)


_ids = iter(range(1, 1 << 62))
_ids_lock = threading.Lock()


def _next_id() -> int:
    with _ids_lock:
        return next(_ids)


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


# -- OpenAI shape -------------------------------------------------------------


def openai_json(t: Turn) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": t.text or None}
    if t.tool_calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            for cid, name, args in t.tool_calls
        ]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": t.model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if t.tool_calls else "stop"}],
        "usage": {"prompt_tokens": t.usage[0], "completion_tokens": t.usage[1], "total_tokens": sum(t.usage)},
    }


def openai_events(t: Turn) -> list[SSEItem]:
    """The chat-completion chunks of a streamed turn, ending with ``[DONE]``."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": t.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    events: list[SSEItem] = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": p}) for p in _pieces(t.text, t.chunk)]
    for i, (cid, name, args) in enumerate(t.tool_calls):
        first = {"index": i, "id": cid, "type": "function", "function": {"name": name, "arguments": ""}}
        events.append(chunk({"tool_calls": [first]}))
        events += [chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]}) for p in _pieces(args, t.chunk)]
    events.append(chunk({}, "tool_calls" if t.tool_calls else "stop"))
    events.append(
        {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": t.model,
            "choices": [],
            "usage": {"prompt_tokens": t.usage[0], "completion_tokens": t.usage[1], "total_tokens": sum(t.usage)},
        }
    )
    events.append("[DONE]")
    return events


# -- Anthropic shape ----------------------------------------------------------


def anthropic_json(t: Turn) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": t.text}] if t.text else []
    content += [
        {"type": "tool_use", "id": cid, "name": name, "input": _object(args)} for cid, name, args in t.tool_calls
    ]
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": t.model,
        "content": content,
        "stop_reason": "tool_use" if t.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": t.usage[0], "output_tokens": t.usage[1]},
    }


def _object(args: str) -> Any:
    """Parsed arguments; malformed ones stay a string (the real API never sends those)."""
    try:
        return json.loads(args)
    except ValueError:
        return args


def anthropic_events(t: Turn) -> list[SSEItem]:
    """The Messages stream of a turn: message_start ... message_stop."""
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": t.model,
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": t.usage[0], "output_tokens": 1},
        },
    }
    events: list[SSEItem] = [("message_start", start), ("ping", {"type": "ping"})]
    index = 0
    if t.text:
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            )
        )
        events += [
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}},
            )
            for p in _pieces(t.text, t.chunk)
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        index = 1
    for i, (cid, name, args) in enumerate(t.tool_calls, start=index):
        block = {"type": "tool_use", "id": cid, "name": name, "input": {}}
        events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": block}))
        events += [
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": p}},
            )
            for p in _pieces(args, t.chunk)
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    stop = "tool_use" if t.tool_calls else "end_turn"
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": t.usage[1]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def render(t: Turn, request: Request) -> Reply:
    """The reply a real provider would send for this turn and request."""
    anthropic = request.shape == "anthropic"
    faults = (t.reset_after, t.close_after, t.error_after)
    if not request.streaming:
        if any(f is not None for f in faults):
            return Reply(reset=True)
        return Reply(200, anthropic_json(t) if anthropic else openai_json(t))
    events = anthropic_events(t) if anthropic else openai_events(t)
    if t.error_after is not None:
        error: SSEItem = (
            ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
            if anthropic
            else {"error": {"message": "The server is overloaded", "type": "server_error"}}
        )
        events = [*events[: t.error_after], error]
    return Reply.sse(events, reset_after=t.reset_after, close_after=t.close_after)


def encode_event(item: SSEItem) -> bytes:
    name, data = item if isinstance(item, tuple) else (None, item)
    if name == ":":
        return f": {data}\n\n".encode()  # a comment line (keep-alive, "OPENROUTER PROCESSING")
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    lines = [f"event: {name}"] if name else []
    lines += [f"data: {line}" for line in text.split("\n")]
    return ("\n".join(lines) + "\n\n").encode()


# -- the server ----------------------------------------------------------------


class FakeServer:
    """A scripted HTTP server on 127.0.0.1 (see the module docstring).

    ``push`` queues replies (a :class:`Reply` or a :class:`Turn`, answered in
    order); ``handler`` answers when the queue is empty. ``requests`` lists
    every request received, in order.
    """

    def __init__(self, handler: Callable[[Request], Reply | Turn] | None = None) -> None:
        self.handler = handler
        self.requests: list[Request] = []
        self.errors: list[str] = []
        self.port = 0
        self._queue: collections.deque[Reply | Turn] = collections.deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- scripting ---------------------------------------------------------

    def push(self, *replies: Reply | Turn) -> FakeServer:
        self._queue.extend(replies)
        return self

    @property
    def remaining(self) -> int:
        return len(self._queue)

    def assert_consumed(self) -> None:
        assert not self._queue, f"{len(self._queue)} scripted replies were never asked for"
        assert not self.errors, self.errors

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_url(self) -> str:
        """``base_url`` for :class:`~tether.providers.OpenAICompatible`."""
        return self.url + "/v1"

    @property
    def anthropic_url(self) -> str:
        """``base_url`` for :class:`~tether.providers.Anthropic`."""
        return self.url

    def bodies(self) -> list[Any]:
        """Every request body, parsed as JSON."""
        return [r.json() for r in self.requests]

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> FakeServer:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="fake-provider", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        self._loop = self._thread = None

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self, ready: threading.Event) -> None:
        loop = self._loop
        assert loop is not None
        asyncio.set_event_loop(loop)
        self._server = loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=4096))
        self.port = self._server.sockets[0].getsockname()[1]
        ready.set()
        try:
            loop.run_forever()
        finally:
            self._server.close()
            for task in self._tasks:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*self._tasks, return_exceptions=True))
            loop.run_until_complete(self._server.wait_closed())
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    # -- one connection -----------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while (request := await _read_request(reader)) is not None:
                self.requests.append(request)
                if not await self._answer(self._next(request), request, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError, ValueError):
            pass
        finally:
            self._tasks.discard(task)
            if not writer.transport.is_closing():
                writer.close()

    def _next(self, request: Request) -> Reply:
        try:
            item: Reply | Turn = self._queue.popleft()
        except IndexError:
            if self.handler is None:
                return self._broken(f"no scripted reply left for request #{len(self.requests)} to {request.path}")
            try:
                item = self.handler(request)
            except Exception as exc:
                return self._broken(f"the handler raised {exc!r} for request #{len(self.requests)}")
        try:
            return render(item, request) if isinstance(item, Turn) else item
        except Exception as exc:
            return self._broken(f"cannot render {item!r}: {exc!r}")

    def _broken(self, problem: str) -> Reply:
        """A script problem: recorded in ``errors`` and answered with a final 500."""
        self.errors.append(problem)
        return Reply.error(500, f"fake server: {problem}", kind="script_error", headers={"x-should-retry": "false"})

    async def _answer(self, reply: Reply, request: Request, writer: asyncio.StreamWriter) -> bool:
        """Send the reply; False when the connection is gone afterwards."""
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.reset:
            _reset(writer)
            return False
        reason = HTTPStatus(reply.status).phrase if reply.status in HTTPStatus._value2member_map_ else "Status"
        head = [f"HTTP/1.1 {reply.status} {reason}"]
        if reply.events is None:
            body = (
                reply.body
                if isinstance(reply.body, bytes)
                else (
                    b""
                    if reply.body is None
                    else reply.body.encode()
                    if isinstance(reply.body, str)
                    else json.dumps(reply.body).encode()
                )
            )
            head += ["content-type: application/json", f"content-length: {len(body)}"]
            head += [f"{k}: {v}" for k, v in reply.headers.items()]
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
            await writer.drain()
            return request.headers.get("connection", "").lower() != "close"
        head += ["content-type: text/event-stream", "cache-control: no-cache", "transfer-encoding: chunked"]
        head += [f"{k}: {v}" for k, v in reply.headers.items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        for i, item in enumerate(reply.events):
            if i == reply.reset_after:
                await writer.drain()
                _reset(writer)
                return False
            if i == reply.close_after:
                await writer.drain()
                writer.close()
                return False
            if reply.event_delay:
                await asyncio.sleep(reply.event_delay)
            data = encode_event(item)
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            if reply.event_delay:
                await writer.drain()
        if reply.reset_after is not None and reply.reset_after >= len(reply.events):
            await writer.drain()
            _reset(writer)
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    line = await reader.readline()
    if not line.strip():
        return None
    method, path, _ = line.decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    while (raw := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    body = await reader.readexactly(length) if length else b""
    return Request(method, path, headers, body)


def _reset(writer: asyncio.StreamWriter) -> None:
    """Abort the connection with a TCP RST (SO_LINGER 0), not a clean FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
