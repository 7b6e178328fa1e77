"""The ``shell`` tool: run a bash command line inside the sandbox.

Each call is a fresh ``bash -c`` in the workspace under
:class:`~tether.toolkits._sandbox.Sandbox`; nothing survives between calls
except files in the workspace. ``effect="once"`` (a command may do anything,
so a crashed call is never re-run automatically) and approval by default.

>>> shell = shell_tool(Sandbox("/srv/project"), approval=False)  # doctest: +SKIP
>>> await shell.invoke({"command": "ls | wc -l"}, invocation)  # doctest: +SKIP
'12\\n'
"""

from __future__ import annotations

import codecs

from ..tools import Approval, Tool, tool
from ._sandbox import ExecResult, MiB, Sandbox
from ._sandbox.usage import fmt_bytes

__all__ = ["describe_sandbox", "format_result", "shell_tool"]

_GRACE = 10.0  # the sandbox enforces its own timeout; the tool's is only a backstop


def shell_tool(sandbox: Sandbox, *, approval: Approval = True) -> Tool:
    """A ``shell`` tool running ``bash -c <command>`` in ``sandbox``.

    Raises SandboxUnavailable now, rather than at the first call, when no
    sandbox can run and ``sandbox.unsafe_no_sandbox`` is not set.
    """
    sandbox.check()

    @tool(
        name="shell",
        effect="once",
        approval=approval,
        timeout=sandbox.limits.timeout + _GRACE,
        description="Run a bash command line in the workspace directory and return its output "
        "(stdout, then stderr, then the exit code when it is not 0). " + describe_sandbox(sandbox),
    )
    async def shell(command: str) -> str:
        """
        Args:
            command: the bash command line, e.g. "ls -la src | head".
        """
        return format_result(await sandbox.run(["bash", "-c", command]))

    return shell


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
