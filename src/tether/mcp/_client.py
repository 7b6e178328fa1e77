"""The MCP client: connections to some servers, and their tools for a tether agent.

>>> client = McpClient([McpServer("time", command="mcp-server-time")])  # doctest: +SKIP
>>> agent = Agent(model, client.tools_sync())  # doctest: +SKIP
>>> client.close()  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib.util
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..exceptions import UserError, install_hint
from ..tools import Invocation, Tool
from ._config import McpServer
from ._connection import Connection
from ._errors import McpServerLost, McpToolError, McpUnavailable
from ._portal import Portal
from ._results import McpResult
from ._tools import IDEMPOTENCY_KEY, Binding, hinted, server_tools

ResultHook = Callable[[Invocation[Any], McpResult], None]
_OPEN: set[McpClient] = set()
_OPEN_LOCK = threading.Lock()


class McpClient:
    """Connections to MCP servers, kept open across runs until :meth:`close`.

    A server is started (or its HTTP session opened) the first time its tools
    are listed or called, and reused by every agent and run of this process
    afterwards; one that dies is started again on the next call. ``on_result``
    is called with every result (its images' bytes included) before the model
    sees the text. Use it as a context manager, or call :meth:`close` (or
    :meth:`aclose`); clients still open when the interpreter exits are closed
    then.

    >>> with McpClient([McpServer("time", command="mcp-server-time")]) as client:  # doctest: +SKIP
    ...     tools = client.tools_sync()
    """

    def __init__(self, servers: Iterable[McpServer], *, on_result: ResultHook | None = None) -> None:
        if importlib.util.find_spec("mcp") is None:
            raise UserError(f"tether.mcp needs the MCP SDK: {install_hint('mcp')}")
        self.servers: dict[str, McpServer] = {}
        for server in servers:
            if not isinstance(server, McpServer):
                raise UserError(f"servers must be McpServer values, got {server!r}")
            if server.name in self.servers:
                raise UserError(f"two MCP servers are named {server.name!r}")
            self.servers[server.name] = server
        for server in self.servers.values():
            if missing := server.missing_variables():
                raise UserError(f"MCP server {server.name!r} uses ${{{missing[0]}}}, which is not set")
        self.on_result = on_result
        self._portal = Portal()
        self._connections = {name: Connection(server) for name, server in self.servers.items()}
        self._closed = False
        with _OPEN_LOCK:
            _OPEN.add(self)

    @property
    def version(self) -> int:
        """Grows each time a server's tool list is read (after a change, the tools differ)."""
        return sum(c.version for c in self._connections.values())

    async def tools(self, *servers: str) -> list[Tool]:
        """The tools of every server (or of the ones named), connecting first where needed.

        Raises :class:`McpUnavailable` naming a server that cannot be started or
        reached, and ``UserError`` if two servers' tools get the same name.
        """
        names = self._names(servers)
        await self._portal.run(self._open(names))
        tools: list[Tool] = []
        for name in names:
            conn = self._connections[name]
            tools += server_tools(self.servers[name], conn.listing, conn.digests, self._run_tool)
        _check_unique(tools)
        return tools

    def tools_sync(self, *servers: str) -> list[Tool]:
        """:meth:`tools` for synchronous code."""
        return self._portal.run_sync(self.tools(*servers))

    def ungated_by_hints(self, *servers: str) -> dict[str, str]:
        """``{tool name: hint}``: the tools (of the servers listed so far) that run without
        approval only because their server says they are safe, by ``readOnlyHint`` or
        ``destructiveHint: false``. A server with ``trust="verify"`` has none."""
        out: dict[str, str] = {}
        for name in self._names(servers):
            out |= hinted(self.servers[name], self._connections[name].listing)
        return out

    async def call(
        self, server: str, tool: str, arguments: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> McpResult:
        """Call one tool directly (no tether validation, no contract) and return the whole result."""
        conn = self._connections[self._names((server,))[0]]
        async with asyncio.timeout(timeout):
            return await self._portal.run(conn.call(tool, arguments or {}))

    async def aclose(self) -> None:
        """Stop every stdio server and close every HTTP session (idempotent)."""
        if not self._closed:
            await self._portal.run(self._close_all())
            await asyncio.to_thread(self._finish)

    def close(self) -> None:
        """:meth:`aclose` for synchronous code."""
        if not self._closed:
            self._portal.run_sync(self._close_all())
            self._finish()

    def __enter__(self) -> McpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> McpClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- inside ---------------------------------------------------------------------

    async def _run_tool(self, binding: Binding, arguments: dict[str, Any], invocation: Invocation[Any]) -> Any:
        """What a tether tool built by :meth:`tools` does when the agent calls it."""
        meta = {IDEMPOTENCY_KEY: invocation.idempotency_key} if binding.effect == "idempotent" else None
        result = await self._portal.run(self._call(binding, arguments, meta))
        if self.on_result is not None:
            self.on_result(invocation, result)
        if result.is_error:
            raise McpToolError(result.text or f"MCP tool {binding.tool!r} reported an error")
        return result.content  # text, or lines and images (tether.parts.Image) the model sees

    async def _call(self, binding: Binding, arguments: dict[str, Any], meta: dict[str, Any] | None) -> McpResult:
        conn = self._connections[binding.server]
        fresh = binding.gated  # what a person approved must be what runs: no list_changed race
        try:
            return await conn.call(binding.tool, arguments, digest=binding.digest, meta=meta, fresh=fresh)
        except McpServerLost:
            if binding.effect == "once":
                raise
            # Safe to repeat: start the server again and call once more (a second loss is reported).
            return await conn.call(binding.tool, arguments, digest=binding.digest, meta=meta, fresh=fresh)

    async def _open(self, names: list[str]) -> None:
        results = await asyncio.gather(*(self._connections[n].open() for n in names), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        for failure in failures:
            if not isinstance(failure, McpUnavailable):
                raise failure
        if failures:
            raise McpUnavailable("; ".join(str(f) for f in failures))

    async def _close_all(self) -> None:
        await asyncio.gather(*(c.close() for c in self._connections.values()), return_exceptions=True)

    def _finish(self) -> None:
        self._closed = True
        self._portal.stop()
        with _OPEN_LOCK:
            _OPEN.discard(self)

    def _names(self, servers: Iterable[str]) -> list[str]:
        if self._closed:
            raise UserError("this MCP client is closed")
        names = list(servers) or list(self.servers)
        for name in names:
            if name not in self.servers:
                raise UserError(f"no MCP server named {name!r}; known: {', '.join(sorted(self.servers)) or 'none'}")
        return names


def _check_unique(tools: list[Tool]) -> None:
    seen: set[str] = set()
    for t in tools:
        if t.name in seen:
            raise UserError(f"two MCP tools are named {t.name!r}; give one of their servers another prefix")
        seen.add(t.name)


@atexit.register
def _close_open_clients() -> None:
    with _OPEN_LOCK:
        clients = list(_OPEN)
    for client in clients:
        with contextlib.suppress(Exception):  # exiting anyway: a server that will not stop gets EOF
            client.close()
