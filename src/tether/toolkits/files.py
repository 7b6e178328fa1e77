"""File tools: read, write, edit and list files inside one workspace directory.

They run in the agent's own process (no sandbox needed) and every path goes
through :class:`~tether.toolkits._workspace.Workspace`, which refuses paths that
leave the workspace, writes to any ``.git`` (nested ones included), any access to
``.tether``, and special files (FIFOs, sockets, devices). Reads
have ``effect="none"`` and no approval; writes are ``effect="idempotent"``
(doing the same write twice leaves the same file) and need approval by default.

>>> tools = file_tools("/srv/project", approval=False)  # doctest: +SKIP
>>> [t.name for t in tools]  # doctest: +SKIP
['read_file', 'write_file', 'edit_file', 'list_dir', 'find_files']
"""

from __future__ import annotations

import codecs
import os
import re
import stat

from ..tools import Approval, Tool, tool
from ._walk import Found, WalkFailed, retrying, walk
from ._workspace import DirEntry, PathRefused, Workspace

__all__ = [
    "edit_file_tool",
    "file_tools",
    "find_files_tool",
    "list_dir_tool",
    "read_file_tool",
    "write_file_tool",
]

MAX_READ_BYTES = 1 << 20
WINDOW_BYTES = 50_000  # what read_file returns from a byte offset: a window, not the rest of a large file
MAX_LIST_ENTRIES = 500
MAX_FOUND_NAMES = 40  # bounded: a deep repository must not flood the model's context
MAX_FOUND_FOLDERS = 8
MAX_WALKED = 500_000  # entries find_files looks at before it gives up (and says so)


def file_tools(workspace: str | os.PathLike[str] | Workspace, *, approval: Approval = True) -> list[Tool]:
    """``read_file``, ``write_file``, ``edit_file``, ``list_dir`` and ``find_files`` for one workspace."""
    ws = _workspace(workspace)
    return [
        read_file_tool(ws),
        write_file_tool(ws, approval=approval),
        edit_file_tool(ws, approval=approval),
        list_dir_tool(ws),
        find_files_tool(ws),
    ]


def read_file_tool(workspace: str | os.PathLike[str] | Workspace, *, max_bytes: int = MAX_READ_BYTES) -> Tool:
    """A ``read_file`` tool: text of a workspace file, by line range."""
    ws = _workspace(workspace)

    @tool(name="read_file", effect="none")
    def read_file(path: str, start_line: int = 1, max_lines: int = 2000, offset: int = 0) -> str:
        """Read a text file in the workspace. Long files come in pieces: the reply says which
        lines it shows and how to ask for the next ones.

        Args:
            path: file path, relative to the workspace root.
            start_line: first line to return, counting from 1.
            max_lines: most lines to return.
            offset: instead of lines, read a window of the file from this byte (for a large file,
                or one long line; the reply says the offset of the next window).
        """
        if start_line < 1 or max_lines < 1 or offset < 0:
            raise ValueError("start_line and max_lines must be at least 1, offset at least 0")
        if offset:
            return _window(ws, path, offset, min(WINDOW_BYTES, max_bytes))
        data, size = ws.read_bytes(path, max_bytes)
        text = _text(data, complete=len(data) == size)
        if text is None:
            return f"<binary file, {size} bytes>"
        lines = text.splitlines(keepends=True)
        shown = lines[start_line - 1 : start_line - 1 + max_lines]
        body = "".join(shown)
        end = start_line - 1 + len(shown)
        if end < len(lines):
            body += (
                f"\n[... showing lines {start_line}-{end} of {len(lines)}; "
                f"call read_file with start_line={end + 1} for more]"
            )
        elif len(data) < size:
            body += (
                f"\n[... file is {size} bytes; only the first {len(data)} bytes can be read by lines: "
                f"call read_file with offset={len(data)} for the rest]"
            )
        elif not lines:
            body = "(empty file)"
        elif not shown:
            body = f"(the file has only {len(lines)} lines)"
        return body

    return read_file


def _window(ws: Workspace, path: str, offset: int, limit: int) -> str:
    """About ``limit`` bytes of a file from ``offset``, as text. The window starts and ends on whole
    UTF-8 characters, so the windows the replies point to add up to the file, character for character."""
    data, size = ws.read_bytes(path, limit + 1, offset)
    if offset >= size:
        return f"(the file has only {size} bytes)"
    cut = min(len(data), limit)
    while 0 < cut < len(data) and data[cut] & 0xC0 == 0x80:  # do not split the character at the end
        cut -= 1
    skip = 0
    while skip < cut and data[skip] & 0xC0 == 0x80:  # nor start inside one
        skip += 1
    text = data[skip:cut].decode("utf-8", errors="replace")
    if "\x00" in text:
        return f"<binary file, {size} bytes>"
    start, end = offset + skip, offset + cut
    more = f"call read_file with offset={end} for more" if end < size else "the end of the file"
    return f"{text}\n[... bytes {start}-{end} of {size}; {more}]"


def write_file_tool(workspace: str | os.PathLike[str] | Workspace, *, approval: Approval = True) -> Tool:
    """A ``write_file`` tool: create or replace a workspace file."""
    ws = _workspace(workspace)

    @tool(name="write_file", effect="idempotent", approval=approval)
    def write_file(path: str, content: str) -> str:
        """Create a file in the workspace or replace its whole content. Parent directories are
        created. To change part of an existing file, prefer edit_file.

        Args:
            path: file path, relative to the workspace root.
            content: the complete new content of the file.
        """
        data = content.encode()
        if _current(ws, path, len(data)) == data:
            return f"unchanged: {path!r} already has this content ({len(data)} bytes)"
        created = ws.write_bytes(path, data)
        return f"{'created' if created else 'replaced'} {path!r} ({len(data)} bytes)"

    return write_file


def edit_file_tool(workspace: str | os.PathLike[str] | Workspace, *, approval: Approval = True) -> Tool:
    """An ``edit_file`` tool: replace one exact snippet of a workspace file."""
    ws = _workspace(workspace)

    @tool(name="edit_file", effect="idempotent", approval=approval)
    def edit_file(path: str, old: str, new: str) -> str:
        """Replace one exact snippet of a text file with new text. The snippet must occur
        exactly once: copy it verbatim (whitespace included) with enough surrounding lines
        to make it unique.

        Args:
            path: file path, relative to the workspace root.
            old: exact text to replace; must occur exactly once.
            new: the text to put in its place.
        """
        if not old:
            raise ValueError("old must not be empty; use write_file to create a file")
        data, size = ws.read_bytes(path, MAX_READ_BYTES)
        text = _text(data, complete=True) if len(data) == size else None
        if text is None:
            raise ValueError(f"{path!r} is binary or larger than {MAX_READ_BYTES} bytes")
        found = text.count(old)
        # Already applied (a retry after a crash): every `old` sits inside the one `new`.
        if new and text.count(new) == 1 and found == new.count(old):
            return f"unchanged: {path!r} already contains the new text"
        if found == 0:
            raise ValueError(f"snippet not found in {path!r}; read the file and copy it exactly")
        if found > 1:
            raise ValueError(
                f"snippet occurs {found} times in {path!r}; include more surrounding lines "
                "so that it occurs exactly once"
            )
        ws.write_bytes(path, text.replace(old, new, 1).encode())
        line = text[: text.index(old)].count("\n") + 1
        return f"edited {path!r}: replaced 1 occurrence at line {line}"

    return edit_file


def list_dir_tool(workspace: str | os.PathLike[str] | Workspace, *, max_entries: int = MAX_LIST_ENTRIES) -> Tool:
    """A ``list_dir`` tool: the entries of a workspace directory."""
    ws = _workspace(workspace)

    @tool(name="list_dir", effect="none")
    def list_dir(path: str = ".") -> str:
        """List a directory in the workspace: one entry per line, directories end with "/",
        files show their size in bytes, links show their target.

        Args:
            path: directory relative to the workspace root; "." is the root.
        """
        entries = ws.list(path)
        lines = [_entry_line(e) for e in entries[:max_entries]]
        if len(entries) > max_entries:
            lines.append(f"[... {len(entries) - max_entries} more entries not shown]")
        return "\n".join(lines) if lines else "(empty directory)"

    return list_dir


def find_files_tool(
    workspace: str | os.PathLike[str] | Workspace,
    *,
    max_names: int = MAX_FOUND_NAMES,
    max_folders: int = MAX_FOUND_FOLDERS,
) -> Tool:
    """A ``find_files`` tool: count the workspace files that match a glob, say where they are.

    Counting is done here, not by the model: small models miscount listings. A
    pattern without a "/" matches file names in every folder (``"*.py"`` counts
    the Python files of the whole tree, the way people mean "in this folder");
    a pattern with a "/" is a path from the root (``"./*.py"`` is the top level
    only, ``"src/**/*.py"`` one subtree). The reply is bounded however deep the
    tree: the count, then how many are in each top-level folder (at most
    ``max_folders``), then at most ``max_names`` paths. Symlinks are not
    followed, and no ``.git`` (at any depth) nor ``.tether`` is searched.
    """
    ws = _workspace(workspace)

    @tool(name="find_files", effect="none")
    def find_files(pattern: str) -> str:
        """Count the files whose names match a glob pattern in this folder and every folder
        below it, and say where they are; e.g. "*.py" for the Python files.

        Args:
            pattern: a glob such as "*.py"; with a "/" it is a path from the workspace root:
                "./*.py" is the top level only, "src/*.py" one folder.
        """
        found, skipped = _glob(ws, pattern)
        text = found_text(pattern, found, max_names=max_names, max_folders=max_folders)
        if skipped:
            text += f" (not searched: {', '.join(skipped[:3])}{' ...' if len(skipped) > 3 else ''})"
        return text

    return find_files


def found_text(pattern: str, found: list[str], *, max_names: int, max_folders: int) -> str:
    """What ``find_files`` tells the model: the count, where they are, then a capped list.

    >>> found_text("*.py", ["a.py", "src/b.py", "src/c.py"], max_names=2, max_folders=5)
    "3 files match '*.py': 2 in src/, 1 at the top level. a.py, src/b.py [... 1 more]"
    """
    n = len(found)
    head = f"{n} file{'s' if n != 1 else ''} match {pattern!r}"
    if not found:
        return head + ("" if "/" in pattern else " in this folder or any folder below it")
    where = _where(found, max_folders)
    names = ", ".join(found[:max_names])
    more = f" [... {n - max_names} more]" if n > max_names else ""
    return f"{head}: {where}. {names}{more}"


def _where(found: list[str], max_folders: int) -> str:
    """``"80 in src/, 54 in tests/, 2 at the top level"`` (largest first, capped)."""
    per: dict[str, int] = {}
    for rel in found:
        top = rel.split("/", 1)[0] + "/" if "/" in rel else ""
        per[top] = per.get(top, 0) + 1
    if list(per) == [""]:
        return "all at the top level" if len(found) > 1 else "at the top level"
    ranked = sorted(per.items(), key=lambda kv: (-kv[1], kv[0]))
    parts = [f"{k} in {d}" if d else f"{k} at the top level" for d, k in ranked[:max_folders]]
    rest = ranked[max_folders:]
    if rest:
        parts.append(f"{sum(k for _, k in rest)} in {len(rest)} other folders")
    return ", ".join(parts)


# Folders that hold installed or generated files, not the project's own: people asking
# "how many Python files are here?" do not mean the 5,000 in a virtual environment.
NOT_SEARCHED = frozenset(
    ("node_modules", "__pycache__", "site-packages", ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache")
)


def _glob(ws: Workspace, pattern: str) -> tuple[list[str], list[str]]:
    """The matching files (sorted paths) and the folders left out (installed or generated files)."""
    if not pattern or pattern.startswith("/") or ".." in pattern.split("/"):
        raise PathRefused(f"pattern {pattern!r} must be relative to the workspace, without '..'")
    rest = pattern.removeprefix("./")
    anchored = "/" in rest or rest != pattern  # a path from the root, not a name anywhere
    regex = _glob_regex(rest)
    top_skip = {*ws.hidden, *ws.read_only}
    skipped: list[str] = []

    def skip(rel: str) -> bool:
        name = rel.rpartition("/")[2]
        if name.casefold() == ".git" or ("/" not in rel and name in top_skip):
            return True
        if name in NOT_SEARCHED or os.path.isfile(os.path.join(ws.root, rel, "pyvenv.cfg")):
            if name != "__pycache__":
                skipped.append(rel + "/")
            return True
        return False

    def search() -> list[str]:
        skipped.clear()
        return [f.rel for f in walk(ws.root, skip=skip, max_entries=MAX_WALKED) if _regular(f)]

    try:
        found = retrying(search)
    except WalkFailed as exc:
        raise PathRefused(f"cannot search the workspace: {exc}; nothing was counted") from None
    hits = (rel for rel in found if regex.fullmatch(rel if anchored else rel.rpartition("/")[2]))
    return sorted(hits), sorted(skipped)


def _regular(found: Found) -> bool:
    return stat.S_ISREG(found.stat.st_mode)


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob as a regex over "/"-separated paths: ``*`` and ``?`` stay in one folder, ``**/`` spans any."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        else:
            c = pattern[i]
            out.append("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c))
            i += 1
    return re.compile("".join(out))


def _entry_line(entry: DirEntry) -> str:
    if entry.kind == "dir":
        return f"{entry.name}/"
    if entry.kind == "file":
        return f"{entry.name}  ({entry.size} bytes)"
    if entry.kind == "link":
        return f"{entry.name} -> {entry.target}"
    return f"{entry.name}  (special file)"


def _workspace(workspace: str | os.PathLike[str] | Workspace) -> Workspace:
    return workspace if isinstance(workspace, Workspace) else Workspace(os.fspath(workspace))


def _current(ws: Workspace, path: str, size: int) -> bytes | None:
    """The file's bytes when it exists and is ``size`` bytes long, else None."""
    try:
        data, actual = ws.read_bytes(path, size + 1)
    except PathRefused:
        return None
    return data if actual == size else None


def _text(data: bytes, *, complete: bool) -> str | None:
    """``data`` decoded as UTF-8, or None when it looks binary.

    A multi-byte character cut at the end of a partial read is not binary.
    """
    if b"\x00" in data:
        return None
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(data, final=complete)
    except UnicodeDecodeError:
        return None
