"""Is there a working sandbox here? Find bubblewrap, check its options, run it once for real.

The probe runs a real sandbox once per bubblewrap binary (the answer is cached),
as the real commands will run (the same uid, mounts and filter), and checks that
it starts, has no capabilities, can write its workspace and cannot write ``/``.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile

from ...exceptions import SandboxUnavailable
from .identity import SANDBOX_HOST_UID, sources
from .limits import HELPER_PATH, SandboxLimits, helper
from .mounts import Bwrap, bwrap_argv
from .seccomp import fds, seccomp_fd

__all__ = ["INSTALL_HINT", "find_bwrap", "probe_sandbox"]

INSTALL_HINT = (
    "install it with `apt-get install bubblewrap` (Debian/Ubuntu) or `dnf install bubblewrap` "
    "(Fedora), or pass unsafe_no_sandbox=True to run commands on the host without isolation"
)
_REQUIRED_OPTIONS = (
    "--unshare-all",
    "--cap-drop",
    "--die-with-parent",
    "--new-session",
    "--clearenv",
)


def probe_sandbox(bwrap: str = "bwrap") -> str | None:
    """Why sandboxed commands cannot run here, or None when they can.

    The probe runs a real sandbox once per bubblewrap binary and checks that it
    starts, has no capabilities and cannot write ``/``.

    >>> probe_sandbox("/nonexistent/bwrap")  # doctest: +ELLIPSIS
    "bubblewrap not found at '/nonexistent/bwrap'; install it with ..."
    """
    found = find_bwrap(bwrap)
    return found if isinstance(found, str) else None


def find_bwrap(bwrap: str) -> Bwrap | str:
    """A working bubblewrap named ``bwrap``, or the reason there is none."""
    path = shutil.which(bwrap)
    if path is None:
        where = f"at {bwrap!r}" if "/" in bwrap else f"on PATH (looked for {bwrap!r})"
        return f"bubblewrap not found {where}; {INSTALL_HINT}"
    return _probe(os.path.realpath(path))


@functools.cache
def _probe(path: str) -> Bwrap | str:
    """A working bubblewrap at ``path``, or the reason there is none (cached per path)."""
    if missing := [name for name in ("setpriv", "nsenter", "bash") if not helper(name)]:
        return f"{' and '.join(missing)} not found; install util-linux and bash"
    try:
        help_text = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10, env={}).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot run bubblewrap at {path!r}: {exc}; {INSTALL_HINT}"
    options = frozenset(re.findall(r"--[a-z][a-z0-9-]*", help_text))
    if missing := [o for o in _REQUIRED_OPTIONS if o not in options]:
        return f"bubblewrap at {path!r} is too old (missing {', '.join(missing)}); {INSTALL_HINT}"
    bwrap = Bwrap(path, options)
    with tempfile.TemporaryDirectory(prefix="tether-probe-") as tmp:
        failure = _run_once(bwrap, os.path.realpath(tmp))
    return failure or bwrap


def _run_once(bwrap: Bwrap, ws: str) -> str | None:
    """Run one real sandbox in ``ws`` the way commands will run; why it failed, or None."""
    try:
        staged = sources(ws, (), pdeathsig=False)
    except SandboxUnavailable as exc:
        return str(exc)
    # No capabilities, its own user namespace, the workspace writable, the root not.
    check = (
        r'grep -Eq "^CapEff:[[:space:]]*0+$" /proc/self/status && '
        f'[ "$(readlink /proc/self/ns/user)" != "{os.readlink("/proc/self/ns/user")}" ] && '
        f'touch "{ws}/probe" && ! touch /probe 2>/dev/null'
    )
    seccomp = seccomp_fd(bwrap.options)
    tmp_size = SandboxLimits().tmp_size
    argv = bwrap_argv(
        bwrap, ws, staged, network=False, read_only_paths=(), git_entries=(), tmp_size=tmp_size, seccomp_fd=seccomp
    )
    try:
        done = subprocess.run(
            [*staged.prefix, *argv, "sh", "-c", check],
            capture_output=True,
            text=True,
            timeout=10,
            env={"PATH": HELPER_PATH},
            pass_fds=fds(seccomp),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap at {bwrap.path!r} failed its probe: {exc}"
    finally:
        if seccomp is not None:
            os.close(seccomp)
    if done.returncode == 0:
        return None if _owned_like(os.path.join(ws, "probe"), ws) else _FOREIGN_FILES
    detail = done.stderr.strip()[:300] or f"exit status {done.returncode}"
    remapped = f"; tether runs as root, so bubblewrap runs as uid {SANDBOX_HOST_UID} and must be executable by it"
    return (
        f"bubblewrap at {bwrap.path!r} failed its probe ({detail}); the sandbox needs user "
        "namespaces (sysctl user.max_user_namespaces > 0, and on Ubuntu "
        f"kernel.apparmor_restrict_unprivileged_userns=0){remapped if staged.remapped else ''}"
    )


_FOREIGN_FILES = "the sandbox's probe wrote a file the workspace owner does not own; refusing to run commands"


def _owned_like(path: str, workspace: str) -> bool:
    """Whether the file a sandbox made belongs to the workspace's owner, as every file it makes must."""
    try:
        made, ws = os.stat(path), os.stat(workspace)
    except OSError:
        return False
    return (made.st_uid, made.st_gid) == (ws.st_uid, ws.st_gid) and not made.st_mode & 0o6000
