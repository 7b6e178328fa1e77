"""Resource limits for one command, and the launcher that applies them before anything runs.

:class:`SandboxLimits` is the value; :func:`launcher_argv` is the command prefix
(a short bash script) that joins the command's cgroups, arms a watchdog and sets
the rlimits, then execs bubblewrap (or, unsandboxed, the command itself).

>>> SandboxLimits(timeout=10.0).timeout
10.0
"""

from __future__ import annotations

import os
import resource
import shutil
from collections.abc import Sequence
from dataclasses import dataclass

from ...exceptions import SandboxUnavailable, UserError

__all__ = ["HELPER_PATH", "MiB", "SandboxLimits", "helper", "launcher_argv"]

MiB = 1 << 20
HELPER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Resource limits for one sandboxed command.

    ``memory`` caps each process's address space and, when a memory cgroup can be
    made, the whole sandbox. ``processes`` needs a writable pids cgroup (or a
    non-root user). ``output`` caps stdout and stderr separately.
    ``disk_bytes`` and ``disk_inodes`` are the workspace's budget (its whole size,
    ``.tether`` left out): a command does not start when the workspace is over it,
    and is stopped when it goes over.

    >>> SandboxLimits(timeout=10.0, memory=256 * MiB).cpu_seconds
    30
    """

    timeout: float = 30.0
    cpu_seconds: int = 30
    memory: int = 512 * MiB
    file_size: int = 256 * MiB
    open_files: int = 256
    processes: int = 64
    output: int = 1 * MiB
    tmp_size: int = 64 * MiB
    disk_bytes: int = 8 * 1024 * MiB
    disk_inodes: int = 500_000

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            if getattr(self, name) <= 0:
                raise UserError(f"sandbox limit {name!r} must be positive")


def helper(name: str) -> str | None:
    """Where the helper program ``name`` (bash, setpriv) is, on PATH or in the system directories.

    >>> helper("no-such-helper-program") is None
    True
    """
    return shutil.which(name) or shutil.which(name, path=HELPER_PATH)


# The first program in the child, a bash script (dash cannot name fds above 9). Arguments:
# PARENT_PID ALIVE_FD CPU MEMORY_KIB FILE_KIB NOFILE NPROC|- CGROUP_DIR... -- ARGV.
# 1. If our parent is already gone (kill -9 right after fork) nobody will clean up: stop.
# 2. Join the cgroups, then fork a watchdog that moves itself back out of them and waits for
#    EOF on a pipe whose write end only our parent holds: when the parent dies, even by kill -9,
#    it kills everything in the cgroups. (bwrap's --die-with-parent is armed a few milliseconds
#    too late to cover a crash during startup.)
# 3. Set the rlimits (CPU: SIGXCPU at the soft limit names the cause, SIGKILL a second later)
#    and exec the rest.
_LAUNCHER = """
read -r _ _ _ ppid _ < /proc/$$/stat; [ "$ppid" = "$1" ] || exit 125
fd=$2 cpu=$3 mem=$4 fsize=$5 nofile=$6 nproc=$7; shift 7
dirs=(); while [ "$1" != -- ]; do dirs+=("$1"); shift; done; shift
for d in "${dirs[@]}"; do
  echo $$ 2>/dev/null > "$d/cgroup.procs" || { echo "tether: cannot join $d" >&2; exit 125; }
done
if [ ${#dirs[@]} -gt 0 ]; then
  ( exec </dev/null >/dev/null 2>&1
    for d in "${dirs[@]}"; do echo $BASHPID > "${d%/*}/cgroup.procs"; done
    read -r _ <&"$fd"
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      victims=()
      for d in "${dirs[@]}"; do
        [ -e "$d/cgroup.procs" ] || continue
        while read -r pid; do [ "$pid" = $BASHPID ] || victims+=("$pid"); done < "$d/cgroup.procs"
      done
      [ ${#victims[@]} -eq 0 ] && break
      kill -9 "${victims[@]}"; sleep 0.05
    done ) &
fi
exec {fd}<&-
ulimit -c 0 -v "$mem" -f "$fsize" -n "$nofile" -t $((cpu + 1)) && ulimit -S -t "$cpu" || exit 125
if [ "$nproc" != - ]; then ulimit -u "$nproc" || exit 125; fi
exec "$@"
"""


def launcher_argv(cgroup_dirs: Sequence[str], alive_fd: int, limits: SandboxLimits) -> list[str]:
    """The command prefix that applies ``limits`` and joins ``cgroup_dirs`` before exec'ing the rest.

    ``alive_fd`` is the read end of a pipe only this process writes to: when it
    closes (this process died), the watchdog kills everything in the cgroups.
    """
    bash = helper("bash")
    if bash is None:
        raise SandboxUnavailable("'bash' not found")
    prefix: list[str] = []
    if not cgroup_dirs:  # no watchdog: at least arm "die with parent" before anything else runs
        setpriv = helper("setpriv")
        if setpriv is None:
            raise SandboxUnavailable("'setpriv' (util-linux) not found; install util-linux")
        prefix = [setpriv, "--pdeathsig", "KILL", "--"]
    cpu = _clamp(resource.RLIMIT_CPU, limits.cpu_seconds + 1) - 1
    # RLIMIT_NPROC counts per user namespace for non-root users; host root is exempt from it.
    nproc = str(_clamp(resource.RLIMIT_NPROC, limits.processes)) if os.geteuid() != 0 else "-"
    numbers = [
        cpu,
        _clamp(resource.RLIMIT_AS, limits.memory) // 1024,
        _clamp(resource.RLIMIT_FSIZE, limits.file_size) // 1024,
        _clamp(resource.RLIMIT_NOFILE, limits.open_files),
    ]
    return [
        *(*prefix, bash, "-c", _LAUNCHER, "tether-sandbox", str(os.getpid()), str(alive_fd)),
        *(str(n) for n in numbers),
        *(nproc, *cgroup_dirs, "--"),
    ]


def _clamp(which: int, value: int) -> int:
    """``value``, or less when our own hard limit is lower (it cannot be raised)."""
    hard = resource.getrlimit(which)[1]
    return value if hard == resource.RLIM_INFINITY else min(value, hard)
