"""Walking the workspace from the host: by directory descriptor, no links followed, failing closed.

A sandboxed command may be running while tether walks the workspace (a parallel
tool call, or the command being measured), and it may swap a directory for a
symbolic link between the moment the walk lists it and the moment it enters it.
So :func:`walk` never goes through a path: every directory is opened relative
to its parent's descriptor with ``O_NOFOLLOW | O_DIRECTORY``, and the directory
it opened must be the one it listed (same device and inode). Anything it cannot
look at (a directory swapped or renamed meanwhile, an entry gone, a permission
error, more than ``max_depth`` levels or ``max_entries`` entries) raises
:class:`WalkFailed`: a walk is complete or it is an error, never a silent skip.

>>> import tempfile
>>> root = tempfile.mkdtemp()
>>> os.makedirs(os.path.join(root, "a", "b"))
>>> [found.rel for found in walk(root)]
['a', 'a/b']
>>> list(walk(root, max_depth=1))
Traceback (most recent call last):
tether.toolkits._walk.WalkFailed: 'a/b' is nested deeper than 1 levels
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["MAX_DEPTH", "Found", "WalkFailed", "remove_tree", "retrying", "shorten", "walk"]

MAX_DEPTH = 200  # levels below the root; the walk holds one descriptor per level
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
T = TypeVar("T")


class WalkFailed(Exception):
    """Part of the workspace could not be looked at; the message says which part and why."""


@dataclass(frozen=True, slots=True)
class Found:
    """One entry below the root: its ``/``-separated relative path and its ``lstat``.

    >>> Found("src/app.py", os.stat_result((0o100644,) + (0,) * 9)).name
    'app.py'
    """

    rel: str
    stat: os.stat_result

    @property
    def name(self) -> str:
        """The entry's own name."""
        return self.rel.rpartition("/")[2]


def walk(
    root: str,
    *,
    skip: Callable[[str], bool] = lambda rel: False,
    max_depth: int = MAX_DEPTH,
    max_entries: int | None = None,
) -> Iterator[Found]:
    """Every entry below ``root``, depth first; ``skip(rel)`` leaves an entry (and what it holds) out.

    Symbolic links are yielded, never followed. Raises WalkFailed (see the module).
    """
    count, rel = 0, ""
    levels: list[_Level] = []  # one open descriptor per level, each with the subdirectories left to enter
    try:
        levels.append(_Level(_open(None, root, ".", None)))
        while True:
            entries, dirs = _list(levels[-1].fd, rel, skip)
            levels[-1].pending = iter(dirs)
            for found in entries:
                count += 1
                if max_entries is not None and count > max_entries:
                    raise WalkFailed(f"the workspace holds more than {max_entries} entries")
                yield found
            while levels and (child := next(levels[-1].pending, None)) is None:
                os.close(levels.pop().fd)
            if child is None:
                return
            rel, listed = child
            if rel.count("/") + 1 > max_depth:
                raise WalkFailed(f"{shorten(rel)!r} is nested deeper than {max_depth} levels")
            levels.append(_Level(_open(levels[-1].fd, rel.rpartition("/")[2], rel, listed)))
    finally:
        for level in levels:
            os.close(level.fd)


@dataclass(slots=True)
class _Level:
    fd: int
    pending: Iterator[tuple[str, os.stat_result]] = iter(())


def retrying(attempt: Callable[[], T], *, tries: int = 3) -> T:
    """``attempt()``, again (a few milliseconds later) when it raises WalkFailed; the last failure stands.

    A command busy creating and deleting files makes a walk fail now and then;
    one that keeps a directory changing makes it fail every time.
    """
    for i in range(tries - 1):
        try:
            return attempt()
        except WalkFailed:
            time.sleep(0.005 * (i + 1))
    return attempt()


def remove_tree(path: str) -> None:
    """Remove the directory ``path`` and all it holds, at any depth; links are removed, never followed.

    One descriptor and no recursion (``shutil.rmtree`` recurses, and 10,000 nested
    folders raise RecursionError): the contents of each folder are renamed up into
    ``path`` until nothing is left. Raises OSError naming what could not be removed.

    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> os.makedirs(os.path.join(root, "a", "b"))
    >>> remove_tree(root); os.path.exists(root)
    False
    """
    top = os.open(path, _DIR_FLAGS)
    moved = 0
    try:
        while names := os.listdir(top):
            for name in names:
                if not stat.S_ISDIR(os.stat(name, dir_fd=top, follow_symlinks=False).st_mode):
                    os.unlink(name, dir_fd=top)
                    continue
                folder = os.open(name, _DIR_FLAGS, dir_fd=top)
                try:
                    for child in os.listdir(folder):
                        moved += 1
                        os.rename(child, f".tether-rm-{moved}-{os.getpid()}", src_dir_fd=folder, dst_dir_fd=top)
                finally:
                    os.close(folder)
                os.rmdir(name, dir_fd=top)
    finally:
        os.close(top)
    os.rmdir(path)


def _open(parent: int | None, name: str, rel: str, listed: os.stat_result | None) -> int:
    """Open the directory ``name`` in ``parent``; it must be the directory that was listed."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        raise WalkFailed(_why(rel, exc)) from None
    if listed is not None:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (listed.st_dev, listed.st_ino):
            os.close(fd)
            raise WalkFailed(f"{shorten(rel)!r} was replaced while the workspace was being walked")
    return fd


def _list(fd: int, rel: str, skip: Callable[[str], bool]) -> tuple[list[Found], list[tuple[str, os.stat_result]]]:
    """The entries of the open directory ``fd`` (at ``rel``), and the subdirectories to enter."""
    prefix = f"{rel}/" if rel else ""
    entries: list[Found] = []
    dirs: list[tuple[str, os.stat_result]] = []
    try:
        with os.scandir(fd) as it:
            listed = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in it]
    except OSError as exc:
        raise WalkFailed(_why(rel or ".", exc)) from None
    for name, was_dir in listed:
        child = prefix + name
        if skip(child):
            continue
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError as exc:
            raise WalkFailed(_why(child, exc)) from None
        if stat.S_ISDIR(st.st_mode) != was_dir:  # swapped between the listing and this look
            raise WalkFailed(f"{shorten(child)!r} was replaced while the workspace was being walked")
        entries.append(Found(child, st))
        if stat.S_ISDIR(st.st_mode):
            dirs.append((child, st))
    return entries, dirs


def shorten(rel: str) -> str:
    """``rel``, its middle cut out when it is long (for messages)."""
    return rel if len(rel) <= 120 else f"{rel[:60]}...{rel[-50:]}"


def _why(rel: str, exc: OSError) -> str:
    where = shorten(rel)
    if exc.errno == errno.ENOENT:
        return f"{where!r} vanished while the workspace was being walked"
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return f"{where!r} turned into a symbolic link or a file while the workspace was being walked"
    if exc.errno == errno.EACCES:
        return f"{where!r} cannot be looked into (permission denied)"
    return f"{where!r} cannot be looked at ({exc.strerror})"
