"""The :class:`Sandbox` value and its ``run``: where and how one command runs.

``run`` puts the parts together: a working bubblewrap (:mod:`.probe`), the
workspace's size and ``.git`` entries (:mod:`.usage`), the host's own code in
it (:mod:`tether.toolkits._hostcode`), who the command is on the
host (:mod:`.identity`), the bwrap command line (:mod:`.mounts`) and seccomp
filter (:mod:`.seccomp`), the command's cgroups (:mod:`.cgroups`) and limits
launcher (:mod:`.limits`), then watches the process to its end (:mod:`.process`).

>>> Sandbox("/nonexistent/project")
Traceback (most recent call last):
tether.exceptions.UserError: workspace '/nonexistent/project' is not a directory
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...exceptions import SandboxUnavailable, UserError
from .._hostcode import HostCode, host_code
from .cgroups import Cgroup
from .identity import Sources, sources
from .limits import HELPER_PATH, SandboxLimits, launcher_argv
from .mounts import SYSTEM_PATHS, Bwrap, bwrap_argv, is_within, scrubbed_env
from .probe import find_bwrap
from .process import ExecResult, supervise
from .seccomp import fds, seccomp_fd
from .usage import DiskWatch, Usage, over_budget, scan

__all__ = ["Sandbox", "UnsandboxedWarning"]


class UnsandboxedWarning(RuntimeWarning):
    """Commands will run on the host without isolation (``unsafe_no_sandbox=True``)."""


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
        if any(is_within(system, root) for system in SYSTEM_PATHS):
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
        """Raise SandboxUnavailable unless commands can run here (isolated, or unsafe by choice)."""
        if not self.unsafe_no_sandbox:
            self._host_code(self._sources(pdeathsig=False)[0])

    def _host_code(self, probe: Bwrap) -> HostCode:
        """The host's code in the workspace; SandboxUnavailable when it cannot be kept read-only."""
        host = host_code(self.workspace, extra=(probe.path,))
        if host.problem is not None:
            raise SandboxUnavailable(host.problem)
        return host

    def _sources(self, *, pdeathsig: bool) -> tuple[Bwrap, Sources]:
        """A working bubblewrap and where it finds what it mounts (blocking: the first call probes)."""
        if isinstance(probe := find_bwrap(self.bwrap), str):
            raise SandboxUnavailable(probe)
        return probe, sources(self.workspace, self.read_only_paths, pdeathsig=pdeathsig)

    async def run(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes | None = None,
        limits: SandboxLimits | None = None,
        pass_fds: Sequence[int] = (),
    ) -> ExecResult:
        """Run ``argv`` in the workspace and return its result; never leaves processes behind.

        ``pass_fds`` are descriptors the command inherits under the same numbers
        (a private channel to the host, such as the code actions' bridge socket).

        A command does not start when the workspace is over its disk budget (the
        result says why, with exit code -1).
        """
        if not argv:
            raise UserError("Sandbox.run needs a non-empty argv")
        limits = limits or self.limits
        usage = await asyncio.to_thread(scan, self.workspace, limits.disk_inodes)
        watch = DiskWatch(self.workspace, limits, usage)
        if reason := over_budget(usage, limits) or watch.low_space():
            sandboxed = not self.unsafe_no_sandbox
            return ExecResult(-1, b"", b"", killed_reason=f"not started: {reason}", sandboxed=sandboxed)
        cgroup = Cgroup.create(limits)
        seccomp: int | None = None
        # Only this process holds the write end; its death (even kill -9) closes it.
        alive_r, alive_w = os.pipe()
        try:
            prefix, seccomp = await self._prefix(usage, watchdog=bool(cgroup.dirs))
            # One file, written faster than the watch looks, must not fill the disk either.
            rlimits = dataclasses.replace(limits, file_size=watch.room())
            command = [*launcher_argv(cgroup.dirs, alive_r, rlimits), *prefix, *argv]
            proc = await asyncio.create_subprocess_exec(
                *command,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.workspace,
                env=scrubbed_env(self.workspace) if self.unsafe_no_sandbox else {"PATH": HELPER_PATH},
                start_new_session=True,  # one process group to kill on timeout
                pass_fds=(alive_r, *fds(seccomp), *pass_fds),
            )
        except BaseException:
            os.close(alive_w)
            cgroup.remove()
            raise
        finally:
            for fd in (alive_r, *fds(seccomp)):
                os.close(fd)
        try:
            return await supervise(proc, cgroup, limits, stdin, watch, sandboxed=not self.unsafe_no_sandbox)
        finally:
            os.close(alive_w)

    async def _prefix(self, usage: Usage, *, watchdog: bool) -> tuple[list[str], int | None]:
        """The bubblewrap part of the command line, and the seccomp pipe it reads (none if unsafe)."""
        if self.unsafe_no_sandbox:
            return [], None
        probe, staged = await asyncio.to_thread(self._sources, pdeathsig=not watchdog)
        host = self._host_code(probe)
        seccomp = seccomp_fd(probe.options)
        argv = bwrap_argv(
            probe,
            self.workspace,
            staged,
            network=self.network,
            read_only_paths=self.read_only_paths,
            git_entries=usage.git_entries,
            tmp_size=self.limits.tmp_size,
            seccomp_fd=seccomp,
            host=host,
        )
        return [*staged.prefix, *argv], seccomp
