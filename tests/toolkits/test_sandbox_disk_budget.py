"""The workspace's disk budget and the filesystem's reserve (issue 9, item 5).

The review's attack: one ``shell`` call filled the filesystem that also holds
``.tether/runs.db``. Here a command that writes past the budget (bytes or
inodes) is stopped with a note saying which limit, a workspace already over it
does not start anything, and on a small real filesystem a command is stopped
before the last free megabytes, which the run store needs to commit.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.toolkits import Sandbox, SandboxLimits, shell_tool
from tether.toolkits._sandbox import MiB
from tether.tools import Invocation

pytestmark = pytest.mark.sandbox
CALL = Invocation(run_id="run_1", call_id="call_1", tool_name="shell")


def workspace_bytes(workspace: Path) -> int:
    return sum(p.lstat().st_blocks * 512 for p in workspace.rglob("*") if ".tether" not in p.parts)


async def test_a_command_writing_past_the_byte_budget_is_stopped(workspace: Path) -> None:
    limits = SandboxLimits(disk_bytes=20 * MiB, timeout=30.0)
    slow_fill = "for i in $(seq 200); do head -c 1048576 /dev/zero > f$i; sleep 0.05; done; echo finished"
    result = await Sandbox(str(workspace), limits=limits).run(["bash", "-c", slow_fill])
    assert result.killed_reason is not None and result.killed_reason.startswith("disk budget: the workspace holds")
    assert b"finished" not in result.stdout and not result.ok
    assert workspace_bytes(workspace) < 60 * MiB  # stopped within a few polls, not at 200 MiB
    assert (workspace / "f1").exists()  # control: it did write


async def test_a_command_making_too_many_files_is_stopped(workspace: Path) -> None:
    limits = SandboxLimits(disk_inodes=500)
    slow_touch = "for i in $(seq 3000); do : > f$i; [ $((i % 100)) = 0 ] && sleep 0.1; done; echo finished"
    result = await Sandbox(str(workspace), limits=limits).run(["bash", "-c", slow_touch])
    assert result.killed_reason is not None and result.killed_reason.startswith("inode budget: the workspace holds")
    assert b"finished" not in result.stdout
    assert len(list(workspace.iterdir())) < 3000


async def test_a_command_that_ends_over_the_budget_is_flagged(workspace: Path) -> None:
    """Too fast to be stopped between two polls: the result still says so, and nothing runs next."""
    sandbox = Sandbox(str(workspace), limits=SandboxLimits(disk_bytes=4 * MiB))
    result = await sandbox.run(["bash", "-c", "head -c 3145728 /dev/zero > a; head -c 3145728 /dev/zero > b"])
    assert result.killed_reason is not None
    assert result.killed_reason.startswith("disk budget:") and result.killed_reason.endswith("(when the command ended)")
    again = await sandbox.run(["bash", "-c", "touch ran"])
    assert again.exit_code == -1 and not (workspace / "ran").exists()


async def test_a_workspace_over_its_budget_starts_nothing_and_the_tool_says_why(workspace: Path) -> None:
    (workspace / "data.bin").write_bytes(b"x" * (3 * MiB))
    sandbox = Sandbox(str(workspace), limits=SandboxLimits(disk_bytes=2 * MiB))
    result = await sandbox.run(["bash", "-c", "touch ran"])
    assert result.exit_code == -1
    assert result.killed_reason == "not started: disk budget: the workspace holds 3.0 MiB, more than 2.0 MiB"
    assert not (workspace / "ran").exists()
    reply = await shell_tool(sandbox, approval=False).invoke({"command": "touch ran"}, CALL)
    assert reply == (
        "[stopped by the sandbox: not started: disk budget: the workspace holds 3.0 MiB, more than 2.0 MiB]\n"
        "[exit code -1]"
    )
    (workspace / "data.bin").unlink()  # freeing space lets commands run again
    assert (await sandbox.run(["bash", "-c", "touch ran"])).ok


async def test_tether_state_does_not_count_against_the_budget(workspace: Path) -> None:
    (workspace / ".tether" / "runs.db").write_bytes(b"x" * (3 * MiB))
    result = await Sandbox(str(workspace), limits=SandboxLimits(disk_bytes=2 * MiB)).run(["true"])
    assert result.ok, result


@pytest.fixture
def small_filesystem(tmp_path: Path) -> Iterator[Path]:
    """A real 96 MiB filesystem holding a workspace and a stand-in for the run store."""
    if os.geteuid() != 0:
        pytest.skip("mounting a filesystem needs root")
    mount = tmp_path / "fs"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96m", "tether-test", str(mount)], check=True)
    try:
        (mount / "ws" / ".tether").mkdir(parents=True)
        yield mount / "ws"
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


async def test_a_filling_filesystem_stops_the_command_and_leaves_room_for_the_store(small_filesystem: Path) -> None:
    ws = small_filesystem
    fill = "for i in $(seq 90); do head -c 1048576 /dev/zero > f$i || exit 1; sleep 0.05; done; echo finished"
    result = await Sandbox(str(ws)).run(["bash", "-c", fill])  # the default budget is far above 96 MiB
    assert result.killed_reason is not None, result
    assert result.killed_reason.startswith("the filesystem holding the workspace is nearly full")
    assert b"finished" not in result.stdout
    # The store beside the workspace can still commit.
    (ws / ".tether" / "runs.db").write_bytes(b"x" * (8 * MiB))
    free = os.statvfs(ws)
    assert free.f_bavail * free.f_frsize > 16 * MiB


async def test_a_nearly_full_filesystem_starts_nothing(small_filesystem: Path) -> None:
    ws = small_filesystem
    (ws / "ballast").write_bytes(b"x" * (60 * MiB))
    result = await Sandbox(str(ws)).run(["bash", "-c", "touch ran"])
    assert result.exit_code == -1 and not (ws / "ran").exists()
    assert result.killed_reason is not None
    assert result.killed_reason.startswith("not started: the filesystem holding the workspace is nearly full")


async def test_one_fast_file_cannot_fill_the_filesystem(small_filesystem: Path) -> None:
    """Faster than any poll: no single file may grow past the room above the reserve."""
    ws = small_filesystem
    result = await Sandbox(str(ws)).run(["bash", "-c", "head -c 104857600 /dev/zero > big"])
    assert result.killed_reason is not None
    assert result.killed_reason.startswith("file size limit (") and "left of the disk" in result.killed_reason
    free = os.statvfs(ws)
    assert free.f_bavail * free.f_frsize >= 32 * MiB


async def test_one_file_cannot_outgrow_the_budget(workspace: Path) -> None:
    result = await Sandbox(str(workspace), limits=SandboxLimits(disk_bytes=4 * MiB)).run(
        ["bash", "-c", "head -c 16777216 /dev/zero > big"]
    )
    assert result.killed_reason is not None and result.killed_reason.startswith("file size limit (")
    assert (workspace / "big").stat().st_size <= 4 * MiB
