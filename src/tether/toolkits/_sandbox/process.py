"""Running one command and watching it: output capture, timeout, killing everything, the result.

>>> ExecResult(0, b"hi\\n", b"").ok
True
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass
from typing import Any

from .cgroups import Cgroup
from .limits import MiB, SandboxLimits
from .usage import DiskWatch, fmt_bytes

__all__ = ["ExecResult", "supervise"]

_DISK_POLL = 0.2  # seconds between two looks at the filesystem's free space


@dataclass(frozen=True, slots=True)
class ExecResult:
    """What a command did.

    ``exit_code`` is the command's status (128 + N when a signal N ended it
    inside the sandbox; negative when tether killed the sandbox itself).
    ``killed_reason`` names the limit that stopped or hobbled the command.
    Output past the cap is dropped and a marker line says how much.

    >>> ExecResult(0, b"hi\\n", b"").ok
    True
    """

    exit_code: int
    stdout: bytes
    stderr: bytes
    truncated: bool = False
    timed_out: bool = False
    killed_reason: str | None = None
    sandboxed: bool = True

    @property
    def ok(self) -> bool:
        """The command exited with status 0 before the timeout."""
        return self.exit_code == 0 and not self.timed_out


class _Capture:
    """Keeps the first ``cap`` bytes of a stream and counts the rest."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.kept = bytearray()
        self.dropped = 0

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(64 * 1024):
            room = max(self.cap - len(self.kept), 0)
            self.kept += chunk[:room]
            self.dropped += max(len(chunk) - room, 0)

    def value(self) -> bytes:
        if not self.dropped:
            return bytes(self.kept)
        return bytes(self.kept) + f"\n[... output truncated: {self.dropped} more bytes ...]\n".encode()


async def supervise(
    proc: asyncio.subprocess.Process,
    cgroup: Cgroup,
    limits: SandboxLimits,
    stdin: bytes | None,
    watch: DiskWatch,
    *,
    sandboxed: bool,
) -> ExecResult:
    """Feed ``proc``, capture its output, enforce the timeout and disk budget, kill what is left."""
    assert proc.stdout is not None and proc.stderr is not None
    out, err = _Capture(limits.output), _Capture(limits.output)
    tasks: list[asyncio.Future[Any]] = [
        asyncio.ensure_future(out.drain(proc.stdout)),
        asyncio.ensure_future(err.drain(proc.stderr)),
    ]
    if stdin is not None:
        tasks.append(asyncio.ensure_future(_feed(proc, stdin)))
    exited, disk = asyncio.ensure_future(proc.wait()), asyncio.ensure_future(_watch_disk(watch))
    tasks += [exited, disk]
    timed_out = settled = False
    try:
        try:
            async with asyncio.timeout(limits.timeout):
                await asyncio.wait([exited, disk], return_when=asyncio.FIRST_COMPLETED)
        except TimeoutError:
            timed_out = True
        disk_reason = disk.result() if disk.done() else None
        # Whatever the command left running (background jobs, a fork bomb) dies with it.
        _kill_all(proc, cgroup)
        await asyncio.wait(tasks[:-2], timeout=5.0)
        await proc.wait()
        await _emptied(cgroup)
        oom_kills = cgroup.counter("memory.oom_control", "oom_kill") + cgroup.counter("memory.events", "oom_kill")
        pid_hits = cgroup.counter("pids.events", "max")
        if disk_reason is None and watch.suspect():  # it ended over the budget: say so
            disk_reason = await asyncio.to_thread(watch.verdict)
            disk_reason = disk_reason and f"{disk_reason} (when the command ended)"
        settled = True
    finally:
        _kill_all(proc, cgroup)
        for task in tasks:
            task.cancel()
        if not settled:  # cancelled: reap it now, so its pipes close with this loop and its cgroup can go
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(_reap(proc, cgroup)), 3.0)
        cgroup.remove()
    code = proc.returncode if proc.returncode is not None else -signal.SIGKILL
    return ExecResult(
        exit_code=code,
        stdout=out.value(),
        stderr=err.value(),
        truncated=bool(out.dropped or err.dropped),
        timed_out=timed_out,
        killed_reason=disk_reason or _killed_reason(code, limits, timed_out, oom_kills, pid_hits, watch.file_room),
        sandboxed=sandboxed,
    )


async def _watch_disk(watch: DiskWatch) -> str:
    """Return (and so stop the command) once the disk budget is spent or the filesystem nearly full."""
    while True:
        await asyncio.sleep(_DISK_POLL)
        if reason := watch.low_space():
            return reason
        if watch.suspect() and (reason := await asyncio.to_thread(watch.verdict)):
            return reason


async def _emptied(cgroup: Cgroup) -> None:
    """Kill what is left in the cgroups until they are empty (for up to two seconds)."""
    for _ in range(200):
        if cgroup.kill():
            return
        await asyncio.sleep(0.01)


async def _reap(proc: asyncio.subprocess.Process, cgroup: Cgroup) -> None:
    """Wait for a killed command: its process, its pipes to EOF (so they close), its cgroups empty."""
    assert proc.stdout is not None and proc.stderr is not None
    await asyncio.gather(proc.wait(), proc.stdout.read(), proc.stderr.read())
    await _emptied(cgroup)


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.write(data)
        await proc.stdin.drain()
        proc.stdin.close()


def _kill_all(proc: asyncio.subprocess.Process, cgroup: Cgroup) -> None:
    # The pgid outlives a reaped leader only while group members remain, so this
    # never hits a stranger; the sandbox's own processes die with its pid namespace.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    cgroup.kill()


def _killed_reason(
    code: int, limits: SandboxLimits, timed_out: bool, oom_kills: int, pid_hits: int, file_room: int
) -> str | None:
    if timed_out:
        return f"wall-clock timeout ({limits.timeout:g} s)"
    if oom_kills:
        return f"memory limit ({limits.memory // MiB} MiB)"
    if code in (128 + signal.SIGXCPU, -signal.SIGXCPU):
        return f"CPU time limit ({limits.cpu_seconds} s)"
    if code in (128 + signal.SIGXFSZ, -signal.SIGXFSZ):
        if file_room < limits.file_size:
            return f"file size limit ({fmt_bytes(file_room)}: what is left of the disk or of its budget)"
        return f"file size limit ({limits.file_size // MiB} MiB)"
    if pid_hits:
        return f"process limit ({limits.processes})"
    return None
