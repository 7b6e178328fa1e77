"""Path confinement for the file tools: every path a model names stays in the workspace.

A path is joined to the workspace root, resolved with ``os.path.realpath`` (so
``..`` and symlinks are followed) and refused unless the result is inside the
root. Opening then walks the *resolved* path one component at a time from a
descriptor of the root with ``O_NOFOLLOW``: if anything was swapped for a
symlink between the check and the open (a sandboxed command may be running at
the same time), the open fails instead of following it out.

Every ``.git`` (the top one, nested repositories, ``.git`` files of submodules)
may be read but not written: a path with a ``.git`` component anywhere, in any
letter case, is refused for writes, and so is the host's own code when it lies
in the workspace (:mod:`tether.toolkits._hostcode`). ``.tether`` (tether's own state) is neither
readable nor writable. Only regular files are read or replaced: FIFOs, sockets
and devices are refused at once (opened non-blocking, type checked on the open
descriptor), never waited on.

>>> ws = Workspace("/srv/project")  # doctest: +SKIP
>>> ws.relative("src/../README.md")  # doctest: +SKIP
'README.md'
>>> ws.relative("../etc/passwd")  # doctest: +SKIP
Traceback (most recent call last):
PathRefused: path '../etc/passwd' is outside the workspace
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from ..exceptions import UserError
from ._hostcode import host_code

__all__ = ["DirEntry", "PathRefused", "Workspace"]

Kind = Literal["dir", "file", "link", "other"]
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO for reading must not wait for a writer (it has no effect on files).
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_TEMP_PREFIX = ".tether-tmp-"  # short, so any name the filesystem accepts can be replaced


class PathRefused(ValueError):
    """A path the model gave is outside the workspace or protected (shown to the model)."""


@dataclass(frozen=True, slots=True)
class DirEntry:
    """One entry of a listed directory; ``target`` is set for symbolic links.

    >>> DirEntry("src", "dir", 4096).kind
    'dir'
    """

    name: str
    kind: Kind
    size: int
    target: str = ""


@dataclass(frozen=True, slots=True)
class Workspace:
    """The directory the file tools may touch.

    >>> Workspace("/srv/project").read_only  # doctest: +SKIP
    ('.git',)
    """

    root: str
    read_only: tuple[str, ...] = (".git",)
    hidden: tuple[str, ...] = (".tether",)

    def __post_init__(self) -> None:
        root = os.path.realpath(os.fspath(self.root))
        if not os.path.isdir(root):
            raise UserError(f"workspace {self.root!r} is not a directory")
        object.__setattr__(self, "root", root)

    def relative(self, path: str, *, write: bool = False) -> str:
        """``path`` resolved and made relative to the root (``"."`` for the root itself).

        Raises PathRefused for paths that leave the workspace, and for hidden
        (or, with ``write=True``, read-only) entries.
        """
        if not path or "\x00" in path:
            raise PathRefused(f"path {path!r} is empty or contains a NUL byte")
        real = os.path.realpath(os.path.join(self.root, path))
        if real != self.root and not real.startswith(self.root + os.sep):
            raise PathRefused(
                f"path {path!r} is outside the workspace (it resolves to {real!r}); "
                "use a path inside the workspace, relative to it"
            )
        rel = os.path.relpath(real, self.root)
        parts = rel.split(os.sep)
        if parts[0] in self.hidden:
            raise PathRefused(f"path {path!r} is inside {parts[0]!r}, which tools may not access")
        if write and rel == ".":
            raise PathRefused(f"path {path!r} is read-only for tools")
        if write and (protected := self._protected(parts)):
            raise PathRefused(f"path {path!r} is inside {protected!r}, which is read-only for tools")
        if write:
            host = host_code(self.root)
            if host.problem is not None:
                raise PathRefused(f"writes are refused: {host.problem}")
            if host.protects(rel):
                raise PathRefused(f"path {path!r} is code the tether process imports or runs; read-only for tools")
        return rel

    def _protected(self, parts: list[str]) -> str | None:
        """The read-only entry ``parts`` lies in: ``.git`` at any depth (any case), or a top-level one."""
        for i, part in enumerate(parts):
            if part.casefold() == ".git" or (i == 0 and part in self.read_only):
                return os.path.join(*parts[: i + 1])
        return None

    @contextlib.contextmanager
    def _parent_fd(self, rel: str, *, create: bool = False) -> Iterator[tuple[int, str]]:
        """An open descriptor of ``rel``'s parent directory and ``rel``'s last name."""
        parts = [] if rel == "." else rel.split(os.sep)
        fd = os.open(self.root, _DIR_FLAGS)
        try:
            for part in parts[:-1]:
                made = False
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o777, dir_fd=fd)
                        made = True
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    # O_NOFOLLOW|O_DIRECTORY reports ENOTDIR for a symlink; say what happened.
                    swapped = OSError(errno.ELOOP, "symbolic link") if _is_link(part, fd) else exc
                    raise PathRefused(_explain(rel, swapped)) from None
                os.close(fd)
                fd = child
                if made:
                    self._give_to_owner(fd, None)
            yield fd, parts[-1] if parts else "."
        finally:
            os.close(fd)

    def read_bytes(self, path: str, limit: int, offset: int = 0) -> tuple[bytes, int]:
        """Up to ``limit`` bytes of a regular file from ``offset``, and its full size."""
        rel = self.relative(path)
        with self._parent_fd(rel) as (parent, name):
            fd = _open_regular(path, name, parent)
        with os.fdopen(fd, "rb") as f:
            f.seek(offset)
            return f.read(limit), os.fstat(f.fileno()).st_size

    def write_bytes(self, path: str, data: bytes) -> bool:
        """Replace a file's contents atomically; True when the file was new.

        Missing parent directories are created. The new contents are written to
        a temporary file beside the target and renamed over it, so a crash
        leaves either the old or the new file, never half of one.
        """
        rel = self.relative(path, write=True)
        with self._parent_fd(rel, create=True) as (parent, name):
            try:
                old = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                old = None
            if old is not None and not stat.S_ISREG(old.st_mode):
                raise PathRefused(f"{path!r} exists and is not a regular file{_kind(old.st_mode)}")
            tmp = f"{_TEMP_PREFIX}{secrets.token_hex(4)}"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            # New contents never inherit setuid, setgid or sticky bits: tether may run as root.
            mode = stat.S_IMODE(old.st_mode) & 0o777 if old else 0o644
            fd = os.open(tmp, flags, mode, dir_fd=parent)
            try:
                self._give_to_owner(fd, old)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=parent)
                raise
            return old is None

    def _give_to_owner(self, fd: int, old: os.stat_result | None) -> None:
        """Make what root wrote belong to whom it would otherwise: the replaced file's owner,
        or the workspace's. (A non-root tether's files are its own, as they should be.)"""
        if os.geteuid() != 0:
            return
        owner = old or os.stat(self.root)
        if (owner.st_uid, owner.st_gid) != (0, 0):
            os.fchown(fd, owner.st_uid, owner.st_gid)

    def list(self, path: str) -> list[DirEntry]:
        """The entries of a directory, sorted by name, hidden entries left out."""
        rel = self.relative(path)
        with self._parent_fd(rel) as (parent, name):
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=parent) if rel != "." else os.dup(parent)
            except OSError as exc:
                raise PathRefused(_explain(path, exc)) from None
        try:
            entries = []
            with os.scandir(fd) as it:
                for entry in it:
                    if rel == "." and entry.name in self.hidden:
                        continue
                    st = entry.stat(follow_symlinks=False)
                    kind = _KINDS.get(stat.S_IFMT(st.st_mode), "other")
                    target = os.readlink(entry.name, dir_fd=fd) if kind == "link" else ""
                    entries.append(DirEntry(entry.name, kind, st.st_size, target))
        except OSError as exc:  # an entry vanished or changed between listing and looking: say so
            raise PathRefused(f"{path!r} changed while it was being listed ({exc.strerror}); nothing listed") from None
        finally:
            os.close(fd)
        return sorted(entries, key=lambda e: e.name)


_KINDS: dict[int, Kind] = {stat.S_IFDIR: "dir", stat.S_IFREG: "file", stat.S_IFLNK: "link"}
_SPECIAL = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a directory",
    stat.S_IFLNK: "a symbolic link",
}


def _open_regular(path: str, name: str, parent: int) -> int:
    """A descriptor of the regular file ``name`` in ``parent``; PathRefused for anything else.

    The type is checked before opening (so a device is never opened) and again on
    the descriptor (in case it was swapped meanwhile); the open never blocks.
    """
    try:
        before = os.stat(name, dir_fd=parent, follow_symlinks=False)
        if not stat.S_ISREG(before.st_mode):
            raise PathRefused(f"{path!r} is not a regular file{_kind(before.st_mode)}")
        fd = os.open(name, _READ_FLAGS, dir_fd=parent)
    except OSError as exc:
        raise PathRefused(_explain(path, exc)) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise PathRefused(f"{path!r} is not a regular file{_kind(mode)}")
    os.set_blocking(fd, True)
    return fd


def _kind(mode: int) -> str:
    kind = _SPECIAL.get(stat.S_IFMT(mode))
    return f" ({kind})" if kind else ""


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _explain(path: str, exc: OSError) -> str:
    if exc.errno == errno.ENOENT:
        return f"{path!r} does not exist"
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        return f"{path!r} changed into a symbolic link while being opened; refused"
    if exc.errno == errno.ENOTDIR:
        return f"a parent of {path!r} is not a directory"
    if exc.errno == errno.EISDIR:
        return f"{path!r} is a directory"
    return f"cannot open {path!r}: {exc.strerror}"
