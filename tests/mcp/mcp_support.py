"""Helpers for the MCP tests (a module of its own: ``conftest`` is ambiguous across test folders).

The test server (``fixture_server.py``, on the SDK's own ``MCPServer``) records
its side effects in an oracle file; the third-party servers are the ones
``.ci/run`` installs (``mcp-server-time`` from PyPI,
``@modelcontextprotocol/server-everything`` from npm). Without them the tests
that need them are skipped, unless ``TETHER_REQUIRE_MCP_SERVERS=1`` (as in CI)
makes a missing one a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.mcp import McpServer

HERE = Path(__file__).resolve().parent
SERVER = HERE / "fixture_server.py"
NPM_DIR = Path(os.environ.get("TETHER_MCP_NPM_DIR", HERE.parents[1] / ".ci" / "npm" / "node_modules"))


class Oracle:
    """The side effects a test server recorded, one JSON object a line."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def rows(self, ev: str | None = None) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        rows = [json.loads(line) for line in self.path.read_text().splitlines() if line]
        return [r for r in rows if ev is None or r["ev"] == ev]

    def wait_for(self, ev: str, count: int = 1, timeout: float = 30) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while len(self.rows(ev)) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"the server did not record {count} {ev!r} within {timeout}s: {self.rows()}")
            time.sleep(0.02)
        return self.rows(ev)


def stdio(oracle: Oracle, name: str = "t", env: dict[str, str] | None = None, **options: Any) -> McpServer:
    """The test server over stdio, recording into ``oracle``."""
    env = {"ORACLE": str(oracle.path), **(env or {})}
    return McpServer(name, command=sys.executable, args=(str(SERVER), "stdio"), env=env, **options)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, proc: subprocess.Popen[Any], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the HTTP MCP server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


@contextlib.contextmanager
def serve_http(command: list[str], port: int, env: dict[str, str]) -> Iterator[subprocess.Popen[Any]]:
    """A server process listening on ``port`` until the block ends."""
    proc = subprocess.Popen(command, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, proc)
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


def third_party(name: str) -> str:
    """The path of an installed third-party server's command, or a skip (a failure in CI)."""
    found = shutil.which(name) or shutil.which(name, path=str(NPM_DIR / ".bin"))
    if found is None:
        message = f"{name} is not installed (bash .ci/run installs it)"
        if os.environ.get("TETHER_REQUIRE_MCP_SERVERS") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie that is not reaped yet counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False
