"""The bubblewrap command line: namespaces, identity, and what the command sees mounted where.

A read-only system (``/usr``, ``/etc``, the ``/bin`` and ``/lib`` links), a
private ``/proc``, ``/dev`` and ``/tmp``, and the workspace read-write except
every ``.git`` in it (read-only, nested repositories included, the folders that
hold one pinned in place), the host's own
code in it (read-only, see :mod:`tether.toolkits._hostcode`) and ``.tether``
(hidden). Everything else on the host is simply absent. What the command may
read of the system is decided by its host uid (see :mod:`.identity`).

>>> scrubbed_env("/srv/project")["HOME"]
'/tmp'
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass

from .._hostcode import HostCode
from .identity import Sources

__all__ = [
    "HIDDEN_ENTRIES",
    "SANDBOX_PATH",
    "SANDBOX_UID",
    "SYSTEM_PATHS",
    "Bwrap",
    "bwrap_argv",
    "is_within",
    "scrubbed_env",
]

SANDBOX_UID = 65534  # "nobody": not root inside, so nothing owned by uid 0 there is ours
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
HIDDEN_ENTRIES = (".tether",)  # inside the workspace: replaced by an empty directory
SYSTEM_PATHS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# bwrap itself covers /proc/irq, /proc/bus and /proc/sysrq-trigger, but not /proc/sys.
_NO_HOST_CODE = HostCode()
_PROC_READ_ONLY = ("sys", "sysrq-trigger", "fs", "scsi", "acpi", "mtrr", "pressure")


@dataclass(frozen=True, slots=True)
class Bwrap:
    """A bubblewrap executable that passed its probe, and the options it understands.

    >>> "--seccomp" in Bwrap("/usr/bin/bwrap", frozenset({"--seccomp"})).options
    True
    """

    path: str
    options: frozenset[str]


def bwrap_argv(
    bwrap: Bwrap,
    workspace: str,
    sources: Sources,
    *,
    network: bool,
    read_only_paths: Sequence[str],
    git_entries: Sequence[str],
    tmp_size: int,
    seccomp_fd: int | None,
    host: HostCode = _NO_HOST_CODE,
) -> list[str]:
    """The bwrap command line (ending in ``--``) for one command in ``workspace``.

    ``sources`` says where bubblewrap finds the workspace and the read-only paths;
    ``git_entries`` are the workspace's ``.git`` directories and files, relative;
    ``host`` the host's own code in the workspace (read-only, and pinned in place).
    """
    ws = workspace
    argv = [bwrap.path, "--unshare-all"]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    if network:
        argv.append("--share-net")
    uid = str(SANDBOX_UID)
    argv += ["--unshare-user", "--uid", uid, "--gid", uid, "--cap-drop", "ALL"]
    if "--disable-userns" in bwrap.options:
        argv.append("--disable-userns")  # no nested namespace in which to regain capabilities
    argv += ["--die-with-parent", "--new-session", "--hostname", "sandbox"]
    argv += _read_only_binds(SYSTEM_PATHS, {})
    if not sources.remapped:  # as tether's own uid, the sandbox could read its private files
        for path, is_dir in _restricted("/etc"):
            argv += ["--tmpfs", path] if is_dir else ["--ro-bind", "/dev/null", path]
    if network and os.path.islink("/etc/resolv.conf"):
        real = os.path.realpath("/etc/resolv.conf")
        argv += ["--ro-bind-try", real, real]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    # Kernel settings are writable by host root through file permissions alone (kernel.core_pattern
    # runs a program as host root); a remapped sandbox is not root, but keep them read-only anyway.
    for name in _PROC_READ_ONLY:
        argv += ["--ro-bind-try", f"/proc/{name}", f"/proc/{name}"]
    if "--size" in bwrap.options:
        argv += ["--size", str(tmp_size)]
    argv += ["--tmpfs", "/tmp"]
    argv += _read_only_binds(read_only_paths, dict(sources.read_only))  # after /tmp: they may live there
    argv += ["--bind", sources.workspace, ws]
    # A mount point cannot be renamed or removed: the folders on the way to host code and to
    # every .git stay put, so neither can be moved aside (or out of the next walk's reach).
    for rel in _pins(host.pinned, git_entries):
        argv += ["--bind", os.path.join(sources.workspace, rel), os.path.join(ws, rel)]
    for rel in host.read_only:
        argv += ["--ro-bind", os.path.join(sources.workspace, rel), os.path.join(ws, rel)]
    for rel in git_entries:
        argv += ["--ro-bind", os.path.join(sources.workspace, rel), os.path.join(ws, rel)]
    for name in HIDDEN_ENTRIES:
        path = os.path.join(ws, name)
        if os.path.isdir(path) and not os.path.islink(path):
            argv += ["--tmpfs", path, "--remount-ro", path]
        elif os.path.lexists(path) and not os.path.islink(path):
            argv += ["--ro-bind", "/dev/null", path]
    argv += ["--remount-ro", "/"]  # the sandbox's own root; otherwise a writable tmpfs
    argv += ["--chdir", ws, "--clearenv"]
    for key, value in scrubbed_env(ws).items():
        argv += ["--setenv", key, value]
    return [*argv, "--"]


def _pins(pinned: Sequence[str], git_entries: Sequence[str]) -> list[str]:
    """Folders to bind onto themselves, parents first: the given ones and those holding a ``.git``.

    >>> _pins(["envs"], ["a/b/.git", "a/.git", ".git"])
    ['a', 'envs', 'a/b']
    """
    found = set(pinned)
    for rel in git_entries:
        parts = rel.split("/")[:-1]
        found.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return sorted(found, key=lambda rel: (rel.count("/"), rel))


def scrubbed_env(workspace: str) -> dict[str, str]:
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


def is_within(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or below it (both absolute and normalised).

    >>> is_within("/srv/project/src", "/srv/project"), is_within("/srv/projects", "/srv/project")
    (True, False)
    """
    return path == root or path.startswith(root.rstrip("/") + "/")


def _read_only_binds(paths: Sequence[str], staged: dict[str, str]) -> list[str]:
    """Read-only binds of ``paths`` (from where ``staged`` says, else from themselves); links stay links."""
    argv: list[str] = []
    for path in paths:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            argv += ["--ro-bind", staged.get(path, path), path]
    return argv


@functools.cache
def _restricted(root: str) -> tuple[tuple[str, bool], ...]:
    """Entries under ``root`` the host hides from other users: (path, is_dir).

    Only for a sandbox that runs as tether's own (non-root) uid: it keeps that
    user's groups, so it could read group-private files; they are masked. The walk
    is cached per process (it costs ~20 ms): files made later are not masked.
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
