"""Resource limits, timeouts and clean-up of the real sandbox.

"No leftovers" is checked by marker strings in command lines: after a run, no
host process may still carry the run's marker. Deadlines below are liveness
bounds from the contract (gone within 2 s), not performance measurements.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

import tether
from tether.toolkits import Sandbox, SandboxLimits
from tether.toolkits._sandbox import MiB
from tether.toolkits._sandbox.cgroups import cgroup_bases as _cgroup_bases
from tether.toolkits._sandbox.identity import _stage_parent, _sweep_stale_stages

pytestmark = pytest.mark.sandbox

Finder = Callable[[str], list[int]]
WORKER = Path(__file__).with_name("sandbox_worker.py")


def marker() -> str:
    return f"tether-marker-{uuid.uuid4().hex[:12]}"


def gone_within(processes_with: Finder, mark: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while processes_with(mark):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def has_controller(name: str) -> bool:
    return any(name in controllers for _, controllers in _cgroup_bases())


def start_worker(workspace: Path, timeout: float, command: str) -> subprocess.Popen[str]:
    src = str(Path(tether.__file__).parent.parent)
    env = {**os.environ, "PYTHONPATH": src}
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(workspace), str(timeout), command],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.mark.skipif(not has_controller("pids"), reason="no writable pids cgroup here")
async def test_fork_bomb_is_contained_and_fully_reaped(workspace: Path, processes_with: Finder) -> None:
    mark = marker()
    limits = SandboxLimits(processes=32, timeout=10.0)
    bomb = f"bomb() {{ bomb | bomb & }}; bomb; sleep 1; : {mark}"
    result = await Sandbox(str(workspace), limits=limits).run(["bash", "-c", bomb])
    assert result.killed_reason == "process limit (32)", result
    assert b"fork" in result.stderr  # "fork: retry: Resource temporarily unavailable"
    assert gone_within(processes_with, mark, 2.0), [_cmdline(p) for p in processes_with(mark)]


async def test_memory_bomb_fails_at_the_cap(workspace: Path) -> None:
    limits = SandboxLimits(memory=256 * MiB)
    code = "x = bytearray(4 << 30)"
    result = await Sandbox(str(workspace), limits=limits).run(["python3", "-c", code])
    assert result.exit_code != 0
    assert b"MemoryError" in result.stderr


@pytest.mark.skipif(not has_controller("memory"), reason="no writable memory cgroup here")
async def test_memory_of_all_processes_together_is_capped(workspace: Path) -> None:
    """Per-process address space alone would allow 4 x 200 MiB; the cgroup stops the sum."""
    limits = SandboxLimits(memory=256 * MiB)
    hog = "python3 -c 'import time; x = b\"x\" * (200 << 20); time.sleep(5)'"
    command = f"for i in 1 2 3 4; do {hog} & done; wait"
    result = await Sandbox(str(workspace), limits=limits).run(["bash", "-c", command])
    assert result.killed_reason == "memory limit (256 MiB)"


async def test_cpu_loop_is_killed_at_the_cpu_limit(workspace: Path) -> None:
    limits = SandboxLimits(cpu_seconds=1)
    result = await Sandbox(str(workspace), limits=limits).run(["python3", "-c", "while True: pass"])
    assert result.killed_reason == "CPU time limit (1 s)"
    assert not result.timed_out


async def test_file_size_is_capped(workspace: Path) -> None:
    limits = SandboxLimits(file_size=1 * MiB)
    result = await Sandbox(str(workspace), limits=limits).run(["bash", "-c", "head -c 5000000 /dev/zero > big.bin"])
    assert result.killed_reason == "file size limit (1 MiB)"
    assert (workspace / "big.bin").stat().st_size <= 1 * MiB


async def test_output_is_capped_with_a_marker(workspace: Path) -> None:
    limits = SandboxLimits(output=1000)
    result = await Sandbox(str(workspace), limits=limits).run(
        ["bash", "-c", "yes | head -c 50000; yes err | head -c 3000 >&2"]
    )
    assert result.exit_code == 0 and result.truncated
    assert result.stdout.startswith(b"y\n" * 500)
    assert result.stdout.endswith(b"\n[... output truncated: 49000 more bytes ...]\n")
    assert result.stderr.endswith(b"\n[... output truncated: 2000 more bytes ...]\n")


def test_a_gigabyte_of_output_keeps_the_worker_small(workspace: Path) -> None:
    worker = start_worker(workspace, 60.0, "yes | head -c 1000000000; echo")
    out, _ = worker.communicate(timeout=120)
    report = json.loads(out.splitlines()[-1])
    assert report["truncated"] is True
    assert report["stdout_bytes"] < 1 * MiB + 100
    assert report["stdout_tail"].endswith("[... output truncated: 998951425 more bytes ...]\n")
    assert report["max_rss_mib"] < 200


async def test_wall_timeout_kills_everything(workspace: Path, processes_with: Finder) -> None:
    mark = marker()
    limits = SandboxLimits(timeout=1.0)
    command = f"sleep 30 & (sleep 31; : {mark}) & sleep 32; : {mark}"
    result = await Sandbox(str(workspace), limits=limits).run(["bash", "-c", command])
    assert result.timed_out
    assert result.killed_reason == "wall-clock timeout (1 s)"
    assert gone_within(processes_with, mark, 2.0)


async def test_background_jobs_end_with_the_command(workspace: Path, processes_with: Finder) -> None:
    mark = marker()
    command = f"(sleep 30; : {mark}) & echo started"
    result = await Sandbox(str(workspace)).run(["bash", "-c", command])
    assert result.stdout == b"started\n" and not result.timed_out
    assert gone_within(processes_with, mark, 2.0)


async def test_cancelling_a_run_kills_the_sandbox(workspace: Path, processes_with: Finder) -> None:
    mark = marker()
    run = asyncio.create_task(Sandbox(str(workspace)).run(["bash", "-c", f"sleep 30; : {mark}"]))
    while not processes_with(mark):
        await asyncio.sleep(0.02)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert gone_within(processes_with, mark, 2.0)
    await Sandbox(str(workspace)).run(["true"])  # sweeps a cgroup the cancellation left
    for base, _ in _cgroup_bases():
        assert not [n for n in os.listdir(base) if n.startswith(f"tether-{os.getpid()}-")]


@pytest.mark.parametrize("delay", [0.0, 0.002, 0.005, 0.01, 0.02, 0.05, None])
def test_no_orphans_after_the_worker_is_killed(workspace: Path, processes_with: Finder, delay: float | None) -> None:
    """C.26: kill -9 the worker while it starts or runs a command; nothing survives it.

    ``delay`` is how long after the worker starts the run to kill it (None: once the
    sandboxed command is running), covering the window before bwrap is up.
    """
    mark = marker()
    worker = start_worker(workspace, 60.0, f"(sleep 300; : {mark}) & sleep 300; : {mark}")
    assert worker.stdout is not None and worker.stdout.readline() == "started\n"
    if delay is None:
        deadline = time.monotonic() + 10
        while not any(b"sleep 300" in _cmdline(pid) for pid in processes_with(mark)):
            assert time.monotonic() < deadline, "the sandboxed command never started"
            time.sleep(0.01)
    else:
        time.sleep(delay)
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    worker.stdout.close()
    assert gone_within(processes_with, mark, 2.0), [_cmdline(p) for p in processes_with(mark)]
    # The dead worker's cgroups are swept by the next command.
    asyncio.run(Sandbox(str(workspace)).run(["true"]))
    for base, _ in _cgroup_bases():
        assert not [n for n in os.listdir(base) if n.startswith(f"tether-{worker.pid}-")]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return b""


def test_the_mount_helper_dies_with_tether(workspace: Path, processes_with: Finder) -> None:
    """A root tether keeps a mount helper; kill -9 tether and the helper exits, its stage is swept."""
    if os.geteuid() != 0:
        pytest.skip("only a root tether starts the mount helper")
    mark = marker()
    worker = start_worker(workspace, 60.0, f"sleep 300; : {mark}")
    assert worker.stdout is not None and worker.stdout.readline() == "started\n"
    deadline = time.monotonic() + 10
    while not (helpers := [p for p in processes_with("holder.py") if _parent(p) == worker.pid]):
        assert time.monotonic() < deadline, "no mount helper started"
        time.sleep(0.01)
    stages = [d for d in os.listdir(_stage_parent()) if d.startswith(f"tether-stage-{worker.pid}-")]
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    worker.stdout.close()
    assert gone_within(processes_with, mark, 2.0)
    deadline = time.monotonic() + 2
    while any(_running(p) for p in helpers):
        assert time.monotonic() < deadline, "the mount helper outlived tether"
        time.sleep(0.02)
    assert stages, "the helper's stage directory was not where expected"
    _sweep_stale_stages()  # what the next root tether does when it starts its own helper
    assert not [d for d in stages if os.path.exists(os.path.join(_stage_parent(), d))]


def _running(pid: int) -> bool:
    """Alive and not a zombie (an exited orphan waits for init to reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1
