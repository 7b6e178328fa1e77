"""The seccomp filter every sandboxed command runs under: a classic-BPF deny-list.

The program is built once per process for this machine's architecture and handed
to bubblewrap through a pipe (``--seccomp FD``).

>>> len(seccomp_program() or b"") % 8  # whole BPF instructions, 8 bytes each
0
"""

from __future__ import annotations

import errno
import functools
import os
import struct

__all__ = ["seccomp_fd", "seccomp_program"]

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
def seccomp_program() -> bytes | None:
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


def seccomp_fd(options: frozenset[str]) -> int | None:
    """A pipe read end holding the filter for bwrap's ``--seccomp`` (None: no filter).

    ``options`` are the command-line options this bubblewrap understands.
    """
    program = seccomp_program()
    if program is None or "--seccomp" not in options:
        return None
    r, w = os.pipe()
    os.write(w, program)  # a few hundred bytes: fits the pipe buffer
    os.close(w)
    return r


def fds(fd: int | None) -> tuple[int, ...]:
    """``fd`` as a tuple for ``pass_fds`` (empty when there is no filter)."""
    return () if fd is None else (fd,)
