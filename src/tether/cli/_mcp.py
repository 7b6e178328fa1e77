"""MCP servers for the command line: ``[mcp.servers.NAME]`` in the config, and ``tether mcp list``.

Servers come from the workspace's ``.tether/config.toml`` and the user's
``~/.config/tether/config.toml`` (the workspace's entry wins for a name both
declare); both are out of the agent's reach. A stdio server starts in the
directory of the file that declares it unless ``cwd`` says otherwise (a
relative ``cwd`` is read from there too), never in the workspace, whose files
the agent can change. ``run``, ``chat`` and ``resume`` give the agent every
configured server's tools (``Session.agent`` passes them to ``build_agent``),
started once per command; a server that cannot start stops the command with a
one-line error (exit status 2).

    [mcp.servers.time]
    command = "mcp-server-time"

    [mcp.servers.docs]
    url = "http://127.0.0.1:8000/mcp"
    headers = { Authorization = "Bearer ${DOCS_TOKEN}" }
    approval = true

``tether mcp list`` marks each tool that runs without approval only because its
server's annotations say it is safe; ``trust = "verify"`` takes them at nothing.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..exceptions import UserError
from ._config import Settings, load_settings, read_config, user_config_path
from ._errors import ConfigError
from ._render import visible

if TYPE_CHECKING:
    from ..mcp import McpClient, McpServer
    from ..tools import Tool

_CLIENTS: dict[str, McpClient] = {}  # one client per workspace for the life of the command


def configured_servers(settings: Settings) -> list[McpServer]:
    """The servers the config files declare (workspace entries override the user's)."""
    found: dict[str, McpServer] = {}
    for path in (user_config_path(settings.env), settings.workspace / ".tether" / "config.toml"):
        for server in _servers_in(path):
            found[server.name] = server
    return list(found.values())


def mcp_tools(settings: Settings) -> list[Tool]:
    """Every configured server's tools ([] when none is configured), or ConfigError."""
    client = _client(settings)
    if client is None:
        return []
    from ..mcp import McpUnavailable

    try:
        return client.tools_sync()
    except McpUnavailable as exc:
        raise ConfigError(str(exc)) from None


def _client(settings: Settings) -> McpClient | None:
    key = str(settings.workspace)
    if key not in _CLIENTS:
        servers = configured_servers(settings)
        if not servers:
            return None
        from ..mcp import McpClient

        try:
            _CLIENTS[key] = McpClient(servers)
        except UserError as exc:
            raise ConfigError(str(exc)) from None
    return _CLIENTS[key]


def _servers_in(path: Path) -> list[McpServer]:
    from ..mcp import McpServer

    table = read_config(path).get("mcp")
    if table is None:
        return []
    if not isinstance(table, dict) or set(table) - {"servers"} or not isinstance(table.get("servers", {}), dict):
        raise ConfigError(f"[mcp] in {str(path)!r} holds only [mcp.servers.NAME] tables")
    servers = []
    for name, entry in table.get("servers", {}).items():
        try:
            server = McpServer.from_config(name, entry, where=str(path))
        except UserError as exc:
            raise ConfigError(str(exc)) from None
        cwd = path.parent / (server.cwd or ".")
        servers.append(dataclasses.replace(server, cwd=str(cwd.resolve())) if server.command else server)
    return servers


# -- tether mcp ... ---------------------------------------------------------------------


@click.group()
def mcp() -> None:
    """MCP servers configured in .tether/config.toml ([mcp.servers.NAME])."""


@mcp.command("list")
@click.option("--workspace", "-w", metavar="DIR", help="The workspace whose config to read [default: here].")
def list_servers(workspace: str | None) -> None:
    """Start each configured server and list its tools with their contract."""
    try:
        settings = load_settings(workspace=workspace)
        servers = configured_servers(settings)
        client = _client(settings)
    except UserError as exc:
        click.echo(visible(f"error: {exc}"), err=True)
        sys.exit(2)
    if client is None:
        click.echo("no MCP servers are configured (add [mcp.servers.NAME] to .tether/config.toml)")
        return
    failed = sum(not _show(client, server) for server in servers)
    sys.exit(1 if failed else 0)


def _show(client: McpClient, server: McpServer) -> bool:
    from ..mcp import McpError

    click.echo(visible(f"{server.name}  ({server.transport}: {server.where()})"))
    try:
        tools = client.tools_sync(server.name)
    except McpError as exc:
        click.echo(visible(f"  error: {exc}"))
        return False
    width = max((len(t.name) for t in tools), default=0)
    hinted = client.ungated_by_hints(server.name)
    for t in tools:
        gate = "asks first" if t.approval else "runs freely"
        said = f"  [ungated by the server's {hinted[t.name]}]" if t.name in hinted else ""
        line = f"  {t.name:<{width}}  effect={t.effect:<10}  {gate:<11}  {_first_line(t.description)}{said}"
        click.echo(visible(line))
    if not tools:
        click.echo("  (no tools)")
    if hinted:
        click.echo(
            f"  {len(hinted)} tool(s) run without approval only because {server.name!r} says they are safe; "
            'trust = "verify" in its table asks before every call'
        )
    return True


def _first_line(text: Any) -> str:
    line = str(text).strip().splitlines()[0] if str(text).strip() else ""
    return line if len(line) <= 80 else line[:77] + "..."
