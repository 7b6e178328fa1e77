"""The command tools, ``shell`` and ``python``: one way to run a process inside the sandbox.

Each call is a fresh process in the workspace under
:class:`~tether.toolkits._sandbox.Sandbox`; nothing survives between calls
except files in the workspace. ``shell`` runs ``bash -c <command>``. ``python``
starts ``python3 -I`` (isolated mode: no user site-packages, no ``PYTHON*``
variables, no current directory on ``sys.path``) and feeds it the code on
stdin; the sandbox, not Python, is the protection: ``ctypes``, ``os.system``
and the rest all work and all stay inside. Both are ``effect="once"`` (a
command may do anything, so a crashed call is never re-run automatically) and
ask for approval by default.

>>> shell = shell_tool(Sandbox("/srv/project"), approval=False)  # doctest: +SKIP
>>> await shell.invoke({"command": "ls | wc -l"}, invocation)  # doctest: +SKIP
'12\\n'
>>> py = python_tool(Sandbox("/srv/project"), approval=False)  # doctest: +SKIP
>>> await py.invoke({"code": "print(2 ** 10)"}, invocation)  # doctest: +SKIP
'1024'
"""

from __future__ import annotations

import codecs
from collections.abc import Awaitable, Callable

from ..tools import Approval, Tool, tool
from ._sandbox import ExecResult, MiB, Sandbox
from ._sandbox.usage import fmt_bytes

__all__ = ["describe_sandbox", "format_result", "python_tool", "shell_tool"]

_GRACE = 10.0  # the sandbox enforces its own timeout; the tool's is only a backstop
_SHELL = (
    "Run a bash command line in the workspace directory and return its output "
    "(stdout, then stderr, then the exit code when it is not 0)."
)
_PYTHON = (
    "Run a Python 3 program in a fresh interpreter, with the workspace as the "
    "current directory, and return what it prints (stdout, then stderr, then the exit code "
    "when it is not 0). Only the standard library is guaranteed; use print() to show results."
)


def shell_tool(sandbox: Sandbox, *, approval: Approval = True) -> Tool:
    """A ``shell`` tool running ``bash -c <command>`` in ``sandbox``.

    Raises SandboxUnavailable now, rather than at the first call, when no
    sandbox can run and ``sandbox.unsafe_no_sandbox`` is not set.
    """

    async def shell(command: str) -> str:
        """
        Args:
            command: the bash command line, e.g. "ls -la src | head".
        """
        return format_result(await sandbox.run(["bash", "-c", command]))

    return _command_tool(sandbox, shell, _SHELL, approval)


def python_tool(sandbox: Sandbox, *, approval: Approval = True) -> Tool:
    """A ``python`` tool running code with ``python3 -I`` in ``sandbox``.

    Raises SandboxUnavailable now when no sandbox can run and
    ``sandbox.unsafe_no_sandbox`` is not set.
    """

    async def python(code: str) -> str:
        """
        Args:
            code: the complete program; print() what you need to see.
        """
        return format_result(await sandbox.run(["python3", "-I", "-"], stdin=code.encode()))

    return _command_tool(sandbox, python, _PYTHON, approval)


def _command_tool(sandbox: Sandbox, run: Callable[[str], Awaitable[str]], does: str, approval: Approval) -> Tool:
    """``run`` as a command tool: named after it, ``once``, within the sandbox's time, the sandbox described."""
    sandbox.check()
    return tool(
        name=run.__name__,
        effect="once",
        approval=approval,
        timeout=sandbox.limits.timeout + _GRACE,
        description=f"{does} {describe_sandbox(sandbox)}",
    )(run)


def describe_sandbox(sandbox: Sandbox) -> str:
    """What a model should know about where its command runs."""
    if sandbox.unsafe_no_sandbox:
        return "It runs directly on the host, without isolation."
    limits = sandbox.limits
    network = "Network access is allowed." if sandbox.network else "There is no network access."
    return (
        "It runs in an isolated sandbox: only the workspace is writable (every .git in it is read-only), "
        f"/tmp is private and starts empty, nothing persists between calls except workspace "
        f"files. {network} Limits: {limits.timeout:g} s wall time, {limits.cpu_seconds} s CPU, "
        f"{limits.memory // MiB} MiB memory, {limits.processes} processes, output cut after "
        f"{limits.output // 1024} KiB, workspace at most {fmt_bytes(limits.disk_bytes)}."
    )


def format_result(result: ExecResult) -> str:
    """An ExecResult as text for the model: stdout, stderr, exit code, limits hit."""
    parts: list[str] = []
    if result.stdout:
        parts.append(_show(result.stdout))
    if result.stderr:
        parts.append("[stderr]\n" + _show(result.stderr))
    if result.timed_out or result.killed_reason:
        parts.append(f"[stopped by the sandbox: {result.killed_reason}]")
    if result.exit_code != 0 and not result.timed_out:
        parts.append(f"[exit code {result.exit_code}]")
    if not result.sandboxed:
        parts.append("[ran on the host WITHOUT a sandbox (unsafe_no_sandbox=True)]")
    return "\n".join(p.rstrip("\n") for p in parts) if parts else "(no output)"


def _show(data: bytes) -> str:
    """Text as is; anything that is not UTF-8 text is described, not dumped."""
    if b"\x00" not in data:
        try:
            return codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
        except UnicodeDecodeError:
            pass
    return f"<binary output, {len(data)} bytes>"
