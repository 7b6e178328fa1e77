"""A stdio transport whose reader is linear and capped: one huge reply cannot wedge a connection.

The SDK's stdio reader joins each chunk to the unfinished line and splits again,
which is quadratic in the line's length: a 24 MB reply took minutes to read,
and every call behind it on the same server timed out. Here the server's stdout
is read as bytes, each line is gathered once, and a line longer than the
server's ``max_result_bytes`` is not kept: its bytes are counted and dropped,
and when it answers a request (its top-level ``id`` is found in its first or
last bytes) the request gets a small error result saying what was left out.
The next call on the connection is not slowed at all.

Starting and stopping the server process (a process group of its own, stdin
closed, then SIGTERM, then SIGKILL) are the SDK's own steps, used as they are.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator
from typing import IO, TYPE_CHECKING, Any, TextIO, cast

if TYPE_CHECKING:
    from mcp import StdioServerParameters

KEEP = 64 * 1024  # of a line over the cap: its start, where most servers put the id
TAIL = 256  # and its end, where the TypeScript SDK puts it
_ID_VALUE = r'(-?\d+|"(?:[^"\\]|\\.)*")'
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_COLON = re.compile(r"\s*:\s*")
_ID = re.compile(_ID_VALUE)
_ID_AT_END = re.compile(rb'[,{]\s*"id"\s*:\s*' + _ID_VALUE.encode() + rb'\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$')


class Oversized:
    """A line over the cap, as it streams past: its length, start and end (the rest is dropped)."""

    def __init__(self, start: bytes) -> None:
        self.size = len(start)
        self.head = bytes(start[:KEEP])
        self.tail = bytes(start[-TAIL:])

    def feed(self, piece: bytes) -> None:
        self.size += len(piece)
        self.tail = (self.tail + piece)[-TAIL:]

    def request_id(self) -> int | str | None:
        """The id of the request this line answers, when it shows in the kept bytes at the top level."""
        found = top_level_id(self.head)
        if found is not None:
            return found
        m = _ID_AT_END.search(self.tail)
        return json.loads(m[1]) if m else None

    def reply(self, cap: int) -> dict[str, Any] | None:
        """The error result its request gets instead (None when it answers none)."""
        rid = self.request_id()
        if rid is None:
            return None
        text = (
            f"the MCP server's reply was {self.size:,} bytes, over the cap of {cap:,} bytes per result "
            "(max_result_bytes), so tether left it out; ask for less (a page, a filter, a summary)"
        )
        result = {"content": [{"type": "text", "text": text}], "isError": True, "resultType": "complete"}
        return {"jsonrpc": "2.0", "id": rid, "result": result}


def top_level_id(head: bytes) -> int | str | None:
    """The value of the ``id`` member of the JSON object that ``head`` starts (read no further
    than ``head``; strings are skipped, so an ``"id"`` inside one or deeper down does not count).

    >>> top_level_id(b'{"jsonrpc": "2.0", "id": 7, "result": {"id": 9, "text": "xx')
    7
    >>> top_level_id(b'{"result": {"id": 9, "text": "\\"id\\": 3') is None
    True
    """
    text = head.decode("utf-8", "replace")
    depth, i = 0, 0
    while i < len(text):
        c = text[i]
        if c == '"':
            string = _STRING.match(text, i)
            if string is None:
                return None  # the string runs past what was kept
            i = string.end()
            colon = _COLON.match(text, i)  # a string followed by ":" is a key
            if depth == 1 and string[0] == '"id"' and colon is not None:
                value = _ID.match(text, colon.end())
                return json.loads(value[0]) if value else None
            continue
        depth += 1 if c in "{[" else -1 if c in "}]" else 0
        i += 1
    return None


def split_lines(buffer: bytearray, chunk: bytes, cap: int, over: Oversized | None) -> tuple[list[Any], Any]:
    """Feed ``chunk``: the finished lines (bytes, or an :class:`Oversized`) and the state to keep.

    >>> buf = bytearray()
    >>> split_lines(buf, b'{"a": 1}\\n{"b"', 100, None)[0], bytes(buf)
    ([b'{"a": 1}'], b'{"b"')
    >>> done, over = split_lines(bytearray(), b"x" * 10, 4, None)
    >>> done, over.size
    ([], 10)
    """
    done: list[Any] = []
    start = 0
    while True:
        nl = chunk.find(b"\n", start)
        piece = chunk[start:] if nl < 0 else chunk[start:nl]
        if over is not None:
            over.feed(piece)
        elif len(buffer) + len(piece) > cap:
            over = Oversized(bytes(buffer) + piece)
            buffer.clear()
        else:
            buffer += piece
        if nl < 0:
            return done, over
        if over is not None:
            done.append(over)
            over = None
        elif buffer.strip():
            done.append(bytes(buffer))
        buffer.clear()
        start = nl + 1


@contextlib.asynccontextmanager
async def capped_stdio(params: StdioServerParameters, errlog: IO[str], cap: int) -> AsyncIterator[Any]:
    """The SDK's ``stdio_client(params, errlog)``, with a reader of our own (see the module)."""
    import anyio
    import mcp_types
    from mcp.client import stdio as sdk
    from mcp.shared.message import SessionMessage

    command = await sdk._get_executable_command(params.command)
    env = sdk.get_default_environment() | (params.env or {})
    process = await sdk._create_platform_compatible_process(command, params.args, env, cast(TextIO, errlog), params.cwd)
    to_session, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, from_session = anyio.create_memory_object_stream[Any](0)
    writer_done = anyio.Event()

    def message(raw: bytes | dict[str, Any]) -> Any:
        try:
            if isinstance(raw, dict):
                return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_python(raw, by_name=False))
            return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(raw, by_name=False))
        except ValueError as exc:
            return exc  # the session surfaces it, as the SDK's reader does

    async def reader() -> None:
        assert process.stdout is not None
        buffer, over = bytearray(), None
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            async with to_session:
                try:
                    async for chunk in process.stdout:
                        lines, over = split_lines(buffer, chunk, cap, over)
                        for line in lines:
                            raw = line.reply(cap) if isinstance(line, Oversized) else line
                            if raw is not None:
                                await to_session.send(message(raw))
                finally:
                    await sdk._drain_stdout(process)

    async def writer() -> None:
        assert process.stdin is not None
        try:
            async with from_session:
                async for sent in from_session:
                    data = sent.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await to_session.aclose()  # the session sees the connection end, not a hang
        finally:
            writer_done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):  # the server process must not outlive us
                read_stream.close()
                write_stream.close()
                with anyio.move_on_after(0.5):
                    await writer_done.wait()
                await sdk._stop_server_process(process)
                for stream in (read_stream, write_stream, to_session, from_session):
                    await stream.aclose()
            tg.cancel_scope.cancel()
