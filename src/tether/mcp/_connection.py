"""One MCP server's connection: started on first use, kept, restarted after a loss, closed.

A :class:`Connection` lives on the portal loop (see :mod:`._portal`). Its owner
task enters the SDK's client (which starts a stdio server process, or opens
the HTTP session), reads the server's tool list, follows changes to it
(``notifications/tools/list_changed`` on older servers, a
``subscriptions/listen`` stream on 2026 ones), and waits until it is closed or
the connection ends. The stream of messages from the server is watched for its
end, so a server that dies is noticed at once: calls in
flight fail with :class:`McpServerLost` (never a hang), and the next call
starts the server again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import AsyncIterator, Mapping
from typing import IO, TYPE_CHECKING, Any

from ._config import McpServer
from ._errors import McpServerLost, McpToolChanged, McpToolError, McpUnavailable
from ._results import McpResult, to_result, within_cap

if TYPE_CHECKING:
    import mcp
    import mcp_types

PAGES = 100  # a tools/list that pages on past this is cut off (a server cannot hang us)


class Connection:
    """The live session to one server, and the tool list it last sent."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.session: mcp.Client | None = None
        self.listing: dict[str, mcp_types.Tool] = {}
        self.digests: dict[str, str] = {}
        self.version = 0  # grows each time the tool list is read
        self.starts = 0
        self.loss = ""  # why the last connection ended
        self._lock: asyncio.Lock | None = None
        self._stop = asyncio.Event()
        self._lost = asyncio.Event()
        self._owner: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stderr: IO[str] | None = None

    async def open(self) -> mcp.Client:
        """The live session, starting the server first (again, after a loss) if needed."""
        if self.session is not None and not self._lost.is_set():
            return self.session
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.session is None or self._lost.is_set():
                await self._start()
            assert self.session is not None
            return self.session

    async def call(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        digest: str | None = None,
        meta: dict[str, Any] | None = None,
        fresh: bool = False,
    ) -> McpResult:
        """Call ``tool``; with ``digest``, only if the server still defines it that way (with
        ``fresh``, as its tool list says now, read again first: a change the server has not
        announced yet, or whose notice is still on its way, is caught too)."""
        import mcp_types
        import pydantic
        from mcp.shared.exceptions import MCPError

        session = await self.open()
        if fresh:
            try:
                await self._relist(session)
            except (MCPError, pydantic.ValidationError, RuntimeError) as exc:
                if isinstance(exc, MCPError) and exc.code == mcp_types.CONNECTION_CLOSED:
                    raise McpServerLost(self._lost_message(tool)) from exc
                raise McpToolError(
                    f"MCP server {self.server.name!r} could not list its tools before the approved call "
                    f"to {tool!r}, so it was not called: {exc}"
                ) from exc
        if digest is not None:
            self._check(tool, digest)
        try:
            result = await session.call_tool(tool, dict(arguments), meta=meta)  # type: ignore[arg-type]
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED:
                raise McpServerLost(self._lost_message(tool)) from exc
            raise McpToolError(f"MCP server {self.server.name!r} refused the call: {exc.message} ({exc.code})") from exc
        except (pydantic.ValidationError, RuntimeError) as exc:  # the result breaks the protocol or its schema
            raise McpToolError(f"MCP server {self.server.name!r} sent a result that does not fit: {exc}") from exc
        return within_cap(to_result(result), self.server.max_result_bytes, self.server.name)

    async def close(self) -> None:
        """End the session (a stdio server is stopped) and forget the tool list."""
        self._stop.set()
        await self._finish_owner()
        self._drop_stderr()

    # -- the owner task ------------------------------------------------------------

    async def _start(self) -> None:
        await self._finish_owner()
        missing = self.server.missing_variables()
        if missing:
            raise McpUnavailable(f"MCP server {self.server.name!r} needs ${{{missing[0]}}}, which is not set")
        self._stop, self._lost = asyncio.Event(), asyncio.Event()
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._owner = asyncio.create_task(self._own(ready), name=f"mcp:{self.server.name}")
        try:
            async with asyncio.timeout(self.server.connect_timeout):
                await asyncio.shield(ready)
        except TimeoutError:
            self._owner.cancel()
            await self._finish_owner()
            raise McpUnavailable(
                f"MCP server {self.server.name!r} ({self.server.where()}) did not answer within "
                f"{self.server.connect_timeout:g} s{self._stderr_tail()}"
            ) from None
        except asyncio.CancelledError:
            self._owner.cancel()
            await self._finish_owner()
            raise

    async def _own(self, ready: asyncio.Future[None]) -> None:
        import anyio
        import mcp
        import mcp_types

        from .. import __version__

        self.starts += 1
        stop, lost = self._stop, self._lost
        try:
            async with mcp.Client(
                _watched(self._transport(), lost),
                mode=self.server.protocol,
                message_handler=self._on_message,
                client_info=mcp_types.Implementation(name="tether", version=__version__),
                cache=None,
            ) as client:
                await self._relist(client)
                self.session, self.loss = client, ""
                ready.set_result(None)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._listen, client)
                    await _first(stop.wait(), lost.wait())
                    tg.cancel_scope.cancel()
            self.loss = "the client closed it" if stop.is_set() else "the server closed the connection"
        except Exception as exc:  # the SDK's and the transport's errors: say what happened
            self.loss = _describe(exc)
            if not ready.done():
                ready.set_exception(
                    McpUnavailable(
                        f"MCP server {self.server.name!r} ({self.server.where()}) could not be "
                        f"started or reached: {self.loss}{self._stderr_tail()}"
                    )
                )
        finally:
            self.session = None
            lost.set()

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        server = self.server
        if server.command is None:
            return _http(str(server.url), server.expanded(server.headers))
        from mcp import StdioServerParameters

        from ._stdio import capped_stdio

        env = server.expanded(server.env)
        if server.inherit_env:
            env = {**os.environ, **env}
        self._drop_stderr()
        # Kept open while the server runs (its stderr goes here), read for messages, closed after.
        self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        params = StdioServerParameters(command=server.command, args=list(server.args), env=env, cwd=server.cwd)
        return capped_stdio(params, self._stderr, server.max_result_bytes)

    async def _relist(self, client: mcp.Client) -> None:
        tools: dict[str, mcp_types.Tool] = {}
        cursor: str | None = None
        for _ in range(PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.update((t.name, t) for t in page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        self.listing, self.digests = tools, {name: digest(t) for name, t in tools.items()}
        self.version += 1

    async def _on_message(self, message: Any) -> None:
        """Older servers announce a changed tool list with a notification."""
        session = self.session
        if getattr(message, "method", None) == "notifications/tools/list_changed" and session is not None:
            task = asyncio.create_task(self._quietly_relist(session))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _quietly_relist(self, client: mcp.Client) -> None:
        with contextlib.suppress(Exception):  # a server gone mid-way is noticed by _Watched
            await self._relist(client)

    async def _listen(self, client: mcp.Client) -> None:
        """2026 servers announce changes on a ``subscriptions/listen`` stream."""
        tools = client.server_capabilities.tools
        if tools is None or not tools.list_changed:
            return
        # ListenNotSupportedError (an older server: it notifies instead), or the stream
        # broke because the server went away (_Watched has noticed that already).
        with contextlib.suppress(Exception):
            async with client.listen(tools_list_changed=True) as changes:
                async for _ in changes:
                    await self._relist(client)

    async def _finish_owner(self) -> None:
        owner, self._owner = self._owner, None
        if owner is None:
            return
        self._stop.set()
        _, pending = await asyncio.wait([owner], timeout=15)
        if pending:  # the SDK bounds its own shutdown; this is a last resort
            owner.cancel()
            await asyncio.wait([owner])

    # -- what to tell the model --------------------------------------------------------

    def _check(self, tool: str, expected: str) -> None:
        current = self.digests.get(tool)
        if current == expected:
            return
        change = "no longer offers" if current is None else "changed"
        raise McpToolChanged(
            f"MCP server {self.server.name!r} {change} tool {tool!r} since this agent was built, so it was not "
            "called; the agent must be built again with fresh tools (McpClient.tools())"
        )

    def _lost_message(self, tool: str) -> str:
        if self.server.command is not None:
            how, after = "exited", "the server is started again on the next call"
        else:
            how, after = "closed the connection", "tether connects again on the next call"
        return (
            f"MCP server {self.server.name!r} {how} during the call to {tool!r}, so its outcome is unknown; "
            f"{after}{self._stderr_tail()}"
        )

    def _stderr_tail(self, limit: int = 1200) -> str:
        f = self._stderr
        if f is None:
            return ""
        try:
            f.flush()
            size = os.fstat(f.fileno()).st_size
            data = os.pread(f.fileno(), limit, max(0, size - limit))
        except (OSError, ValueError):
            return ""
        text = data.decode("utf-8", errors="replace").strip()
        return f"; the end of its stderr: {text}" if text else ""

    def _drop_stderr(self) -> None:
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


def digest(tool: mcp_types.Tool) -> str:
    """A hash of what a server says about a tool (a changed one is not called)."""
    data = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    keep = {k: data.get(k) for k in ("name", "title", "description", "inputSchema", "outputSchema", "annotations")}
    return hashlib.sha256(json.dumps(keep, sort_keys=True).encode()).hexdigest()[:16]


@contextlib.asynccontextmanager
async def _watched(transport: contextlib.AbstractAsyncContextManager[Any], lost: asyncio.Event) -> AsyncIterator[Any]:
    """``transport``'s streams, with ``lost`` set as soon as the server's side ends."""
    async with transport as (read, write):
        yield _Watched(read, lost), write


class _Watched:
    """A transport's read stream that sets ``lost`` at its end; everything else passes through."""

    def __init__(self, inner: Any, lost: asyncio.Event) -> None:
        self._inner, self._lost = inner, lost

    def __getattr__(self, name: str) -> Any:  # last_context (the sender's contextvars), and the like
        return getattr(self._inner, name)

    async def receive(self) -> Any:
        import anyio

        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._lost.set()
            raise

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Watched:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@contextlib.asynccontextmanager
async def _http(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0)) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


async def _first(*waits: Any) -> None:
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"
