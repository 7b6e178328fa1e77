"""The shell and python tools as a model sees them, running in the real sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.toolkits import SandboxLimits, workspace_tools
from tether.tools import Tool

from .conftest import call

pytestmark = pytest.mark.sandbox


@pytest.fixture
def tools(workspace: Path) -> dict[str, Tool]:
    limits = SandboxLimits(timeout=5.0, output=4096)
    return {t.name: t for t in workspace_tools(str(workspace), limits=limits)}


def test_contracts(workspace: Path) -> None:
    tools = {t.name: t for t in workspace_tools(str(workspace))}
    assert {n: (tools[n].effect, tools[n].approval) for n in ("shell", "python")} == {
        "shell": ("once", True),
        "python": ("once", True),
    }
    assert tools["shell"].timeout == 40.0  # the sandbox's own 30 s, plus room to clean up
    assert "no network access" in tools["shell"].description
    gated = {t.name for t in workspace_tools(str(workspace), approval=False) if t.approval}
    assert gated == set()


async def test_shell_reports_output_stderr_and_exit_code(tools: dict[str, Tool]) -> None:
    reply = await call(tools["shell"], command="wc -l < hello.txt; echo oops >&2; exit 3")
    assert reply == "2\n[stderr]\noops\n[exit code 3]"
    assert await call(tools["shell"], command="true") == "(no output)"


async def test_shell_describes_binary_output(tools: dict[str, Tool]) -> None:
    reply = await call(tools["shell"], command="head -c 300 /dev/urandom; printf '\\0'")
    assert reply == "<binary output, 301 bytes>"


async def test_shell_shows_truncation_and_timeouts(tools: dict[str, Tool]) -> None:
    reply = await call(tools["shell"], command="yes | head -c 10000")
    assert reply.endswith("[... output truncated: 5904 more bytes ...]")
    reply = await call(tools["shell"], command="echo start; sleep 30")
    assert reply == "start\n[stopped by the sandbox: wall-clock timeout (5 s)]"


async def test_python_runs_code_in_a_fresh_isolated_interpreter(tools: dict[str, Tool], workspace: Path) -> None:
    code = (
        "import sys, os\nprint(sys.flags.isolated, os.getcwd() == os.environ['PWD'])\nopen('out.txt', 'w').write('hi')"
    )
    assert await call(tools["python"], code=code) == "1 True"
    assert (workspace / "out.txt").read_text() == "hi"
    reply = await call(tools["python"], code="raise ValueError('boom')")
    assert reply.endswith("ValueError: boom\n[exit code 1]")
