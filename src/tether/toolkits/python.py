"""The ``python`` tool: run Python code in a fresh interpreter inside the sandbox.

Each call starts ``python3 -I`` (isolated mode: no user site-packages, no
``PYTHON*`` variables, no current directory on ``sys.path``) in the workspace
under :class:`~tether.toolkits._sandbox.Sandbox` and feeds it the code on
stdin. Nothing survives between calls except workspace files. The sandbox, not
Python, is the protection: ``ctypes``, ``os.system`` and the rest all work and
all stay inside. ``effect="once"`` and approval by default.

>>> py = python_tool(Sandbox("/srv/project"), approval=False)  # doctest: +SKIP
>>> await py.invoke({"code": "print(2 ** 10)"}, invocation)  # doctest: +SKIP
'1024'
"""

from __future__ import annotations

from ..tools import Approval, Tool, tool
from ._sandbox import Sandbox
from .shell import _GRACE, describe_sandbox, format_result

__all__ = ["python_tool"]


def python_tool(sandbox: Sandbox, *, approval: Approval = True) -> Tool:
    """A ``python`` tool running code with ``python3 -I`` in ``sandbox``.

    Raises SandboxUnavailable now when no sandbox can run and
    ``sandbox.unsafe_no_sandbox`` is not set.
    """
    sandbox.check()

    @tool(
        name="python",
        effect="once",
        approval=approval,
        timeout=sandbox.limits.timeout + _GRACE,
        description="Run a Python 3 program in a fresh interpreter, with the workspace as the "
        "current directory, and return what it prints (stdout, then stderr, then the exit code "
        "when it is not 0). Only the standard library is guaranteed; use print() to show "
        "results. " + describe_sandbox(sandbox),
    )
    async def python(code: str) -> str:
        """
        Args:
            code: the complete program; print() what you need to see.
        """
        return format_result(await sandbox.run(["python3", "-I", "-"], stdin=code.encode()))

    return python
