"""The OS sandbox that the ``shell`` and ``python`` tools run in.

A command runs under bubblewrap in fresh user, pid, network, ipc, uts and mount
namespaces, with every capability dropped, ``no_new_privs`` set and a seccomp
filter refusing keyrings, BPF, io_uring, mounts, setuid/setgid mode bits and
similar. On the host it is never root: a root tether runs it as an unprivileged
uid that owns nothing, seeing the workspace through an idmapped mount (files stay
the workspace owner's); a non-root tether runs it as itself. It sees a read-only
system (``/usr``, ``/etc``, the ``/bin`` and ``/lib`` links), a private
``/proc``, ``/dev`` and ``/tmp``, and the workspace read-write except every
``.git`` in it (read-only) and ``.tether`` (hidden). Everything else on the host
(``/root``, ``/home``, the host's ``/tmp``, ``/var``, ``/run``...) is absent.

Limits: rlimits cap CPU seconds, address space, file size and open files;
when the cgroup hierarchy is writable each command also gets its own pids and
memory cgroup. A wall-clock timeout kills the whole sandbox, output is captured
up to a byte cap, and the workspace has a disk and inode budget.

There is no silent fallback: without a working bubblewrap, :meth:`Sandbox.run`
raises :class:`~tether.exceptions.SandboxUnavailable` unless the sandbox was made
with ``unsafe_no_sandbox=True``.

The parts, one module each: :mod:`.probe` (is there a working bubblewrap),
:mod:`.identity` and :mod:`.holder` (who the command is on the host),
:mod:`.mounts` (the bwrap command line), :mod:`.seccomp` (the syscall filter),
:mod:`.limits` and :mod:`.cgroups` (rlimits, the launcher, per-command cgroups),
:mod:`.usage` (the workspace's size and ``.git`` entries, the disk watch),
:mod:`.process` (running and watching one command) and :mod:`.sandbox` (the
``Sandbox`` value that puts them together).

>>> sandbox = Sandbox("/path/to/project")  # doctest: +SKIP
>>> result = await sandbox.run(["bash", "-c", "ls | wc -l"])  # doctest: +SKIP
>>> result.exit_code, result.stdout  # doctest: +SKIP
(0, b'12\\n')
"""

from __future__ import annotations

from ...exceptions import SandboxUnavailable
from .limits import MiB, SandboxLimits
from .probe import probe_sandbox
from .process import ExecResult
from .sandbox import Sandbox, UnsandboxedWarning

__all__ = [
    "ExecResult",
    "MiB",
    "Sandbox",
    "SandboxLimits",
    "SandboxUnavailable",
    "UnsandboxedWarning",
    "probe_sandbox",
]
