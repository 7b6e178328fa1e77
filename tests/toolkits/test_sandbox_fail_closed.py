"""Fail closed: no working bubblewrap, no command runs.

Unless the developer explicitly passes ``unsafe_no_sandbox=True``, which warns
and marks every result as unsandboxed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.exceptions import SandboxUnavailable, TetherError
from tether.toolkits import (
    Sandbox,
    UnsandboxedWarning,
    probe_sandbox,
    python_tool,
    shell_tool,
    workspace_tools,
)
from tether.tools import Invocation

CALL = Invocation(run_id="run_1", call_id="call_1", tool_name="shell")
OPTIONS = "--unshare-all --share-net --cap-drop --die-with-parent --new-session --clearenv --uid"


def fake_bwrap(directory: Path, body: str) -> Path:
    """A stand-in `bwrap` that answers --help like a real one, then does ``body``.

    ``directory`` must be one any user may enter (``open_tmp``): a root tether
    starts bubblewrap as an unprivileged uid.
    """
    path = directory / "bwrap"
    path.write_text(f'#!/bin/sh\n[ "$1" = --help ] && {{ echo "{OPTIONS}"; exit 0; }}\n{body}\n')
    path.chmod(0o755)
    return path


def test_sandbox_unavailable_is_a_tether_error() -> None:
    assert issubclass(SandboxUnavailable, TetherError)


async def test_missing_bwrap_on_path_refuses_everything(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    reason = probe_sandbox()
    assert reason is not None and "apt-get install bubblewrap" in reason
    with pytest.raises(SandboxUnavailable, match="bubblewrap not found"):
        workspace_tools(str(workspace))
    with pytest.raises(SandboxUnavailable):
        await Sandbox(str(workspace)).run(["bash", "-c", "touch ran"])
    assert not (workspace / "ran").exists()


@pytest.mark.parametrize("factory", [shell_tool, python_tool])
def test_missing_bwrap_path_refuses_the_command_tools(workspace: Path, factory: object) -> None:
    sandbox = Sandbox(str(workspace), bwrap="/nonexistent/bwrap")
    with pytest.raises(SandboxUnavailable, match=r"not found at '/nonexistent/bwrap'"):
        factory(sandbox)  # type: ignore[operator]


async def test_bwrap_that_fails_its_probe_is_refused(workspace: Path, open_tmp: Path) -> None:
    bwrap = fake_bwrap(open_tmp, 'echo "bwrap: setting up uid map: Permission denied" >&2; exit 1')
    sandbox = Sandbox(str(workspace), bwrap=str(bwrap))
    with pytest.raises(SandboxUnavailable, match="setting up uid map: Permission denied"):
        sandbox.check()
    with pytest.raises(SandboxUnavailable):
        await sandbox.run(["bash", "-c", "touch ran"])
    assert not (workspace / "ran").exists()


@pytest.mark.sandbox
async def test_bwrap_that_does_not_isolate_is_refused(workspace: Path, open_tmp: Path) -> None:
    """A `bwrap` that just runs the command (keeping root's capabilities) fails the probe."""
    bwrap = fake_bwrap(open_tmp, 'while [ "$1" != -- ]; do shift; done; shift; exec "$@"')
    with pytest.raises(SandboxUnavailable, match="failed its probe"):
        await Sandbox(str(workspace), bwrap=str(bwrap)).run(["bash", "-c", "touch ran"])
    assert not (workspace / "ran").exists()


async def test_unsafe_opt_out_runs_warns_and_says_so(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.warns(UnsandboxedWarning, match="WITHOUT a sandbox"):
        tools = {t.name: t for t in workspace_tools(str(workspace), unsafe_no_sandbox=True)}
    shell = tools["shell"]
    reply = await shell.invoke({"command": "touch ran && echo done"}, CALL)
    assert reply == "done\n[ran on the host WITHOUT a sandbox (unsafe_no_sandbox=True)]"
    assert (workspace / "ran").exists()
    assert "directly on the host" in shell.description
