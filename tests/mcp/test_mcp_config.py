"""Declaring servers: validation, the TOML form, tool names, and the annotation-to-contract table."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tether import UserError
from tether.mcp import McpServer, ToolRule, contract
from tether.mcp._tools import tether_names


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"name": "two words", "command": "x"}, "must match"),
        ({"name": "a"}, "needs a command (stdio) or a url (streamable HTTP)"),
        ({"name": "a", "command": "x", "url": "http://h/mcp"}, "has both a command and a url"),
        ({"name": "a", "url": "ftp://h/mcp"}, "must start with http:// or https://"),
        ({"name": "a", "command": "x", "effect": "twice"}, "effect must be one of"),
        ({"name": "a", "command": "x", "timeout": 0}, "timeout must be positive"),
        ({"name": "a", "command": "x", "prefix": "9lives"}, "prefix '9lives'"),
        ({"name": "a", "command": "x", "protocol": "2024"}, "protocol must be 'auto' or 'legacy'"),
    ],
)
def test_a_server_declaration_is_checked_when_it_is_made(kwargs: dict[str, Any], says: str) -> None:
    with pytest.raises(UserError, match=re.escape(says)):
        McpServer(**kwargs)


def test_the_toml_table_gives_the_same_server() -> None:
    table = {
        "command": "npx",
        "args": ["-y", "server"],
        "env": {"TOKEN": "${TOKEN}"},
        "approval": True,
        "timeout": 30,
        "tools": {"read": {"approval": False, "effect": "none"}},
        "exclude": ["dangerous"],
    }
    server = McpServer.from_config("fs", table)
    assert server == McpServer(
        "fs",
        command="npx",
        args=("-y", "server"),
        env={"TOKEN": "${TOKEN}"},
        approval=True,
        timeout=30,
        tools={"read": ToolRule(approval=False, effect="none")},
        exclude=("dangerous",),
    )
    assert not server.wants("dangerous") and server.wants("read")
    assert "${TOKEN}" not in repr(server)  # env and headers may hold secrets: never shown


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ({"command": "x", "colour": "red"}, "unknown setting 'colour' for MCP server 's' in config; known: approval"),
        ({"command": 5}, "setting 'command' for MCP server 's' in config has the wrong type: 5"),
        ({"command": "x", "timeout": True}, "setting 'timeout'"),
        ({"command": "x", "args": ["a", 1]}, "'args' of MCP server 's' in config must be a list of strings"),
        ({"command": "x", "env": {"A": 1}}, "'env' of MCP server 's' in config must map names to strings"),
        ({"command": "x", "tools": {"t": {"retries": 3}}}, "unknown setting 'retries' for tool 't'"),
        ({"command": "x", "tools": {"t": {"effect": "often"}}}, "effect must be one of"),
    ],
)
def test_a_bad_toml_table_names_what_is_wrong(table: dict[str, Any], says: str) -> None:
    with pytest.raises(UserError, match=re.escape(says)):
        McpServer.from_config("s", table)


@pytest.mark.parametrize(
    ("hints", "contract_"),
    [
        (None, ("once", True)),
        ({}, ("once", True)),
        ({"readOnlyHint": True}, ("none", False)),
        ({"readOnlyHint": True, "destructiveHint": True}, ("none", False)),  # destructive means nothing when read-only
        ({"idempotentHint": True}, ("idempotent", True)),  # destructive unless it says otherwise
        ({"idempotentHint": True, "destructiveHint": False}, ("idempotent", False)),
        ({"destructiveHint": True}, ("once", True)),
        ({"destructiveHint": False}, ("once", False)),
        ({"openWorldHint": True}, ("once", True)),
    ],
)
def test_annotations_map_onto_the_contract(hints: dict[str, Any] | None, contract_: tuple[str, bool]) -> None:
    effect, approval, timeout = contract(McpServer("s", command="x"), "t", hints)
    assert (effect, approval, timeout) == (*contract_, 120.0)


def test_overrides_win_in_order_hints_then_server_then_tool() -> None:
    server = McpServer("s", command="x", effect="once", approval=True, timeout=9, tools={"t": ToolRule(approval=False)})
    assert contract(server, "t", {"readOnlyHint": True}) == ("once", False, 9)
    assert contract(server, "u", {"readOnlyHint": True}) == ("once", True, 9)
    gate = lambda args, ctx: bool(args)  # noqa: E731
    assert contract(McpServer("s", command="x", tools={"t": ToolRule(approval=gate)}), "t", None)[1] is gate


def test_tool_names_are_valid_short_and_distinct() -> None:
    long = "x" * 80
    names = tether_names("srv__", ["get time", "get_time", long, "9lives", "ünï", "repo.search"])
    assert names["get_time"] == "srv__get_time"
    assert names["repo.search"] == "srv__repo_search"  # no dots: providers refuse them
    assert names["get time"].startswith("srv__get_time-") and len(names["get time"]) == len("srv__get_time") + 7
    assert len(names[long]) == 64
    assert tether_names("", ["9lives"]) == {"9lives": "_9lives"}
    assert len(set(names.values())) == len(names)
