"""MCP servers' tools as tether tools (``pip install 'tether[mcp]'``).

Declare servers as :class:`McpServer` values, open them with an
:class:`McpClient`, and give its tools to an agent. Each MCP tool becomes a
tether :class:`~tether.Tool` whose contract follows the tool's annotations
(read-only: ``effect="none"``, no approval; idempotent: ``effect="idempotent"``
with tether's idempotency key in the request's ``_meta``; anything else:
``effect="once"`` and a human approves unless the server says it is not
destructive), overridable per server and per tool. See ``docs/mcp.md``.

>>> from tether.mcp import McpClient, McpServer
>>> servers = [McpServer("time", command="mcp-server-time"),
...            McpServer("docs", url="http://127.0.0.1:8000/mcp", approval=True)]
>>> with McpClient(servers) as client:  # doctest: +SKIP
...     agent = Agent(model, client.tools_sync())

Importing this package does not import the MCP SDK; connecting does.
"""

from __future__ import annotations

from ._client import McpClient
from ._config import McpServer, ToolRule, contract
from ._errors import McpError, McpServerLost, McpToolChanged, McpToolError, McpUnavailable
from ._results import McpBlob, McpResult
from ._tools import IDEMPOTENCY_KEY

__all__ = [
    "contract",
    "IDEMPOTENCY_KEY",
    "McpBlob",
    "McpClient",
    "McpError",
    "McpResult",
    "McpServer",
    "McpServerLost",
    "McpToolChanged",
    "McpToolError",
    "McpUnavailable",
    "ToolRule",
]
