"""Built-in tools for working in a directory: files, shell and Python.

``workspace_tools(path)`` gives an agent seven tools confined to ``path``:

* ``read_file``, ``list_dir``, ``find_files``: read-only, no approval.
* ``write_file``, ``edit_file``: path-confined writes, approval by default.
* ``shell``, ``python``: commands in a bubblewrap sandbox (no network, read-only
  system, only the workspace writable, resource limits), approval by default.

The sandbox fails closed: without a working bubblewrap, building the command
tools raises :class:`~tether.exceptions.SandboxUnavailable` unless you pass
``unsafe_no_sandbox=True``, which warns and runs commands on the host.

>>> from tether.toolkits import workspace_tools
>>> tools = workspace_tools("/srv/project")  # doctest: +SKIP
>>> [t.name for t in tools]  # doctest: +SKIP
['read_file', 'write_file', 'edit_file', 'list_dir', 'find_files', 'shell', 'python']
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..exceptions import SandboxUnavailable
from ..tools import Approval, Tool
from ._sandbox import ExecResult, Sandbox, SandboxLimits, UnsandboxedWarning, probe_sandbox
from ._workspace import PathRefused, Workspace
from .commands import python_tool, shell_tool
from .files import edit_file_tool, file_tools, find_files_tool, list_dir_tool, read_file_tool, write_file_tool
from .offload import offload_results

__all__ = [
    "edit_file_tool",
    "ExecResult",
    "file_tools",
    "find_files_tool",
    "list_dir_tool",
    "offload_results",
    "PathRefused",
    "probe_sandbox",
    "python_tool",
    "read_file_tool",
    "Sandbox",
    "SandboxLimits",
    "SandboxUnavailable",
    "shell_tool",
    "UnsandboxedWarning",
    "Workspace",
    "workspace_tools",
    "write_file_tool",
]


def workspace_tools(
    workspace: str | os.PathLike[str],
    *,
    approval: Approval = True,
    network: bool = False,
    limits: SandboxLimits | None = None,
    unsafe_no_sandbox: bool = False,
    bwrap: str = "bwrap",
    read_only_paths: Sequence[str] = (),
) -> list[Tool]:
    """File, shell and Python tools confined to ``workspace``.

    ``approval`` applies to the tools that change things (writes, shell, python).
    ``read_only_paths`` are host folders the commands may also read (a skill's scripts).
    Raises SandboxUnavailable when bubblewrap cannot run, unless
    ``unsafe_no_sandbox=True``.
    """
    workspace = os.fspath(workspace)
    sandbox = Sandbox(
        workspace,
        limits=limits or SandboxLimits(),
        network=network,
        read_only_paths=tuple(read_only_paths),
        bwrap=bwrap,
        unsafe_no_sandbox=unsafe_no_sandbox,
    )
    return [
        *file_tools(workspace, approval=approval),
        shell_tool(sandbox, approval=approval),
        python_tool(sandbox, approval=approval),
    ]
