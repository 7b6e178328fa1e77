"""What can go wrong with an MCP server, as tether exceptions.

Raised while setting up (listing tools), these are the developer's to fix.
Raised inside a call, tether's loop turns them into the call's error note, so
the model reads what happened and the run goes on::

    TetherError
    └── McpError                 anything about an MCP server
        ├── McpUnavailable       the server cannot be started or reached
        ├── McpServerLost        the server went away during a call (outcome unknown)
        ├── McpToolChanged       the server changed or removed the tool since it was listed
        └── McpToolError         the server answered the call with ``isError``
"""

from __future__ import annotations

from ..exceptions import TetherError


class McpError(TetherError):
    """Base class of the MCP client's errors."""


class McpUnavailable(McpError):
    """The server could not be started, reached, or did not finish its handshake in time."""


class McpServerLost(McpError):
    """The connection ended while a call was in flight: the server may or may not have acted."""


class McpToolChanged(McpError):
    """The server's definition of a tool differs from the one a tether tool was built from."""


class McpToolError(McpError):
    """The server ran the tool and reported an error (MCP ``isError``), or refused the request."""
