"""The host's own code: what the tether process imports or runs, which no tool may change.

A sandboxed command must not change a file the host will execute later: the
interpreter and its standard library, the virtualenv and its site-packages
(where a ``.pth`` file runs code at every start), tether's own source, every
directory on ``sys.path`` and ``PATH``. Most of those are not in the sandbox at
all (only the system directories, read-only, and the workspace are mounted).
The danger is a workspace that holds some of them: a checkout with its
``.venv`` and ``PYTHONPATH=src`` (the README's own quick start runs tether in
its checkout), a ``PATH`` entry such as ``node_modules/.bin``. So
:func:`host_code` names, for one workspace:

* ``read_only``: each host-code path inside it (mounted read-only for commands,
  refused by the file tools);
* ``pinned``: every folder between the workspace root and one of those. They
  stay writable but become mount points, which cannot be renamed or removed, so
  the path cannot be moved aside and built again with other contents;
* ``problem``: why nothing may run at all: the workspace is itself on
  ``sys.path`` or ``PATH`` (or inside such a directory, or a package), or host
  code reaches into it through a symbolic link in it, or a host-code path in it
  does not exist yet (a command could create it).

The paths are the ones of this process, looked up at every command: its
``sys.path``, ``PATH``, prefixes and interpreter, the packages it has imported
and the ones an editable install maps. Another interpreter that the host may
start later from inside the workspace is not known here.

>>> host_code("/nonexistent/workspace").read_only
()
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["HostCode", "host_code"]

_SYSTEM_BIN = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


@dataclass(frozen=True, slots=True)
class HostCode:
    """Host code in or around one workspace (paths relative to it); see the module.

    >>> HostCode(("src",)).protects("src/tether/agent.py"), HostCode(("src",)).protects("srcs")
    (True, False)
    """

    read_only: tuple[str, ...] = ()
    pinned: tuple[str, ...] = ()
    problem: str | None = None

    def protects(self, rel: str) -> bool:
        """Whether the relative path ``rel`` is host code (or inside it)."""
        return any(rel == p or rel.startswith(p + "/") for p in self.read_only)


def host_code(workspace: str, *, extra: Sequence[str] = ()) -> HostCode:
    """What of this process's code lies in ``workspace`` (absolute, resolved); ``extra`` adds programs."""
    read_only: set[str] = set()
    pinned: set[str] = set()
    resolved: dict[str, str] = {}
    for path, search in dict.fromkeys(_paths(extra)):
        for candidate in dict.fromkeys((path, _realpath(path, resolved))):
            if _within(workspace, candidate):
                # A prefix (say /usr) may hold a workspace; a search path or a package may not.
                if search or candidate == workspace:
                    return HostCode(problem=_inside(workspace, candidate))
                continue
            if not _within(candidate, workspace):
                continue
            rel, problem = _keepable(workspace, os.path.relpath(candidate, workspace), path)
            if problem is not None:
                return HostCode(problem=problem)
            read_only.add(rel)
            parts = rel.split("/")
            pinned.update("/".join(parts[:i]) for i in range(1, len(parts)))
    tops = tuple(sorted(p for p in read_only if not any(p.startswith(q + "/") for q in read_only)))
    pins = tuple(sorted(p for p in pinned if not any(p == q or p.startswith(q + "/") for q in tops)))
    return HostCode(tops, pins)


def _paths(extra: Sequence[str]) -> Iterator[tuple[str, bool]]:
    """(absolute path, is it searched for code by name) for everything this process imports or runs."""
    for entry in sys.path:
        yield os.path.abspath(entry or os.curdir), True
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        yield os.path.abspath(entry or os.curdir), True
    for entry in _SYSTEM_BIN:  # where the sandbox's helpers are found (limits.helper)
        yield entry, True
    for prefix in {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}:
        yield os.path.abspath(prefix), False
    if sys.executable:
        yield os.path.abspath(sys.executable), False
        yield os.path.dirname(os.path.abspath(sys.executable)), False
    for name, module in list(sys.modules.items()):
        if "." in name:
            continue
        for entry in getattr(module, "__path__", None) or ():  # a package (namespace ones too)
            yield os.path.abspath(entry), True
    for finder in sys.meta_path:  # editable installs map packages that are not on sys.path
        mapping = getattr(sys.modules.get(getattr(finder, "__module__", "")), "MAPPING", None)
        if isinstance(mapping, dict):
            for entry in mapping.values():
                if isinstance(entry, str):
                    yield os.path.abspath(entry), True
    for program in extra:
        yield os.path.abspath(program), False


def _realpath(path: str, resolved: dict[str, str]) -> str:
    """``os.path.realpath``, reusing the parent's resolution when the last name is no link."""
    if path in resolved:
        return resolved[path]
    parent, name = os.path.split(path)
    real = None
    if name and parent in resolved:
        try:
            if not stat.S_ISLNK(os.lstat(path).st_mode):
                real = os.path.join(resolved[parent], name)
        except OSError:
            pass  # let realpath say what it is
    resolved[path] = real or os.path.realpath(path)
    return resolved[path]


def _keepable(workspace: str, rel: str, named: str) -> tuple[str, str | None]:
    """What to keep read-only for host code at ``rel``, or why it cannot be kept.

    A link as the last name is kept by keeping the folder that holds it; a link
    on the way there, or nothing there yet, cannot be kept.
    """
    here, parts = workspace, rel.split("/")
    what = f"{named!r}, which this process imports or runs code from,"
    for i, part in enumerate(parts):
        here = os.path.join(here, part)
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            return rel, (
                f"{what} lies in the workspace {workspace!r} but does not exist: a command could "
                "create it; create it or take it off sys.path/PATH"
            )
        if stat.S_ISLNK(st.st_mode):
            if i == len(parts) - 1 and i > 0:
                return "/".join(parts[:-1]), None
            return (
                rel,
                f"{what} is reached through the symbolic link {here!r} in the workspace, which a command could change",
            )
    return rel, None


def _inside(workspace: str, code: str) -> str:
    return (
        f"the workspace {workspace!r} is on this process's import or program path ({code!r}): "
        "a command could plant code that tether would run; use a workspace outside it "
        "(run tether from another directory, or take it off sys.path/PATH)"
    )


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")
