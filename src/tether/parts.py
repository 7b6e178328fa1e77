"""Parts: what a note holds besides text (images and files).

``Message.content`` is a ``str`` for a text-only note, or a tuple of parts:
:class:`Text`, :class:`Image` (bytes and a media type, or a URL) and
:class:`File` (bytes, a media type and a name, or a URL). Parts are frozen
values that compare by content and round-trip through JSON exactly, their bytes
as base64; parsing is strict like every persisted value (unknown fields,
invalid base64, a malformed media type and a part over :data:`MAX_PART_BYTES`
are refused). Each part with bytes knows its ``sha256``: the stores keep a
part's bytes once per run under that digest (:mod:`tether.stores`).

>>> shot = Image(b"\\x89PNG\\r\\n\\x1a\\n...", "image/png")
>>> shot.to_dict()["data"], len(shot)
('iVBORw0KGgouLi4=', 11)
>>> part_from_dict(shot.to_dict()) == shot
True
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ._schema.strictjson import check_keys, safe_text

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "IMAGE_TYPES",
    "MAX_NOTEBOOK_PART_BYTES",
    "MAX_PART_BYTES",
    "MAX_PARTS",
    "File",
    "Image",
    "Part",
    "Text",
    "describe",
    "part_from_dict",
    "safe_text",
]

MAX_PART_BYTES = 10 * 1024 * 1024
"""The cap on one part's bytes (10 MiB)."""

MAX_PARTS = 1000
"""The most parts one note holds (checked before any is parsed)."""

MAX_NOTEBOOK_PART_BYTES = 24 * 1024 * 1024
"""The cap on the bytes of all the images and files one run's notebook holds (24 MiB): as base64
(32 MiB) they leave a RunState's 48 MiB cap the 16 MiB it always had for everything else."""

IMAGE_TYPES: frozenset[str] = frozenset(("image/png", "image/jpeg", "image/gif", "image/webp"))
"""The image media types every vision vendor tether speaks to accepts."""

_MEDIA_TYPE = re.compile(r"^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$")
_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF8", "image/gif"))


@dataclass(frozen=True, slots=True)
class Text:
    """A piece of text among other parts.

    >>> Text("look at this").to_dict()
    {'type': 'text', 'text': 'look at this'}
    """

    text: str
    type: ClassVar[str] = "text"

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise ValueError(f"a text part holds a string, got {type(self.text).__name__}")
        object.__setattr__(self, "text", safe_text(self.text))

    def to_dict(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}


class _Binary:
    """What images and files share: bytes (with their digest) or a URL, and a media type."""

    __slots__ = ()
    type: ClassVar[str]
    data: bytes | None
    media_type: str
    url: str | None
    sha256: str
    _b64: str

    def _check(self) -> None:
        what = self.type
        if (self.data is None) == (self.url is None):
            raise ValueError(f"an {what} part holds either bytes (data=) or a URL (url=), exactly one")
        if self.data is not None:
            if not isinstance(self.data, bytes):
                raise ValueError(f"an {what} part's data must be bytes, got {type(self.data).__name__}")
            if len(self.data) > MAX_PART_BYTES:
                raise ValueError(f"an {what} part is {len(self.data):,} bytes, over the cap of {MAX_PART_BYTES:,}")
            if not self.media_type:
                raise ValueError(f"an {what} part with bytes needs its media_type (e.g. 'image/png')")
            object.__setattr__(self, "sha256", hashlib.sha256(self.data).hexdigest())
        elif not (isinstance(self.url, str) and self.url.startswith(("https://", "http://")) and len(self.url) < 8192):
            raise ValueError(f"an {what} part's url must be an http(s) URL, got {self.url!r}")
        if self.media_type and not (isinstance(self.media_type, str) and _MEDIA_TYPE.match(self.media_type)):
            raise ValueError(f"malformed media type {self.media_type!r}")

    def __len__(self) -> int:
        return len(self.data) if self.data is not None else 0

    @property
    def base64(self) -> str:
        """The bytes as base64 (computed once)."""
        if not self._b64 and self.data is not None:
            object.__setattr__(self, "_b64", base64.b64encode(self.data).decode("ascii"))
        return self._b64

    @property
    def data_url(self) -> str:
        """``data:<media type>;base64,...`` (or the URL itself for a part that is a URL)."""
        return self.url if self.url is not None else f"data:{self.media_type};base64,{self.base64}"

    def _source(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.type}
        if self.media_type:
            data["media_type"] = self.media_type
        if self.url is not None:
            data["url"] = self.url
        else:
            data["data"] = self.base64
        return data

    def _describe(self) -> str:
        where = self.url if self.url is not None else f"{len(self):,} bytes"
        return f"[{self.type} {self.media_type or '?'}, {where}]"


@dataclass(frozen=True, slots=True, repr=False)
class Image(_Binary):
    """An image: bytes and their media type (PNG, JPEG, GIF or WebP), or a URL.

    >>> Image(url="https://example.com/cat.png").to_dict()
    {'type': 'image', 'url': 'https://example.com/cat.png'}
    """

    data: bytes | None = None
    media_type: str = ""
    url: str | None = None
    sha256: str = field(default="", init=False, compare=False)
    _b64: str = field(default="", init=False, compare=False)
    type: ClassVar[str] = "image"

    def __post_init__(self) -> None:
        self._check()
        if self.data is not None and self.media_type not in IMAGE_TYPES:
            raise ValueError(f"an image must be one of {sorted(IMAGE_TYPES)}, not {self.media_type!r}")

    @classmethod
    def from_path(cls, path: str | Path, media_type: str | None = None) -> Image:
        """Read an image file; its media type from its first bytes or its name unless given."""
        import mimetypes

        data = _read(path)
        return cls(data, media_type or _sniff(data) or mimetypes.guess_type(str(path))[0] or "")

    def to_dict(self) -> dict[str, Any]:
        return self._source()

    def __repr__(self) -> str:
        return f"Image({self._describe()[7:-1]})"


@dataclass(frozen=True, slots=True, repr=False)
class File(_Binary):
    """A file or document (a PDF, a text file): bytes, media type and name, or a URL.

    >>> File(b"%PDF-1.7 ...", "application/pdf", "invoice.pdf").to_dict()["name"]
    'invoice.pdf'
    """

    data: bytes | None = None
    media_type: str = ""
    name: str = ""
    url: str | None = None
    sha256: str = field(default="", init=False, compare=False)
    _b64: str = field(default="", init=False, compare=False)
    type: ClassVar[str] = "file"

    def __post_init__(self) -> None:
        self._check()
        if not isinstance(self.name, str) or len(self.name) > 1024:
            raise ValueError(f"a file's name must be a string of at most 1024 characters, got {self.name!r}")

    @classmethod
    def from_path(cls, path: str | Path, media_type: str | None = None) -> File:
        """Read a file; its media type from its name unless given."""
        import mimetypes
        from pathlib import Path  # imported here: import tether stays light

        name = Path(path).name
        found = media_type or mimetypes.guess_type(name)[0] or "application/octet-stream"
        return cls(_read(path), found, name)

    def to_dict(self) -> dict[str, Any]:
        data = self._source()
        if self.name:
            data["name"] = self.name
        return data

    def __repr__(self) -> str:
        return f"File({self.name!r}, {self._describe()[6:-1]})"


Part = Text | Image | File
PART_TYPES = (Text, Image, File)
_KEYS = {"text": frozenset(("type", "text")), "image": frozenset(("type", "media_type", "data", "url"))}
_KEYS["file"] = _KEYS["image"] | {"name"}


def part_from_dict(data: Any) -> Part:
    """The part a ``to_dict`` dict describes; ``ValueError`` for anything else."""
    if not isinstance(data, dict):
        raise ValueError(f"a part must be a JSON object, got {type(data).__name__}")
    kind = data.get("type")
    allowed = _KEYS.get(kind) if isinstance(kind, str) else None
    if allowed is None:
        raise ValueError(f"unknown part type {kind!r}")
    check_keys(data, allowed, f"{kind} part")
    if kind == "text":
        return Text(data.get("text"))  # type: ignore[arg-type]  # checked in __post_init__
    raw, url, media = data.get("data"), data.get("url"), data.get("media_type", "")
    if not isinstance(media, str) or (url is not None and not isinstance(url, str)):
        raise ValueError(f"an {kind} part's media_type and url must be strings")
    name = data.get("name", "") if kind == "file" else ""
    if not isinstance(name, str):
        raise ValueError("a file part's name must be a string")
    memo = _SHARED.get() if raw is not None else None
    if memo is not None and (found := memo.get((kind, media, name, raw))) is not None:
        return found
    blob = _decode(raw) if raw is not None else None
    part = Image(blob, media, url) if kind == "image" else File(blob, media, name, url)
    if memo is not None:
        memo[(kind, media, name, raw)] = part
    return part


_SHARED: ContextVar[dict[tuple[Any, ...], Part] | None] = ContextVar("tether_shared_parts", default=None)


@contextmanager
def shared() -> Iterator[None]:
    """Within the block, parts parsed from the same JSON are one value: decoded (and hashed) once.

    The stores load a run with it, so a part that many events name is one
    ``bytes`` object in memory, not one copy per event.

    >>> d = Image(b"GIF89a...", "image/gif").to_dict()
    >>> with shared():
    ...     part_from_dict(d) is part_from_dict(dict(d))
    True
    """
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def _decode(text: Any) -> bytes:
    if not isinstance(text, str):
        raise ValueError(f"a part's data must be a base64 string, got {type(text).__name__}")
    if len(text) > (MAX_PART_BYTES + 2) // 3 * 4:  # checked before decoding
        raise ValueError(f"a part's data is over the cap of {MAX_PART_BYTES:,} bytes")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("a part's data is not valid base64") from None


def _read(path: str | Path) -> bytes:
    """A regular file's bytes, refused past :data:`MAX_PART_BYTES` without reading more than one
    byte over; a FIFO, a device or a directory is refused without waiting on it."""
    import os
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{os.fspath(path)!r} is not a regular file: a part is read from a file")
        if info.st_size > MAX_PART_BYTES:
            raise ValueError(f"{os.fspath(path)!r} is {info.st_size:,} bytes, over the part cap of {MAX_PART_BYTES:,}")
        chunks, left = [], MAX_PART_BYTES + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > MAX_PART_BYTES:  # it grew while it was read
        raise ValueError(f"{os.fspath(path)!r} is over the part cap of {MAX_PART_BYTES:,} bytes")
    return data


def _sniff(data: bytes) -> str | None:
    for magic, media in _MAGIC:
        if data.startswith(magic):
            return media
    return "image/webp" if data[:4] == b"RIFF" and data[8:12] == b"WEBP" else None


def content_of(items: tuple[Any, ...] | list[Any]) -> str | tuple[Part, ...]:
    """Content from strings and parts: one string stays a string; anything else is a tuple of parts."""
    if len(items) == 1 and isinstance(items[0], str):
        return items[0]
    return tuple(Text(i) if isinstance(i, str) else i for i in items)


def check_parts(content: Any) -> tuple[Part, ...]:
    """``content`` as a tuple of parts, or ``ValueError``."""
    if isinstance(content, list):
        content = tuple(content)
    if not isinstance(content, tuple) or not all(isinstance(p, PART_TYPES) for p in content):
        raise ValueError(f"message content is a string or a tuple of Text, Image and File parts, got {content!r:.80}")
    if len(content) > MAX_PARTS:
        raise ValueError(f"a note holds at most {MAX_PARTS:,} parts, got {len(content):,}")
    return content


def part_bytes(contents: Any) -> int:
    """The bytes of the images and files in ``contents`` (an iterable of message contents)."""
    return sum(len(p) for c in contents if not isinstance(c, str) for p in c if not isinstance(p, Text))


def check_notebook(contents: Any) -> None:
    """Refuse (``UserError``) a notebook whose images and files are over :data:`MAX_NOTEBOOK_PART_BYTES`."""
    if (held := part_bytes(contents)) > MAX_NOTEBOOK_PART_BYTES:
        from .exceptions import UserError

        raise UserError(
            f"the run's notebook would hold {held:,} bytes of images and files, over the cap of "
            f"{MAX_NOTEBOOK_PART_BYTES:,} (tether.parts.MAX_NOTEBOOK_PART_BYTES): send fewer or smaller ones"
        )


def within(content: tuple[Part, ...], held: int, cap: int = MAX_NOTEBOOK_PART_BYTES) -> tuple[Part, ...]:
    """``content`` with each image or file that would take a notebook holding ``held`` bytes of
    parts over ``cap`` left out, a short note in its place.

    >>> big = File(b"x" * 10, "text/plain", "a.txt")
    >>> within((Text("see"), big), held=0, cap=15) == (Text("see"), big)
    True
    >>> within((big, big), held=0, cap=15)[1].text
    "[file text/plain, 10 bytes: left out, the run's notebook holds 10 bytes of images and files, its cap is 15]"
    """
    out: list[Part] = []
    for p in content:
        if not isinstance(p, Text) and held + len(p) > cap:
            p = Text(
                f"{p._describe()[:-1]}: left out, the run's notebook holds {held:,} bytes of images and files, "
                f"its cap is {cap:,}]"
            )
        held += len(p) if not isinstance(p, Text) else 0
        out.append(p)
    return tuple(out)


def describe(content: str | tuple[Part, ...]) -> str:
    """The content as text, each image or file shown as a short placeholder.

    >>> describe((Text("look"), Image(url="https://example.com/a.png")))
    'look\\n[image ?, https://example.com/a.png]'
    """
    if isinstance(content, str):
        return content
    return "\n".join(p.text if isinstance(p, Text) else p._describe() for p in content)
