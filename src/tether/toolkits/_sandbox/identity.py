"""Who a sandboxed command is on the host, and how bubblewrap reaches what it mounts.

A non-root tether runs bubblewrap as itself, and the sandbox maps to that user
(the only mapping an unprivileged process can make). A root tether must not do
that: a sandbox that is host uid 0 owns every root file (it reads root's 0600
files and leaves setuid-root binaries). So as root, bubblewrap runs as
:data:`SANDBOX_HOST_UID`, a uid that owns nothing on the host, with no
supplementary groups, and sees:

* the workspace through an **idmapped mount** in which the workspace owner's
  files are its own, and whatever it creates is written to disk as the workspace
  owner's (the operator keeps owning, reading and editing everything);
* the extra read-only paths through plain bind mounts, so that it can reach them
  below directories only root may enter (what it may *read* there is still
  decided by their permissions).

Those mounts live in a private mount namespace kept by a helper process
(:mod:`.holder`), one per tether process, started at the first sandboxed command.
Without idmapped mounts (Linux before 5.12, or a filesystem without support) a
root tether refuses to run commands: :class:`~tether.exceptions.SandboxUnavailable`.

>>> SANDBOX_HOST_UID > 65535
True
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field

from ...exceptions import SandboxUnavailable
from .limits import helper

__all__ = ["SANDBOX_HOST_UID", "Sources", "sources"]

# An unprivileged uid (and gid) that no account or file on the host uses: in the range
# systemd documents as unused (0x70000000-0x7FFDFFFF), below 2**31 for tools that sign uids.
SANDBOX_HOST_UID = 0x7A11_0000
_HOLDER = os.path.join(os.path.dirname(__file__), "holder.py")
_STAGE_PREFIX = "tether-stage-"
_REPLY_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class Sources:
    """Where bubblewrap finds the workspace and each read-only path, and how it is started.

    ``prefix`` goes before bubblewrap on the command line (entering the mount
    namespace and dropping to the sandbox uid); empty for a non-root tether.
    """

    workspace: str
    read_only: tuple[tuple[str, str], ...] = ()  # (path inside the sandbox, path bwrap binds)
    prefix: tuple[str, ...] = ()

    @property
    def remapped(self) -> bool:
        """True when the sandbox runs as :data:`SANDBOX_HOST_UID` rather than as tether's own uid."""
        return bool(self.prefix)


def sources(workspace: str, read_only_paths: tuple[str, ...], *, pdeathsig: bool) -> Sources:
    """The sources for one command; stages them in the holder's namespace when tether is root.

    ``pdeathsig`` re-arms "die with parent" after the uid change (which clears it),
    for when no cgroup watchdog covers bubblewrap's start-up. Raises
    SandboxUnavailable when a root tether cannot stage the workspace.
    """
    if os.geteuid() != 0:
        return Sources(workspace)
    return _stage().sources(workspace, read_only_paths, pdeathsig=pdeathsig)


@dataclass
class _Stage:
    """The holder process, its namespace, and what it has attached (this process's only one)."""

    directory: str
    holder: subprocess.Popen[bytes]
    channel: socket.socket
    namespace_fd: int
    slots: dict[tuple[object, ...], str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def sources(self, workspace: str, read_only_paths: tuple[str, ...], *, pdeathsig: bool) -> Sources:
        uid = str(SANDBOX_HOST_UID)
        # nsenter opens our descriptor through /proc, so none leaks into the sandbox; with
        # --setgid it also drops every supplementary group.
        namespace = f"--mount=/proc/{os.getpid()}/fd/{self.namespace_fd}"
        prefix = [_tool("nsenter"), namespace, f"--setuid={uid}", f"--setgid={uid}", "--"]
        if pdeathsig:  # changing uid cleared it: re-arm it as the new uid
            prefix += [_tool("setpriv"), "--pdeathsig", "KILL", "--"]
        with self.lock:
            ws = self._attach("idmap", workspace)
            reachable = [p for p in read_only_paths if os.path.exists(p) and not os.path.islink(p)]
            ro = tuple((p, self._attach("bind", p)) for p in reachable)
        return Sources(ws, ro, tuple(prefix))

    def _attach(self, kind: str, path: str) -> str:
        st = os.stat(path)
        key = (kind, path, st.st_dev, st.st_ino, st.st_uid, st.st_gid)
        if key in self.slots:
            return self.slots[key]
        slot = str(len(self.slots))
        ids = [str(st.st_uid), str(st.st_gid), str(SANDBOX_HOST_UID), str(SANDBOX_HOST_UID)]
        self._ask("\t".join([kind, slot, *(ids if kind == "idmap" else [])]), path)
        self.slots[key] = os.path.join(self.directory, slot)
        return self.slots[key]

    def _ask(self, request: str, path: str) -> None:
        """Clone ``path``'s mount tree here, in the host's namespace, and have the holder attach it."""
        try:
            tree = _open_tree(path)
        except OSError as exc:
            reply = f"err {exc.errno} {exc.strerror}"
        else:
            try:
                socket.send_fds(self.channel, [request.encode()], [tree])
                reply = _reply(self.channel)
            except OSError as exc:
                reply = f"the sandbox's mount helper is gone ({exc})"
            finally:
                os.close(tree)
        if reply != "ok":
            raise SandboxUnavailable(
                f"cannot give the sandbox an unprivileged view of {path!r} ({reply.removeprefix('err ')}); "
                "tether running as root runs commands as an unprivileged uid through an idmapped "
                "mount, which needs Linux 5.12+ and a filesystem that supports it (ext4, xfs, btrfs, "
                "tmpfs 6.3+...); move the workspace there or run tether as a non-root user"
            )

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.namespace_fd)
        self.channel.close()  # the holder reads end-of-file and exits
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.holder.wait(timeout=2)
        with contextlib.suppress(OSError):
            os.rmdir(self.directory)


_current: _Stage | None = None
_start_lock = threading.Lock()


def _stage() -> _Stage:
    """This process's stage, started (or restarted, if its holder died) on demand."""
    global _current
    with _start_lock:
        if _current is not None and _current.holder.poll() is None:
            return _current
        if _current is not None:
            _current.close()
        _current = _start()
        atexit.register(_current.close)
        return _current


def _start() -> _Stage:
    _sweep_stale_stages()
    directory = tempfile.mkdtemp(prefix=f"{_STAGE_PREFIX}{os.getpid()}-", dir=_stage_parent())
    os.chmod(directory, 0o711)  # the sandbox uid must be able to pass through it
    channel, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with theirs:
        holder = subprocess.Popen(
            [sys.executable, "-I", "-S", _HOLDER, directory],
            stdin=theirs.fileno(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C for tether's terminal is not for the holder
        )
    channel.settimeout(_REPLY_SECONDS)
    if (reply := _reply(channel)) != "ok":
        channel.close()
        holder.kill()
        holder.wait()
        os.rmdir(directory)
        raise SandboxUnavailable(f"cannot start the sandbox's mount helper ({reply}); it needs CAP_SYS_ADMIN")
    namespace_fd = os.open(f"/proc/{holder.pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    return _Stage(directory, holder, channel, namespace_fd)


def _reply(channel: socket.socket) -> str:
    try:
        answer = channel.recv(4096).decode()
    except TimeoutError:
        return "no answer"
    return answer or "no answer: it exited"


def _open_tree(path: str) -> int:
    """A detached clone of the mount tree at ``path`` (``open_tree(OPEN_TREE_CLONE | AT_RECURSIVE)``)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    open_tree, clone, recursive, cwd = 428, 0x1, 0x8000, -100  # the same number on x86_64 and aarch64
    fd = int(libc.syscall(open_tree, cwd, os.fsencode(path), clone | recursive | os.O_CLOEXEC))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"open_tree: {os.strerror(err)}")
    return fd


def _stage_parent() -> str:
    """A directory the sandbox uid can pass through: the temporary directory, or /tmp."""
    for candidate in (tempfile.gettempdir(), "/tmp"):
        if _passable(candidate):
            return candidate
    raise SandboxUnavailable("no temporary directory that every user may enter (/tmp should be)")


def _passable(path: str) -> bool:
    parts = os.path.realpath(path).split("/")
    return all(os.stat("/".join(parts[:i]) or "/").st_mode & 0o001 for i in range(1, len(parts) + 1))


def _sweep_stale_stages() -> None:
    """Remove the (empty) stage directories of tether processes that died without cleaning up."""
    with contextlib.suppress(OSError):
        for name in os.listdir(_stage_parent()):
            m = re.fullmatch(rf"{_STAGE_PREFIX}(\d+)-\w+", name)
            if m and not os.path.exists(f"/proc/{m.group(1)}"):
                with contextlib.suppress(OSError):
                    os.rmdir(os.path.join(_stage_parent(), name))


def _tool(name: str) -> str:
    path = helper(name)
    if path is None:
        raise SandboxUnavailable(f"{name!r} (util-linux) not found; install util-linux")
    return path
