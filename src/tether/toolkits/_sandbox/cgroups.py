"""Per-command pids and memory cgroups, made when the hierarchy is writable, and their clean-up.

Each command gets its own cgroup under ours (``tether-<pid>-<n>``), so the whole
sandbox can be counted, capped and killed at once. Cgroups left by a tether
process that died are swept before the next command makes its own.

>>> Cgroup().kill()  # no cgroup made: nothing to kill
True
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import re
import signal
from dataclasses import dataclass

from .limits import SandboxLimits

__all__ = ["Cgroup", "cgroup_bases"]

_counter = itertools.count()
_active: set[str] = set()  # this process's cgroups in use; any other of ours is left over


@dataclass(frozen=True, slots=True)
class Cgroup:
    """The pids/memory cgroup directories made for one command (maybe none)."""

    dirs: tuple[str, ...] = ()

    @classmethod
    def create(cls, limits: SandboxLimits) -> Cgroup:
        """Make and configure this command's cgroups wherever we may (none is fine)."""
        settings = {
            "pids": {"pids.max": limits.processes},
            "memory": {
                "memory.limit_in_bytes": limits.memory,  # v1
                "memory.memsw.limit_in_bytes": limits.memory,  # v1 with swap accounting
                "memory.max": limits.memory,  # v2
                "memory.swap.max": 0,  # v2
            },
        }
        made: list[str] = []
        name = f"tether-{os.getpid()}-{next(_counter)}"
        for base, controllers in cgroup_bases():
            _sweep_stale(base)
            path = os.path.join(base, name)
            try:
                os.mkdir(path)
            except OSError:
                continue
            wanted = {file: v for c in controllers for file, v in settings[c].items()}
            if _configure(path, wanted):
                made.append(path)
                _active.add(path)
            else:
                _rmdir(path)
        return cls(tuple(made))

    def counter(self, file: str, key: str) -> int:
        """The sum of ``key``'s value in ``file`` over the cgroups (``oom_kill`` in ``memory.events``)."""
        total = 0
        for d in self.dirs:
            for line in _read(os.path.join(d, file)).splitlines():
                name, _, value = line.partition(" ")
                if name == key and value.strip().isdigit():
                    total += int(value)
        return total

    def kill(self) -> bool:
        """SIGKILL every process in the cgroups; True when they were already empty."""
        empty = True
        for d in self.dirs:
            for pid in _read(os.path.join(d, "cgroup.procs")).split():
                empty = False
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        return empty

    def remove(self) -> None:
        """Remove the directories (a later sweep retries those still busy)."""
        for d in self.dirs:
            _rmdir(d)  # may fail while killed processes still exit; the next sweep retries
            _active.discard(d)


@functools.cache
def cgroup_bases() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Our own cgroup directories (and their controllers) to nest per-command cgroups in."""
    bases: dict[str, list[str]] = {}
    v2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
    for line in _read("/proc/self/cgroup").splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        if v2 and hierarchy == "0":
            base = "/sys/fs/cgroup" + path.rstrip("/")
            enabled = _read(os.path.join(base, "cgroup.controllers")).split()
            bases[base] = [c for c in ("pids", "memory") if c in enabled]
        elif not v2:
            for c in controllers.split(","):
                base = f"/sys/fs/cgroup/{c}{path.rstrip('/')}"
                if c in ("pids", "memory") and os.path.isdir(base):
                    bases.setdefault(base, []).append(c)
    return tuple((base, tuple(cs)) for base, cs in bases.items() if cs)


def _configure(path: str, settings: dict[str, int]) -> bool:
    wrote_any = False
    for file, value in settings.items():
        target = os.path.join(path, file)
        if not os.path.exists(target):
            continue
        try:
            with open(target, "w") as f:
                f.write(str(value))
            wrote_any = True
        except OSError:
            if file in ("pids.max", "memory.limit_in_bytes", "memory.max"):
                return False
    return wrote_any


def _sweep_stale(base: str) -> None:
    """Remove cgroups left by tether processes that died (kill -9 leaves them behind),
    and our own that could not be removed at once (after a cancellation)."""
    with contextlib.suppress(OSError):
        for name in os.listdir(base):
            m = re.fullmatch(r"tether-(\d+)-\d+", name)
            path = os.path.join(base, name)
            if not m or path in _active:
                continue
            owner = int(m.group(1))
            if owner == os.getpid():
                _rmdir(path)
            elif not _alive(owner):
                stale = Cgroup((path,))
                stale.kill()  # a backstop: the sandbox should have died with its parent
                stale.remove()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _rmdir(path: str) -> None:
    with contextlib.suppress(OSError):
        os.rmdir(path)


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""
