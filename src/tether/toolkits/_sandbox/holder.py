"""The mount holder: a small root helper that keeps a private mount namespace for the sandboxes.

Run by tether (as root only) with ``python3 -I -S holder.py STAGE``, its stdin a
``SOCK_SEQPACKET`` socket. It leaves the host's mount namespace, mounts a tmpfs
on the empty directory ``STAGE`` and then, on request, attaches there a mount
tree that tether cloned in the host's namespace (``open_tree``) and passed along
with the request (so mounts made on the host after the holder started count):

* ``idmap SLOT DISK_UID DISK_GID UID GID`` + tree: first made an idmapped mount,
  in which what the disk says belongs to ``DISK_UID:DISK_GID`` belongs to
  ``UID:GID``, and what ``UID:GID`` creates is written to disk as
  ``DISK_UID:DISK_GID``. The sandbox runs as the unprivileged ``UID`` and still
  owns the workspace; the operator still owns every file on disk.
* ``bind SLOT`` + tree: attached as it is, so that bubblewrap, running as
  ``UID``, reaches paths below directories only root may enter.

Each request is one message; the answer is ``ok`` or ``err ERRNO MESSAGE``. The
holder exits when the socket closes, which the kernel does when tether dies,
even by ``kill -9``. (Not ``PR_SET_PDEATHSIG``: it fires when the *thread* that
started the holder ends, and tether starts it from a worker thread.) The
namespace lives on while a sandbox still uses it. Standard library only, and no
tether imports: it runs isolated (``-I -S``).
"""

from __future__ import annotations

import ctypes
import os
import socket
import sys
from typing import Any

__all__ = ["main"]

CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_SLAVE = 0x2, 0x4, 0x8, 0x4000, 0x80000
AT_RECURSIVE, AT_EMPTY_PATH, AT_FDCWD = 0x8000, 0x1000, -100
MOVE_MOUNT_F_EMPTY_PATH, MOUNT_ATTR_IDMAP = 0x4, 0x00100000
# Syscall numbers, the same on x86_64 and aarch64 (the new mount API came after the split).
SYS_MOVE_MOUNT, SYS_MOUNT_SETATTR = 429, 442

_libc: Any = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def _leave_host_namespace(stage: str) -> None:
    _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(_libc.mount(b"none", b"/", None, MS_REC | MS_SLAVE, None), "make / a slave mount")
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    _check(_libc.mount(b"tether-stage", stage.encode(), b"tmpfs", flags, b"mode=0711,size=1m"), "mount the stage")


def _user_namespace(uid_map: str, gid_map: str) -> int:
    """A descriptor of a new user namespace with these maps (only its mappings matter)."""
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child only lives to own the namespace until it is opened
        os.close(ready_r)
        os.close(done_w)
        os.write(ready_w, b"1" if _libc.unshare(CLONE_NEWUSER) == 0 else b"0")
        os.read(done_r, 1)
        os._exit(0)
    os.close(ready_w)
    os.close(done_r)
    try:
        if os.read(ready_r, 1) != b"1":
            raise OSError(0, "unshare(CLONE_NEWUSER) failed")
        for name, text in (("uid_map", uid_map), ("setgroups", "deny"), ("gid_map", gid_map)):
            with open(f"/proc/{pid}/{name}", "w") as f:
                f.write(text)
        return os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(done_w)
        os.close(ready_r)
        os.waitpid(pid, 0)


def _attach(tree: int, stage: str, slot: str) -> None:
    target = os.path.join(stage, slot)
    os.mkdir(target, 0o711)
    _check(_libc.syscall(SYS_MOVE_MOUNT, tree, b"", AT_FDCWD, target.encode(), MOVE_MOUNT_F_EMPTY_PATH), "move_mount")


def _idmap(tree: int, userns: int) -> None:
    attr = _MountAttr(MOUNT_ATTR_IDMAP, 0, 0, userns)
    for flags in (AT_EMPTY_PATH | AT_RECURSIVE, AT_EMPTY_PATH):  # submounts may not support it
        if _libc.syscall(SYS_MOUNT_SETATTR, tree, b"", flags, ctypes.byref(attr), ctypes.sizeof(attr)) == 0:
            return
    _check(-1, "mount_setattr(MOUNT_ATTR_IDMAP)")


def _serve(stage: str, request: list[str], tree: int, namespaces: dict[tuple[str, str], int]) -> None:
    kind, slot, *ids = request
    if kind == "idmap":
        disk_uid, disk_gid, uid, gid = ids
        key = (f"{disk_uid} {uid} 1\n", f"{disk_gid} {gid} 1\n")
        if key not in namespaces:
            namespaces[key] = _user_namespace(*key)
        _idmap(tree, namespaces[key])
    elif kind != "bind":
        raise OSError(0, f"unknown request {kind!r}")
    _attach(tree, stage, slot)


def _answer(channel: socket.socket, error: BaseException | None = None) -> None:
    if error is None:
        channel.send(b"ok")
    else:
        code, text = getattr(error, "errno", 0) or 0, getattr(error, "strerror", None) or str(error)
        channel.send(f"err {code} {text}".encode())


def main(argv: list[str]) -> int:
    """Serve requests until the socket closes; see the module docstring for the protocol."""
    stage = argv[1]
    channel = socket.socket(fileno=0)
    try:
        _leave_host_namespace(stage)
    except OSError as exc:
        _answer(channel, exc)
        return 1
    _answer(channel)
    namespaces: dict[tuple[str, str], int] = {}
    while True:
        message, fds, _, _ = socket.recv_fds(channel, 4096, 1)
        if not message:
            return 0
        try:
            if len(fds) != 1:
                raise OSError(0, "a request needs exactly one mount tree")
            _serve(stage, message.decode().split("\t"), fds[0], namespaces)
        except (OSError, ValueError) as exc:
            _answer(channel, exc)
        else:
            _answer(channel)
        finally:
            for fd in fds:
                os.close(fd)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
