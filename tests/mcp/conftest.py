"""Fixtures for the MCP tests: real servers, over stdio and streamable HTTP on loopback.

The helpers live in ``mcp_support.py``. This directory has no ``__init__.py`` on
purpose: a package named ``mcp`` here would shadow the MCP SDK for every test.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_support import SERVER, Oracle, free_port, serve_http, stdio

from tether.mcp import McpServer


@pytest.fixture
def oracle(tmp_path: Path) -> Oracle:
    return Oracle(tmp_path / "oracle.jsonl")


@pytest.fixture
def http_url(oracle: Oracle) -> Iterator[str]:
    """The test server over streamable HTTP on a loopback port of its own."""
    port = free_port()
    with serve_http([sys.executable, str(SERVER), "http", str(port)], port, {"ORACLE": str(oracle.path)}):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(params=["stdio", "http"])
def server(request: pytest.FixtureRequest, oracle: Oracle) -> McpServer:
    """The test server, once over each transport."""
    if request.param == "stdio":
        return stdio(oracle)
    return McpServer("t", url=request.getfixturevalue("http_url"))
