"""What the workspace holds before a command, and how much disk the command takes while it runs.

One walk of the workspace before each command finds every ``.git`` (so each is
mounted read-only, nested repositories included) and counts its bytes and
inodes against ``SandboxLimits.disk_bytes`` / ``disk_inodes``. The walk goes by
directory descriptor and fails closed (:mod:`tether.toolkits._walk`): when it
cannot look at the whole workspace, no command starts, and one running is stopped. No single file
may grow past the room left (``RLIMIT_FSIZE``). While the command runs,
:class:`DiskWatch` polls the filesystem's free space (cheap); only when that
says the budget may be gone does it walk again, to be sure before stopping
anything. Whatever the budget, a command is stopped when the filesystem itself
runs nearly full, so the run store beside the workspace can still commit.

>>> fmt_bytes(3 * 1024**3)
'3.0 GiB'
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from .._walk import WalkFailed, retrying, shorten, walk
from .limits import MiB, SandboxLimits

__all__ = [
    "DISK_RESERVE",
    "INODE_RESERVE",
    "MAX_MOUNTED_PATH",
    "DiskWatch",
    "Usage",
    "fmt_bytes",
    "over_budget",
    "scan",
]

DISK_RESERVE = 64 * MiB  # free space a command may never take from the filesystem
INODE_RESERVE = 4096
MAX_MOUNTED_PATH = 3072  # bytes of a .git's relative path; the workspace's own path must fit in the rest
_HIDDEN = ".tether"  # not the agent's: not counted, and hidden from the sandbox


@dataclass(frozen=True, slots=True)
class Usage:
    """The workspace's size (``.tether`` left out) and its ``.git`` entries, relative paths.

    ``problem`` says why the walk could not finish (then the rest is incomplete
    and no command may start on it).

    >>> Usage(4096, 1).git_entries
    ()
    """

    bytes: int
    inodes: int
    git_entries: tuple[str, ...] = ()
    problem: str | None = None


def scan(workspace: str, max_inodes: int | None = None) -> Usage:
    """Walk ``workspace`` (by descriptor, no links followed): its bytes, inodes and every ``.git``.

    A walk that cannot look at everything (see :mod:`tether.toolkits._walk`) is
    tried again a few times, then reported in ``Usage.problem``; so is a
    workspace of more than ``max_inodes`` entries (the walk stops there).
    """
    try:
        return retrying(lambda: _scan(workspace, max_inodes))
    except WalkFailed as exc:
        return Usage(0, 0, problem=f"cannot look at the whole workspace: {exc}")
    except _TooMany:
        return Usage(
            0, (max_inodes or 0) + 1, problem=f"inode budget: the workspace holds more than {max_inodes} files"
        )


class _TooMany(Exception):
    pass


def _scan(workspace: str, max_inodes: int | None) -> Usage:
    size, inodes, gits = 0, 0, []
    for found in walk(workspace, skip=_HIDDEN.__eq__):
        st = found.stat
        size, inodes = size + st.st_blocks * 512, inodes + 1
        if max_inodes is not None and inodes > max_inodes:
            raise _TooMany
        is_dir = stat.S_ISDIR(st.st_mode)
        # Only the outermost .git of a path: what lies inside one is mounted with it.
        if found.name == ".git" and (is_dir or stat.S_ISREG(st.st_mode)) and "/.git/" not in f"/{found.rel}":
            if len(found.rel.encode()) > MAX_MOUNTED_PATH:  # bubblewrap could not name it to mount it
                raise WalkFailed(f"{shorten(found.rel)!r} is too deep to be mounted read-only")
            gits.append(found.rel)
    return Usage(size, inodes, tuple(sorted(gits)))


def over_budget(usage: Usage, limits: SandboxLimits) -> str | None:
    """Why ``usage`` is over the limits' disk budget (or could not be measured), or None."""
    if usage.problem is not None:
        return usage.problem
    if usage.bytes > limits.disk_bytes:
        return f"disk budget: the workspace holds {fmt_bytes(usage.bytes)}, more than {fmt_bytes(limits.disk_bytes)}"
    if usage.inodes > limits.disk_inodes:
        return f"inode budget: the workspace holds {usage.inodes} files, more than {limits.disk_inodes}"
    return None


def fmt_bytes(n: int) -> str:
    """A byte count for people: ``'512 KiB'``, ``'3.0 GiB'``."""
    if n < MiB:
        return f"{n // 1024} KiB"
    if n < 1024 * MiB:
        return f"{n / MiB:.1f} MiB"
    return f"{n / (1024 * MiB):.1f} GiB"


class DiskWatch:
    """Watches the workspace's filesystem while one command runs.

    ``suspect()`` is a ``statvfs`` (microseconds) and says whether the budget may
    be spent; ``verdict()`` walks the workspace to be sure (run it in a thread).
    Writes by anyone else to the same filesystem can make it suspect, never
    convict: only the workspace's own size counts against the budget. The
    filesystem running nearly full always convicts.
    """

    def __init__(self, workspace: str, limits: SandboxLimits, before: Usage) -> None:
        self.workspace = workspace
        self.limits = limits
        self.before = before
        self.start = os.statvfs(workspace)
        self.file_room = limits.file_size

    def low_space(self) -> str | None:
        """Why the filesystem is too full for a command to run or go on, or None."""
        now = os.statvfs(self.workspace)
        free, inodes = now.f_bavail * now.f_frsize, now.f_favail
        if free < DISK_RESERVE:
            return f"the filesystem holding the workspace is nearly full ({fmt_bytes(free)} free)"
        if now.f_files and inodes < INODE_RESERVE:
            return f"the filesystem holding the workspace is out of inodes ({inodes} free)"
        return None

    def room(self) -> int:
        """The most one file may grow to: the file size limit, the budget left, the space above the reserve."""
        now = os.statvfs(self.workspace)
        free = now.f_bavail * now.f_frsize - DISK_RESERVE
        self.file_room = max(min(self.limits.file_size, free, self.limits.disk_bytes - self.before.bytes), 4096)
        return self.file_room

    def suspect(self) -> bool:
        """Whether the filesystem grew enough since the start that the budget may be spent."""
        now = os.statvfs(self.workspace)
        grown = (self.start.f_bfree - now.f_bfree) * now.f_frsize
        new_inodes = self.start.f_ffree - now.f_ffree
        return (
            self.before.bytes + grown > self.limits.disk_bytes
            or self.before.inodes + new_inodes > self.limits.disk_inodes
        )

    def verdict(self) -> str | None:
        """Why the command must be stopped, or None; walks the workspace (slow: call from a thread)."""
        if reason := self.low_space():
            return reason
        start, now = os.statvfs(self.workspace), scan(self.workspace, self.limits.disk_inodes)
        if reason := over_budget(now, self.limits):
            return reason
        self.before, self.start = now, start  # someone else wrote to the filesystem: re-base
        return None
