"""An MCP server's tool list as tether tools: names, contracts, and the call itself.

Each tool is built with :meth:`tether.Tool.from_schema` from the server's
definition, so the agent's fingerprint covers the server's description and
input schema (a run paused before the server changed a tool does not resume:
``StateIncompatible``), and the model's arguments are checked against the
server's schema before anything is sent. Names are ``PREFIX + tool``
(``time__get_current_time``), made names every provider accepts (characters
other than letters, digits, ``_`` and ``-`` become ``_``; a long or clashing
name ends in a short hash of the original).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..exceptions import UserError
from ..tools import Effect, Invocation, Tool
from ._config import McpServer, contract, ungated_by

if TYPE_CHECKING:
    import mcp_types

IDEMPOTENCY_KEY = "tether/idempotency-key"  # in the request's _meta, for effect="idempotent" tools
MAX_NAME = 64


@dataclass(frozen=True, slots=True)
class Binding:
    """Which server tool a tether tool calls, as the server defined it when it was built.

    ``gated``: a person approves its calls, so the server's tool list is read
    again right before each call, and a definition that changed since the tool
    was built (since the person saw the call) is not called.
    """

    server: str
    tool: str
    digest: str
    effect: Effect
    gated: bool = False


Runner = Callable[[Binding, dict[str, Any], Invocation[Any]], Awaitable[Any]]


def server_tools(
    server: McpServer, listing: Mapping[str, mcp_types.Tool], digests: Mapping[str, str], run: Runner
) -> list[Tool]:
    """The tether tools of one server's listing (``include`` / ``exclude`` applied)."""
    names = tether_names(server.tool_prefix, [n for n in listing if server.wants(n)])
    return [_tool(server, listing[mcp], name, digests[mcp], run) for mcp, name in names.items()]


def hinted(server: McpServer, listing: Mapping[str, mcp_types.Tool]) -> dict[str, str]:
    """``{tether name: hint}`` for the tools of a listing that run without approval only because
    the server's annotations say they are safe (see :func:`~tether.mcp.contract`)."""
    names = tether_names(server.tool_prefix, [n for n in listing if server.wants(n)])
    out = {}
    for mcp, name in names.items():
        spec = listing[mcp]
        hints = spec.annotations.model_dump(by_alias=True, exclude_none=True) if spec.annotations else None
        if why := ungated_by(server, mcp, hints):
            out[name] = why
    return out


def tether_names(prefix: str, tools: Iterable[str]) -> dict[str, str]:
    """``{mcp name: tether name}``: valid, at most 64 characters, and distinct.

    >>> tether_names("fs__", ["read file", "read_file"])
    {'read file': 'fs__read_file-121414', 'read_file': 'fs__read_file'}
    """
    wanted = sorted(tools, key=lambda t: (_clean(prefix, t) != prefix + t, t))
    out: dict[str, str] = {}
    for tool in wanted:
        name = _clean(prefix, tool)
        if len(name) > MAX_NAME or name in out.values():
            tag = hashlib.sha256(tool.encode()).hexdigest()[:6]
            name = f"{name[: MAX_NAME - 7]}-{tag}"
        out[tool] = name
    return dict(sorted(out.items()))


def _clean(prefix: str, tool: str) -> str:
    # Stricter than tether's names: no dots, which the big providers refuse in tool names.
    name = re.sub(r"[^A-Za-z0-9_-]", "_", prefix + tool)
    return name if re.match(r"[A-Za-z_]", name) else "_" + name


def _tool(server: McpServer, spec: mcp_types.Tool, name: str, digest: str, run: Runner) -> Tool:
    hints = spec.annotations.model_dump(by_alias=True, exclude_none=True) if spec.annotations else None
    effect, approval, timeout = contract(server, spec.name, hints)
    binding = Binding(server.name, spec.name, digest, effect, gated=approval is not False)
    schema = {k: v for k, v in spec.input_schema.items() if k != "$schema"}
    description = spec.description or spec.title or ""

    async def call(_tether_invocation: Invocation[Any], **arguments: Any) -> Any:
        return await run(binding, arguments, _tether_invocation)

    try:
        return Tool.from_schema(name, description, schema, call, effect=effect, approval=approval, timeout=timeout)
    except UserError:
        # A schema tether cannot read: show it to the model as it is, and let the server check.
        return Tool(
            name, description, schema, call, effect=effect, approval=approval, timeout=timeout,
            inject="_tether_invocation",
        )  # fmt: skip
