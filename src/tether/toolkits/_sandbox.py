"""The OS sandbox that the ``shell`` and ``python`` tools run in.

A command runs under bubblewrap in fresh user, pid, network, ipc, uts and mount
namespaces, as uid 65534 with every capability dropped, ``no_new_privs`` set and a
seccomp filter refusing keyrings, BPF, io_uring, mounts and similar. It sees a
read-only system (``/usr``, ``/etc`` minus the files the host keeps from other
users, and the ``/bin`` and ``/lib`` links), a private ``/proc``, ``/dev`` and
``/tmp``, and the workspace read-write except ``.git`` (read-only) and ``.tether``
(hidden). Everything else on the host (``/root``, ``/home``, the host's ``/tmp``,
``/var``, ``/run``...) is simply absent.

Limits: rlimits cap CPU seconds, address space, file size and open files;
when the cgroup hierarchy is writable each command also gets its own pids and
memory cgroup (RLIMIT_NPROC does nothing for a host-root sandbox). A wall-clock
timeout kills the whole sandbox, and output is captured up to a byte cap.

There is no silent fallback: without a working bubblewrap, :meth:`Sandbox.run`
raises :class:`~tether.exceptions.SandboxUnavailable` unless the sandbox was made
with ``unsafe_no_sandbox=True``.

>>> sandbox = Sandbox("/path/to/project")  # doctest: +SKIP
>>> result = await sandbox.run(["bash", "-c", "ls | wc -l"])  # doctest: +SKIP
>>> result.exit_code, result.stdout  # doctest: +SKIP
(0, b'12\\n')
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import itertools
import os
import re
import resource
import shutil
import signal
import stat
import struct
import subprocess
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..exceptions import SandboxUnavailable, UserError

__all__ = [
    "ExecResult",
    "Sandbox",
    "SandboxLimits",
    "SandboxUnavailable",
    "UnsandboxedWarning",
    "probe_sandbox",
]

MiB = 1 << 20
SANDBOX_UID = 65534  # "nobody": not root inside, so nothing owned by uid 0 there is ours
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
READ_ONLY_ENTRIES = (".git",)  # inside the workspace: visible, not writable
HIDDEN_ENTRIES = (".tether",)  # inside the workspace: replaced by an empty directory
INSTALL_HINT = (
    "install it with `apt-get install bubblewrap` (Debian/Ubuntu) or `dnf install bubblewrap` "
    "(Fedora), or pass unsafe_no_sandbox=True to run commands on the host without isolation"
)
_SYSTEM_PATHS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# bwrap itself covers /proc/irq, /proc/bus and /proc/sysrq-trigger, but not /proc/sys.
_PROC_READ_ONLY = ("sys", "sysrq-trigger", "fs", "scsi", "acpi", "mtrr", "pressure")
_HELPER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_REQUIRED_OPTIONS = (
    "--unshare-all",
    "--cap-drop",
    "--die-with-parent",
    "--new-session",
    "--clearenv",
)


class UnsandboxedWarning(RuntimeWarning):
    """Commands will run on the host without isolation (``unsafe_no_sandbox=True``)."""


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Resource limits for one sandboxed command.

    ``memory`` caps each process's address space and, when a memory cgroup can be
    made, the whole sandbox. ``processes`` needs a writable pids cgroup (or a
    non-root user). ``output`` caps stdout and stderr separately.

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

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            if getattr(self, name) <= 0:
                raise UserError(f"sandbox limit {name!r} must be positive")


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
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True, slots=True)
class Sandbox:
    """Where and how commands run: a workspace, limits and isolation settings.

    ``read_only_paths`` adds host paths the command may read (say ``/opt/tools``).
    ``bwrap`` is the bubblewrap executable, looked up on ``PATH`` unless it
    contains a slash. ``unsafe_no_sandbox=True`` runs commands directly on the
    host (same limits, scrubbed environment, no isolation).

    >>> Sandbox("/path/to/project", network=False).limits.timeout  # doctest: +SKIP
    30.0
    """

    workspace: str
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    network: bool = False
    read_only_paths: tuple[str, ...] = ()
    bwrap: str = "bwrap"
    unsafe_no_sandbox: bool = False

    def __post_init__(self) -> None:
        root = os.path.realpath(os.fspath(self.workspace))
        if not os.path.isdir(root):
            raise UserError(f"workspace {self.workspace!r} is not a directory")
        if any(_is_within(system, root) for system in _SYSTEM_PATHS):
            raise UserError(f"workspace {root!r} would make system directories writable")
        object.__setattr__(self, "workspace", root)
        object.__setattr__(self, "read_only_paths", tuple(self.read_only_paths))
        if self.unsafe_no_sandbox:
            warnings.warn(
                f"commands in {root!r} will run on the host WITHOUT a sandbox "
                "(unsafe_no_sandbox=True): no isolation, only resource limits",
                UnsandboxedWarning,
                stacklevel=3,
            )

    def check(self) -> None:
        """Raise SandboxUnavailable unless commands can run (isolated, or unsafe by choice)."""
        if not self.unsafe_no_sandbox and (reason := probe_sandbox(self.bwrap)):
            raise SandboxUnavailable(reason)

    async def run(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes | None = None,
        limits: SandboxLimits | None = None,
    ) -> ExecResult:
        """Run ``argv`` in the workspace and return its result; never leaves processes behind."""
        if not argv:
            raise UserError("Sandbox.run needs a non-empty argv")
        limits = limits or self.limits
        seccomp: int | None = None
        if self.unsafe_no_sandbox:
            prefix: list[str] = []
        else:
            probe = await asyncio.to_thread(_find, self.bwrap)
            if isinstance(probe, str):
                raise SandboxUnavailable(probe)
            seccomp = _seccomp_fd(probe)
            prefix = _bwrap_argv(probe, self, seccomp)
        cgroup = _Cgroup.create(limits)
        # Only this process holds the write end; its death (even kill -9) closes it.
        alive_r, alive_w = os.pipe()
        try:
            command = [*_launcher_argv(cgroup, alive_r, limits), *prefix, *argv]
            proc = await asyncio.create_subprocess_exec(
                *command,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.workspace,
                env=_scrubbed_env(self.workspace) if self.unsafe_no_sandbox else {"PATH": _HELPER_PATH},
                start_new_session=True,  # one process group to kill on timeout
                pass_fds=(alive_r, *_fds(seccomp)),
            )
        except BaseException:
            os.close(alive_w)
            cgroup.remove()
            raise
        finally:
            for fd in (alive_r, *_fds(seccomp)):
                os.close(fd)
        try:
            return await _supervise(proc, cgroup, limits, stdin, sandboxed=not self.unsafe_no_sandbox)
        finally:
            os.close(alive_w)


def probe_sandbox(bwrap: str = "bwrap") -> str | None:
    """Why sandboxed commands cannot run here, or None when they can.

    The probe runs a real sandbox once per bubblewrap binary and checks that it
    starts, has no capabilities and cannot write ``/``.

    >>> probe_sandbox("/nonexistent/bwrap")  # doctest: +ELLIPSIS
    "bubblewrap not found at '/nonexistent/bwrap'; install it with ..."
    """
    found = _find(bwrap)
    return found if isinstance(found, str) else None


# --- probing ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Bwrap:
    path: str
    options: frozenset[str]


def _find(bwrap: str) -> _Bwrap | str:
    """A working bubblewrap named ``bwrap``, or the reason there is none."""
    path = shutil.which(bwrap)
    if path is None:
        where = f"at {bwrap!r}" if "/" in bwrap else f"on PATH (looked for {bwrap!r})"
        return f"bubblewrap not found {where}; {INSTALL_HINT}"
    return _probe(os.path.realpath(path))


@functools.cache
def _probe(path: str) -> _Bwrap | str:
    """A working bubblewrap at ``path``, or the reason there is none (cached per path)."""
    if missing := [name for name in ("setpriv", "bash") if not _helper(name)]:
        return f"{' and '.join(missing)} not found; install util-linux and bash"
    try:
        help_text = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10, env={}).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot run bubblewrap at {path!r}: {exc}; {INSTALL_HINT}"
    options = frozenset(re.findall(r"--[a-z][a-z0-9-]*", help_text))
    if missing := [o for o in _REQUIRED_OPTIONS if o not in options]:
        return f"bubblewrap at {path!r} is too old (missing {', '.join(missing)}); {INSTALL_HINT}"
    bwrap = _Bwrap(path, options)
    check = r'grep -Eq "^CapEff:[[:space:]]*0+$" /proc/self/status && ! touch /probe 2>/dev/null'
    with tempfile.TemporaryDirectory(prefix="tether-probe-") as ws:
        seccomp = _seccomp_fd(bwrap)
        argv = [*_bwrap_argv(bwrap, Sandbox(ws), seccomp), "sh", "-c", check]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=10, env={}, pass_fds=_fds(seccomp))
        except (OSError, subprocess.SubprocessError) as exc:
            return f"bubblewrap at {path!r} failed its probe: {exc}"
        finally:
            if seccomp is not None:
                os.close(seccomp)
    if done.returncode != 0:
        detail = done.stderr.strip()[:300] or f"exit status {done.returncode}"
        return (
            f"bubblewrap at {path!r} failed its probe ({detail}); the sandbox needs user "
            "namespaces (sysctl user.max_user_namespaces > 0, and on Ubuntu "
            "kernel.apparmor_restrict_unprivileged_userns=0)"
        )
    return bwrap


def _helper(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=_HELPER_PATH)


# --- command lines ----------------------------------------------------------------------


def _bwrap_argv(bwrap: _Bwrap, box: Sandbox, seccomp_fd: int | None) -> list[str]:
    ws = box.workspace
    argv = [bwrap.path, "--unshare-all"]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    if box.network:
        argv.append("--share-net")
    uid = str(SANDBOX_UID)
    argv += ["--unshare-user", "--uid", uid, "--gid", uid, "--cap-drop", "ALL"]
    if "--disable-userns" in bwrap.options:
        argv.append("--disable-userns")  # no nested namespace in which to regain capabilities
    argv += ["--die-with-parent", "--new-session", "--hostname", "sandbox"]
    argv += _read_only_binds(_SYSTEM_PATHS)
    for path, is_dir in _restricted("/etc"):
        argv += ["--tmpfs", path] if is_dir else ["--ro-bind", "/dev/null", path]
    if box.network and os.path.islink("/etc/resolv.conf"):
        real = os.path.realpath("/etc/resolv.conf")
        argv += ["--ro-bind-try", real, real]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    # The sandbox uid maps to the host uid running tether; for root, file permissions alone
    # would let it write global sysctls (kernel.core_pattern runs a program as host root).
    for name in _PROC_READ_ONLY:
        argv += ["--ro-bind-try", f"/proc/{name}", f"/proc/{name}"]
    if "--size" in bwrap.options:
        argv += ["--size", str(box.limits.tmp_size)]
    argv += ["--tmpfs", "/tmp"]
    argv += _read_only_binds(box.read_only_paths)  # after /tmp, so they may live there
    argv += ["--bind", ws, ws]
    for name in READ_ONLY_ENTRIES:
        path = os.path.join(ws, name)
        if os.path.lexists(path) and not os.path.islink(path):
            argv += ["--ro-bind", path, path]
    for name in HIDDEN_ENTRIES:
        path = os.path.join(ws, name)
        if os.path.isdir(path) and not os.path.islink(path):
            argv += ["--tmpfs", path, "--remount-ro", path]
        elif os.path.lexists(path) and not os.path.islink(path):
            argv += ["--ro-bind", "/dev/null", path]
    argv += ["--remount-ro", "/"]  # the sandbox's own root; otherwise a writable tmpfs
    argv += ["--chdir", ws, "--clearenv"]
    for key, value in _scrubbed_env(ws).items():
        argv += ["--setenv", key, value]
    return [*argv, "--"]


def _read_only_binds(paths: Sequence[str]) -> list[str]:
    argv: list[str] = []
    for path in paths:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            argv += ["--ro-bind", path, path]
    return argv


@functools.cache
def _restricted(root: str) -> tuple[tuple[str, bool], ...]:
    """Entries under ``root`` the host hides from other users: (path, is_dir).

    The sandbox's uid maps to the host user running tether, so it could read
    that user's private files (``/etc/shadow`` for root); they are masked.
    """
    found: list[tuple[str, bool]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in list(dirnames):
            st = os.lstat(os.path.join(dirpath, name))
            if stat.S_ISDIR(st.st_mode) and (st.st_mode & 0o005) != 0o005:
                found.append((os.path.join(dirpath, name), True))
                dirnames.remove(name)
        for name in filenames:
            st = os.lstat(os.path.join(dirpath, name))
            if stat.S_ISREG(st.st_mode) and not st.st_mode & stat.S_IROTH:
                found.append((os.path.join(dirpath, name), False))
    return tuple(found)


def _scrubbed_env(workspace: str) -> dict[str, str]:
    """The whole environment a command gets: nothing inherited, so no keys or tokens."""
    return {
        "PATH": SANDBOX_PATH,
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "PWD": workspace,
        "PYTHONDONTWRITEBYTECODE": "1",
    }


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


def _launcher_argv(cgroup: _Cgroup, alive_fd: int, limits: SandboxLimits) -> list[str]:
    bash = _helper("bash")
    if bash is None:
        raise SandboxUnavailable("'bash' not found")
    prefix: list[str] = []
    if not cgroup.dirs:  # no watchdog: at least arm "die with parent" before anything else runs
        setpriv = _helper("setpriv")
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
        *(nproc, *cgroup.dirs, "--"),
    ]


def _clamp(which: int, value: int) -> int:
    """``value``, or less when our own hard limit is lower (it cannot be raised)."""
    hard = resource.getrlimit(which)[1]
    return value if hard == resource.RLIM_INFINITY else min(value, hard)


def _fds(fd: int | None) -> tuple[int, ...]:
    return () if fd is None else (fd,)


def _is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


# --- seccomp ----------------------------------------------------------------------------

# Syscalls refused with EPERM: kernel keyrings (shared with the host user), kernel modules and
# kexec, BPF, perf, userfaultfd and io_uring (large attack surface), file handles, mounts,
# namespaces, swap, reboot, accounting. Numbers for (x86_64, aarch64); None: not on that arch.
_DENIED_SYSCALLS: dict[str, tuple[int, int | None]] = {
    "add_key": (248, 217), "request_key": (249, 218), "keyctl": (250, 219),
    "init_module": (175, 105), "finit_module": (313, 273), "delete_module": (176, 106),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294), "bpf": (321, 280),
    "perf_event_open": (298, 241), "userfaultfd": (323, 282), "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "open_by_handle_at": (304, 265), "name_to_handle_at": (303, 264),
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "fsopen": (430, 430),
    "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "move_mount": (429, 429), "open_tree": (428, 428), "mount_setattr": (442, 442),
    "setns": (308, 268), "swapon": (167, 224), "swapoff": (168, 225), "reboot": (169, 142),
    "acct": (163, 89), "quotactl": (179, 60), "lookup_dcookie": (212, 18),
    "syslog": (103, 116), "vhangup": (153, 58), "uselib": (134, None),
}  # fmt: skip
_AUDIT_ARCH = {"x86_64": (0xC000003E, 0), "aarch64": (0xC00000B7, 1)}


@functools.cache
def _seccomp_program() -> bytes | None:
    """A classic-BPF seccomp filter for this machine, or None on an architecture we lack numbers for."""
    arch = _AUDIT_ARCH.get(os.uname().machine)
    if arch is None:
        return None
    audit_arch, column = arch
    numbers = sorted({nr for nrs in _DENIED_SYSCALLS.values() if (nr := nrs[column]) is not None})
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JGE|K, BPF_RET|K
    allow, deny, kill = 4 + len(numbers), 5 + len(numbers), 6 + len(numbers)
    program = [
        (ld, 0, 0, 4),  # 0: A = seccomp_data.arch
        (jeq, 0, kill - 2, audit_arch),  # 1: another ABI (i386, x32 via int 0x80): kill
        (ld, 0, 0, 0),  # 2: A = seccomp_data.nr
        (jge, deny - 4, 0, 0x40000000),  # 3: x32 syscall numbers: refuse
        *((jeq, deny - (4 + i) - 1, 0, nr) for i, nr in enumerate(numbers)),
        (ret, 0, 0, 0x7FFF0000),  # allow: SECCOMP_RET_ALLOW
        (ret, 0, 0, 0x00050000 | errno.EPERM),  # deny: SECCOMP_RET_ERRNO
        (ret, 0, 0, 0x80000000),  # kill: SECCOMP_RET_KILL_PROCESS
    ]
    assert program[allow][3] == 0x7FFF0000 and all(max(i[1], i[2]) < 256 for i in program)
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in program)


def _seccomp_fd(bwrap: _Bwrap) -> int | None:
    """A pipe read end holding the filter for bwrap's ``--seccomp`` (None: no filter)."""
    program = _seccomp_program()
    if program is None or "--seccomp" not in bwrap.options:
        return None
    r, w = os.pipe()
    os.write(w, program)  # a few hundred bytes: fits the pipe buffer
    os.close(w)
    return r


# --- cgroups ----------------------------------------------------------------------------

_counter = itertools.count()
_active: set[str] = set()  # this process's cgroups in use; any other of ours is left over


@dataclass(frozen=True, slots=True)
class _Cgroup:
    """The pids/memory cgroup directories made for one command (maybe none)."""

    dirs: tuple[str, ...] = ()

    @classmethod
    def create(cls, limits: SandboxLimits) -> _Cgroup:
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
        for base, controllers in _cgroup_bases():
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
        for d in self.dirs:
            _rmdir(d)  # may fail while killed processes still exit; the next sweep retries
            _active.discard(d)


@functools.cache
def _cgroup_bases() -> tuple[tuple[str, tuple[str, ...]], ...]:
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
                stale = _Cgroup((path,))
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


# --- supervising one process ------------------------------------------------------------


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


async def _supervise(
    proc: asyncio.subprocess.Process,
    cgroup: _Cgroup,
    limits: SandboxLimits,
    stdin: bytes | None,
    *,
    sandboxed: bool,
) -> ExecResult:
    assert proc.stdout is not None and proc.stderr is not None
    out, err = _Capture(limits.output), _Capture(limits.output)
    tasks = [
        asyncio.ensure_future(out.drain(proc.stdout)),
        asyncio.ensure_future(err.drain(proc.stderr)),
    ]
    if stdin is not None:
        tasks.append(asyncio.ensure_future(_feed(proc, stdin)))
    timed_out = False
    try:
        try:
            async with asyncio.timeout(limits.timeout):
                await proc.wait()
        except TimeoutError:
            timed_out = True
        # Whatever the command left running (background jobs, a fork bomb) dies with it.
        _kill_all(proc, cgroup)
        await asyncio.wait(tasks, timeout=5.0)
        await proc.wait()
        for _ in range(200):
            if cgroup.kill():
                break
            await asyncio.sleep(0.01)
        oom_kills = cgroup.counter("memory.oom_control", "oom_kill") + cgroup.counter("memory.events", "oom_kill")
        pid_hits = cgroup.counter("pids.events", "max")
    finally:
        _kill_all(proc, cgroup)
        for task in tasks:
            task.cancel()
        cgroup.remove()
    code = proc.returncode if proc.returncode is not None else -signal.SIGKILL
    return ExecResult(
        exit_code=code,
        stdout=out.value(),
        stderr=err.value(),
        truncated=bool(out.dropped or err.dropped),
        timed_out=timed_out,
        killed_reason=_killed_reason(code, limits, timed_out, oom_kills, pid_hits),
        sandboxed=sandboxed,
    )


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.write(data)
        await proc.stdin.drain()
        proc.stdin.close()


def _kill_all(proc: asyncio.subprocess.Process, cgroup: _Cgroup) -> None:
    # The pgid outlives a reaped leader only while group members remain, so this
    # never hits a stranger; the sandbox's own processes die with its pid namespace.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    cgroup.kill()


def _killed_reason(code: int, limits: SandboxLimits, timed_out: bool, oom_kills: int, pid_hits: int) -> str | None:
    if timed_out:
        return f"wall-clock timeout ({limits.timeout:g} s)"
    if oom_kills:
        return f"memory limit ({limits.memory // MiB} MiB)"
    if code in (128 + signal.SIGXCPU, -signal.SIGXCPU):
        return f"CPU time limit ({limits.cpu_seconds} s)"
    if code in (128 + signal.SIGXFSZ, -signal.SIGXFSZ):
        return f"file size limit ({limits.file_size // MiB} MiB)"
    if pid_hits:
        return f"process limit ({limits.processes})"
    return None
