"""Fixtures for the toolkit tests: a workspace, host canaries and a sandbox factory.

Sandbox tests use the real bubblewrap; they fail (not skip) when it is missing,
so a CI machine without it cannot pass by accident. Deselect them with
``-m "not sandbox"`` on a machine without bubblewrap.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tether.toolkits import Sandbox, SandboxLimits
from tether.tools import Invocation, Tool

CALL = Invocation(run_id="run_1", call_id="call_1", tool_name="test")


async def call(tool: Tool, **args: object) -> str:
    """Invoke ``tool`` as the loop does (validated arguments) and return its text reply."""
    result = await tool.invoke(tool.validate(dict(args)), CALL)
    assert isinstance(result, str)
    return result


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / ".tether").mkdir()
    (ws / ".tether" / "hmac.key").write_text("canary-hmac-key-3f9a\n")
    (ws / "hello.txt").write_text("hello\nworld\n")
    return ws


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A temporary directory every user may enter (pytest's own are root-only).

    A root tether runs bubblewrap and the sandbox as an unprivileged uid, so what
    they must reach from the host side lives here.
    """
    path = Path(tempfile.mkdtemp(prefix="tether-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A host directory next to the workspace, holding a canary secret."""
    out = tmp_path / "outside"
    out.mkdir()
    (out / "id_rsa").write_text("canary-secret-7c1e\n")
    return out


@pytest.fixture
def sandbox(workspace: Path) -> Sandbox:
    return Sandbox(str(workspace), limits=SandboxLimits(timeout=20.0))


@dataclass
class Canary:
    """A TCP server on host loopback that counts every connection it accepts."""

    port: int
    connections: int = 0


@pytest.fixture
def canary_server() -> Iterator[Canary]:
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    canary = Canary(server.getsockname()[1])
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            canary.connections += 1
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield canary
    stop.set()
    thread.join()
    server.close()


@pytest.fixture
def processes_with() -> object:
    """``processes_with(marker)``: host pids whose command line contains ``marker``."""
    return _processes_with


def _processes_with(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(pid))
    return found
