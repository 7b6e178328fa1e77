"""Declaring MCP servers: how to reach each one, and what its tools may do.

An :class:`McpServer` is a value: a stdio server (``command``, ``args``,
``env``) or a streamable-HTTP server (``url``, ``headers``), plus the contract
its tools get in tether. By default the contract comes from the tool's MCP
annotations (see :func:`contract`); ``effect``, ``approval`` and ``timeout``
override it for the whole server, and :class:`ToolRule` entries in ``tools``
override it per tool. ``McpServer.from_config`` reads the same fields from a
``[mcp.servers.NAME]`` table of ``.tether/config.toml``.

>>> McpServer("time", command="mcp-server-time").tool_prefix
'time__'
>>> McpServer.from_config("docs", {"url": "http://127.0.0.1:8000/mcp", "approval": True}).approval
True
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from ..exceptions import UserError
from ..tools import EFFECTS, Approval, Effect

DEFAULT_TIMEOUT = 120.0
MAX_RESULT_BYTES = 8 * 2**20
_SERVER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,31}")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True, slots=True)
class ToolRule:
    """Overrides for one tool of a server; ``None`` keeps what the server's settings give.

    >>> ToolRule(approval=True, timeout=10.0).effect is None
    True
    """

    effect: Effect | None = None
    approval: Approval | None = None
    timeout: float | None = None

    def __post_init__(self) -> None:
        if self.effect is not None and self.effect not in EFFECTS:
            raise UserError(f"effect must be one of {sorted(EFFECTS)}, got {self.effect!r}")
        if self.timeout is not None and not self.timeout > 0:
            raise UserError(f"timeout must be positive, got {self.timeout!r}")


@dataclass(frozen=True, slots=True)
class McpServer:
    """One MCP server: a command to run over stdio, or a URL (streamable HTTP).

    ``env`` is added to a scrubbed environment (``HOME``, ``LOGNAME``, ``PATH``,
    ``SHELL``, ``TERM``, ``USER``); ``inherit_env=True`` passes this process's
    whole environment instead. ``${VAR}`` in ``env`` and ``headers`` values is
    read from this process's environment when the server is started.

    >>> McpServer("fs", command="npx", args=("-y", "some-mcp-server", "."))  # doctest: +ELLIPSIS
    McpServer(name='fs', command='npx', args=('-y', 'some-mcp-server', '.'), ...)
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    inherit_env: bool = False
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    prefix: str | None = None  # tether names are PREFIX + the tool's name; default "NAME__"
    effect: Effect | None = None
    approval: bool | None = None
    timeout: float | None = DEFAULT_TIMEOUT
    connect_timeout: float = 30.0
    include: tuple[str, ...] | None = None  # only these tools (by their MCP names)
    exclude: tuple[str, ...] = ()
    tools: Mapping[str, ToolRule] = field(default_factory=dict)
    protocol: Literal["auto", "legacy"] = "auto"  # legacy: the 2025 handshake, no discovery probe
    trust: Literal["hints", "verify"] = "hints"  # verify: the server's annotations are not believed
    max_result_bytes: int = MAX_RESULT_BYTES  # a stdio reply over this is left out, with a note

    def __post_init__(self) -> None:
        if not _SERVER_NAME.fullmatch(self.name):
            raise UserError(f"MCP server name {self.name!r} must match {_SERVER_NAME.pattern}")
        if self.command is None and self.url is None:
            raise UserError(f"MCP server {self.name!r} needs a command (stdio) or a url (streamable HTTP)")
        if self.command is not None and self.url is not None:
            raise UserError(f"MCP server {self.name!r} has both a command and a url; give one")
        if self.url is not None and not re.match(r"https?://", self.url):
            raise UserError(f"MCP server {self.name!r}: url must start with http:// or https://, got {self.url!r}")
        if self.effect is not None and self.effect not in EFFECTS:
            raise UserError(f"MCP server {self.name!r}: effect must be one of {sorted(EFFECTS)}")
        if isinstance(self.max_result_bytes, bool) or not self.max_result_bytes > 0:
            raise UserError(f"MCP server {self.name!r}: max_result_bytes must be a positive number of bytes")
        if self.trust not in ("hints", "verify"):
            raise UserError(f"MCP server {self.name!r}: trust must be 'hints' or 'verify', got {self.trust!r}")
        if self.trust == "verify" and self.approval is False:
            raise UserError(
                f"MCP server {self.name!r}: trust='verify' asks before every call, approval=false says never; "
                "drop one (a tool you vouch for can get approval=false in its own rule)"
            )
        if self.protocol not in ("auto", "legacy"):
            raise UserError(f"MCP server {self.name!r}: protocol must be 'auto' or 'legacy', got {self.protocol!r}")
        for label, value in (("timeout", self.timeout), ("connect_timeout", self.connect_timeout)):
            if value is not None and not value > 0:
                raise UserError(f"MCP server {self.name!r}: {label} must be positive, got {value!r}")
        if self.prefix is not None and not re.fullmatch(r"([A-Za-z_][A-Za-z0-9_-]{0,39})?", self.prefix):
            raise UserError(f"MCP server {self.name!r}: prefix {self.prefix!r} must be a short tool-name start")
        object.__setattr__(self, "args", tuple(self.args))
        if self.include is not None:
            object.__setattr__(self, "include", tuple(self.include))
        object.__setattr__(self, "exclude", tuple(self.exclude))

    @property
    def tool_prefix(self) -> str:
        """What every tether tool name of this server starts with."""
        return f"{self.name}__" if self.prefix is None else self.prefix

    @property
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        return "stdio" if self.command is not None else "http"

    def where(self) -> str:
        """The command line or the URL, for messages."""
        return " ".join((self.command or "", *self.args)) if self.command is not None else str(self.url)

    def wants(self, tool: str) -> bool:
        """Whether the server's tool named ``tool`` is offered (``include`` / ``exclude``)."""
        return (self.include is None or tool in self.include) and tool not in self.exclude

    def missing_variables(self) -> list[str]:
        """The ``${VAR}`` names in ``env`` and ``headers`` that this environment does not set."""
        text = " ".join((*self.env.values(), *self.headers.values()))
        return sorted({v for v in _VAR.findall(text) if v not in os.environ})

    def expanded(self, values: Mapping[str, str]) -> dict[str, str]:
        """``values`` with each ``${VAR}`` replaced from the environment."""
        return {k: _VAR.sub(lambda m: os.environ.get(m.group(1), ""), v) for k, v in values.items()}

    @classmethod
    def from_config(cls, name: str, table: Mapping[str, Any], *, where: str = "config") -> McpServer:
        """A server from a ``[mcp.servers.NAME]`` TOML table; unknown or mistyped keys raise ``UserError``."""
        return cls(name=name, **_checked(name, table, where))


def contract(
    server: McpServer, tool: str, annotations: Mapping[str, Any] | None
) -> tuple[Effect, Approval, float | None]:
    """``(effect, approval, timeout)`` of one tool: its MCP hints, then the server's and the tool's overrides.

    ``readOnlyHint`` means ``effect="none"`` and no approval; otherwise
    ``idempotentHint`` means ``"idempotent"`` and anything else ``"once"``, and
    a human approves unless the server says ``destructiveHint: false`` (MCP's
    default for a tool that is not read-only is destructive).

    >>> contract(McpServer("s", command="x"), "t", {"readOnlyHint": True})
    ('none', False, 120.0)
    >>> contract(McpServer("s", command="x"), "t", None)
    ('once', True, 120.0)

    A server with ``trust="verify"`` is not believed: every tool is ``"once"``
    and asks first, whatever its hints say (your own overrides still apply).

    >>> contract(McpServer("s", command="x", trust="verify"), "t", {"readOnlyHint": True})
    ('once', True, 120.0)
    """
    hints = annotations or {}
    if server.trust == "verify":
        effect: Effect = "once"
        approval: Approval = True
    elif hints.get("readOnlyHint") is True:
        effect, approval = "none", False
    else:
        effect = "idempotent" if hints.get("idempotentHint") is True else "once"
        approval = hints.get("destructiveHint") is not False
    rule = server.tools.get(tool, ToolRule())
    effect = rule.effect or server.effect or effect
    if server.approval is not None:
        approval = server.approval
    if rule.approval is not None:
        approval = rule.approval
    return effect, approval, rule.timeout if rule.timeout is not None else server.timeout


def ungated_by(server: McpServer, tool: str, annotations: Mapping[str, Any] | None) -> str:
    """The server's hint that alone lets ``tool`` run without approval, or "" (it asks first, or
    your config says it need not): what ``tether mcp list`` flags, and what ``trust="verify"`` undoes.

    >>> ungated_by(McpServer("s", command="x"), "t", {"readOnlyHint": True})
    'readOnlyHint'
    >>> ungated_by(McpServer("s", command="x", trust="verify"), "t", {"readOnlyHint": True})
    ''
    """
    hints = annotations or {}
    rule = server.tools.get(tool, ToolRule())
    if server.trust == "verify" or server.approval is not None or rule.approval is not None:
        return ""
    if hints.get("readOnlyHint") is True:
        return "readOnlyHint"
    return "destructiveHint: false" if hints.get("destructiveHint") is False else ""


_KEYS: dict[str, type | tuple[type, ...]] = {
    "command": str,
    "args": list,
    "env": dict,
    "inherit_env": bool,
    "cwd": str,
    "url": str,
    "headers": dict,
    "prefix": str,
    "effect": str,
    "approval": bool,
    "timeout": (int, float),
    "connect_timeout": (int, float),
    "include": list,
    "exclude": list,
    "tools": dict,
    "protocol": str,
    "trust": str,
    "max_result_bytes": int,
}
_RULE_KEYS: dict[str, type | tuple[type, ...]] = {"effect": str, "approval": bool, "timeout": (int, float)}


def _checked(name: str, table: Mapping[str, Any], where: str) -> dict[str, Any]:
    if not isinstance(table, Mapping):
        raise UserError(f"MCP server {name!r} in {where} must be a table")
    kwargs = _typed(table, _KEYS, f"MCP server {name!r} in {where}")
    for key in ("args", "include", "exclude"):
        if key in kwargs:
            kwargs[key] = tuple(_strings(kwargs[key], f"{key!r} of MCP server {name!r} in {where}"))
    for key in ("env", "headers"):
        if key in kwargs and not all(isinstance(v, str) for v in kwargs[key].values()):
            raise UserError(f"{key!r} of MCP server {name!r} in {where} must map names to strings")
    rules = kwargs.pop("tools", {})
    kwargs["tools"] = {
        tool: ToolRule(**_typed(rule, _RULE_KEYS, f"tool {tool!r} of MCP server {name!r} in {where}"))
        for tool, rule in rules.items()
    }
    return kwargs


def _typed(table: Any, keys: Mapping[str, type | tuple[type, ...]], what: str) -> dict[str, Any]:
    if not isinstance(table, Mapping):
        raise UserError(f"{what} must be a table")
    unknown = sorted(set(table) - set(keys))
    if unknown:
        raise UserError(f"unknown setting {unknown[0]!r} for {what}; known: {', '.join(sorted(keys))}")
    for key, value in table.items():
        if not isinstance(value, keys[key]) or (isinstance(value, bool) and keys[key] is not bool):
            raise UserError(f"setting {key!r} for {what} has the wrong type: {value!r}")
    return dict(table)


def _strings(values: Any, what: str) -> list[str]:
    if not all(isinstance(v, str) for v in cast(list[Any], values)):
        raise UserError(f"{what} must be a list of strings")
    return list(values)
