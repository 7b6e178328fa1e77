"""The seccomp filter every sandboxed command runs under (classic BPF, built here, no libseccomp).

Three kinds of rule:

* a deny-list of syscalls refused with ``EPERM`` (keyrings, modules, BPF, io_uring,
  mounts, namespaces...);
* **no set-id bits**: ``chmod``, ``fchmod``, ``fchmodat``, ``fchmodat2``, ``mkdir``,
  ``mkdirat``, ``mknod``, ``mknodat``, ``creat``, and ``open``/``openat`` when they
  create a file, are refused with ``EPERM`` when their mode has ``S_ISUID`` or
  ``S_ISGID``, so no file a command makes carries them on the host, whoever owns it;
* ``openat2`` (its mode sits in a struct the filter cannot read) answers ``ENOSYS``,
  and libc falls back to ``openat``.

Other ABIs on the same kernel (i386 via ``int 0x80``) kill the process; x32
syscall numbers are refused. The program is built once per process for this
machine's architecture and handed to bubblewrap through a pipe (``--seccomp FD``).

>>> len(seccomp_program() or b"") % 8  # whole BPF instructions, 8 bytes each
0
"""

from __future__ import annotations

import errno
import functools
import os
import stat
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = ["fds", "seccomp_fd", "seccomp_program"]

# Syscalls refused with EPERM: kernel keyrings (shared with the host user), kernel modules and
# kexec, BPF, perf, userfaultfd and io_uring (large attack surface, and io_uring's openat has a
# mode the filter cannot see), file handles, mounts, namespaces, swap, reboot, accounting.
# Numbers for (x86_64, aarch64); None: not on that arch.
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
# Syscalls that set a mode: (x86_64 number, aarch64 number, index of the mode argument,
# index of the open flags when the mode only counts for O_CREAT / O_TMPFILE).
_MODE_SYSCALLS: dict[str, tuple[int | None, int | None, int, int | None]] = {
    "chmod": (90, None, 1, None), "fchmod": (91, 52, 1, None), "fchmodat": (268, 53, 2, None),
    "fchmodat2": (452, 452, 2, None), "mkdir": (83, None, 1, None), "mkdirat": (258, 34, 2, None),
    "mknod": (133, None, 1, None), "mknodat": (259, 33, 2, None), "creat": (85, None, 1, None),
    "open": (2, None, 2, 1), "openat": (257, 56, 3, 2),
}  # fmt: skip
_OPENAT2 = (437, 437)
_AUDIT_ARCH = {"x86_64": (0xC000003E, 0), "aarch64": (0xC00000B7, 1)}
_SET_ID = stat.S_ISUID | stat.S_ISGID
_CREATES = os.O_CREAT | 0o20000000  # O_CREAT | __O_TMPFILE (the same bits on both architectures)

_LD, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|{JEQ,JGE,JSET}|K, BPF_RET|K
_ALLOW, _KILL = 0x7FFF0000, 0x80000000  # SECCOMP_RET_ALLOW, SECCOMP_RET_KILL_PROCESS
_ERRNO = 0x00050000  # SECCOMP_RET_ERRNO | errno


@dataclass(frozen=True, slots=True)
class _Op:
    """One BPF instruction; ``then`` / ``other`` are labels (None: the next instruction)."""

    code: int
    k: int
    then: str | None = None
    other: str | None = None


def _arg(index: int) -> int:
    """Offset of the low 32 bits of argument ``index`` in ``struct seccomp_data`` (little-endian)."""
    return 16 + 8 * index


def _rules(audit_arch: int, column: int) -> Iterator[_Op | str]:
    """The filter as instructions and labels (a ``str`` marks where a label points)."""
    yield _Op(_LD, 4)  # A = seccomp_data.arch
    yield _Op(_JEQ, audit_arch, None, "kill")  # another ABI (i386 via int 0x80): kill
    yield _Op(_LD, 0)  # A = seccomp_data.nr
    yield _Op(_JGE, 0x40000000, "deny", None)  # x32 syscall numbers: refuse
    for nr in sorted({nr for nrs in _DENIED_SYSCALLS.values() if (nr := nrs[column]) is not None}):
        yield _Op(_JEQ, nr, "deny", None)
    yield _Op(_JEQ, _OPENAT2[column], "enosys", None)
    mode_calls = {name: (nr, *spec[2:]) for name, spec in _MODE_SYSCALLS.items() if (nr := spec[column]) is not None}
    for name, (nr, *_) in mode_calls.items():
        yield _Op(_JEQ, nr, name, None)
    yield _Op(_RET, _ALLOW)
    for name, (_, mode_arg, flags_arg) in mode_calls.items():
        yield name
        if flags_arg is not None:  # open/openat: the mode matters only when creating
            yield _Op(_LD, _arg(flags_arg))
            yield _Op(_JSET, _CREATES, None, "allow")
        yield _Op(_LD, _arg(mode_arg))
        yield _Op(_JSET, _SET_ID, "deny", "allow")
    yield "allow"
    yield _Op(_RET, _ALLOW)
    yield "deny"
    yield _Op(_RET, _ERRNO | errno.EPERM)
    yield "enosys"
    yield _Op(_RET, _ERRNO | errno.ENOSYS)
    yield "kill"
    yield _Op(_RET, _KILL)


def _assemble(rules: Iterable[_Op | str]) -> bytes:
    """Resolve labels to the relative forward jumps classic BPF uses, and encode."""
    ops: list[_Op] = []
    labels: dict[str, int] = {}
    for rule in rules:
        if isinstance(rule, str):
            labels[rule] = len(ops)
        else:
            ops.append(rule)
    out = []
    for i, op in enumerate(ops):
        jt, jf = (0 if label is None else labels[label] - i - 1 for label in (op.then, op.other))
        assert 0 <= jt < 256 and 0 <= jf < 256, "jump out of range"
        out.append(struct.pack("=HBBI", op.code, jt, jf, op.k))
    return b"".join(out)


@functools.cache
def seccomp_program() -> bytes | None:
    """The seccomp filter for this machine, or None on an architecture we lack numbers for."""
    arch = _AUDIT_ARCH.get(os.uname().machine)
    if arch is None:
        return None
    return _assemble(_rules(*arch))


def seccomp_fd(options: frozenset[str]) -> int | None:
    """A pipe read end holding the filter for bwrap's ``--seccomp`` (None: no filter).

    ``options`` are the command-line options this bubblewrap understands.
    """
    program = seccomp_program()
    if program is None or "--seccomp" not in options:
        return None
    r, w = os.pipe()
    os.write(w, program)  # well under the pipe buffer (64 KiB)
    os.close(w)
    return r


def fds(fd: int | None) -> tuple[int, ...]:
    """``fd`` as a tuple for ``pass_fds`` (empty when there is no filter)."""
    return () if fd is None else (fd,)
