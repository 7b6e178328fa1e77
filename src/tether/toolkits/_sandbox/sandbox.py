"""The :class:`Sandbox` value and its ``run``: where and how one command runs.

``run`` puts the parts together: a working bubblewrap (:mod:`.probe`), its command
line (:mod:`.mounts`) and seccomp filter (:mod:`.seccomp`), the command's
cgroups (:mod:`.cgroups`) and limits launcher (:mod:`.limits`), then watches the
process to its end (:mod:`.process`).

>>> Sandbox("/nonexistent/project")
Traceback (most recent call last):
tether.exceptions.UserError: workspace '/nonexistent/project' is not a directory
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...exceptions import SandboxUnavailable, UserError
from .cgroups import Cgroup
from .limits import HELPER_PATH, SandboxLimits, launcher_argv
from .mounts import SYSTEM_PATHS, bwrap_argv, is_within, scrubbed_env
from .probe import find_bwrap
from .process import ExecResult, supervise
from .seccomp import fds, seccomp_fd

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
        """Raise SandboxUnavailable unless commands can run (isolated, or unsafe by choice)."""
        if not self.unsafe_no_sandbox and isinstance(reason := find_bwrap(self.bwrap), str):
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
            probe = await asyncio.to_thread(find_bwrap, self.bwrap)
            if isinstance(probe, str):
                raise SandboxUnavailable(probe)
            seccomp = seccomp_fd(probe.options)
            prefix = bwrap_argv(
                probe,
                self.workspace,
                network=self.network,
                read_only_paths=self.read_only_paths,
                tmp_size=self.limits.tmp_size,
                seccomp_fd=seccomp,
            )
        cgroup = Cgroup.create(limits)
        # Only this process holds the write end; its death (even kill -9) closes it.
        alive_r, alive_w = os.pipe()
        try:
            command = [*launcher_argv(cgroup.dirs, alive_r, limits), *prefix, *argv]
            proc = await asyncio.create_subprocess_exec(
                *command,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.workspace,
                env=scrubbed_env(self.workspace) if self.unsafe_no_sandbox else {"PATH": HELPER_PATH},
                start_new_session=True,  # one process group to kill on timeout
                pass_fds=(alive_r, *fds(seccomp)),
            )
        except BaseException:
            os.close(alive_w)
            cgroup.remove()
            raise
        finally:
            for fd in (alive_r, *fds(seccomp)):
                os.close(fd)
        try:
            return await supervise(proc, cgroup, limits, stdin, sandboxed=not self.unsafe_no_sandbox)
        finally:
            os.close(alive_w)
