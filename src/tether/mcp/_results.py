"""What an MCP tool call returned, as a value, and as the note the model reads.

Each content block becomes a line of the note's text (an image becomes
``[image image/png, 1234 bytes]``), and the bytes of images, audio and embedded
binary resources stay on :attr:`McpResult.blobs` for code that wants them
(``McpClient.call`` and the client's ``on_result`` hook). The note the model
reads is :attr:`McpResult.content`: the text, or, when the server returned an
image a model can take (PNG, JPEG, GIF, WebP, up to the part size cap), the
lines with each such image as a :class:`~tether.parts.Image` part in its place.
Structured content is shown as JSON when the server sent no text.

>>> McpResult("3 files", structured={"count": 3}).text
'3 files'
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any, Literal

from ..parts import IMAGE_TYPES, MAX_PART_BYTES, Image


@dataclass(frozen=True, slots=True)
class McpBlob:
    """Binary content from a tool result: an image, audio, or a binary resource.

    >>> McpBlob("image", "image/png", b"...").describe()
    '[image image/png, 3 bytes]'
    """

    kind: Literal["image", "audio", "resource"]
    mime_type: str
    data: bytes
    uri: str | None = None

    def describe(self) -> str:
        """The line that stands for this blob in the note."""
        where = f" {self.uri}" if self.uri else ""
        return f"[{self.kind}{where} {self.mime_type}, {len(self.data)} bytes]"


@dataclass(frozen=True, slots=True)
class McpResult:
    """One ``tools/call`` result: the note's text, ``isError``, structured content and blobs."""

    text: str
    is_error: bool = False
    structured: Any = None
    blobs: tuple[McpBlob, ...] = ()
    pieces: tuple[str | Image, ...] = ()  # the note's lines, with the images a model can take in place

    @property
    def content(self) -> str | list[str | Image]:
        """What the model reads: the text, or lines and images when there are images to show."""
        if not any(isinstance(p, Image) for p in self.pieces):
            return self.text
        return list(self.pieces)


def to_result(result: Any) -> McpResult:
    """An :class:`McpResult` from the SDK's ``CallToolResult``."""
    lines: list[str] = []
    blobs: list[McpBlob] = []
    pieces: list[str | Image] = []
    for block in result.content or ():
        line, blob = _block(block)
        lines.append(line)
        if blob is not None:
            blobs.append(blob)
        showable = blob is not None and blob.kind == "image" and blob.mime_type in IMAGE_TYPES
        if blob is not None and showable and len(blob.data) <= MAX_PART_BYTES:
            pieces.append(Image(blob.data, blob.mime_type))
        else:
            pieces.append(line)
    structured = result.structured_content
    if structured is not None and not any(getattr(b, "type", "") == "text" for b in result.content or ()):
        lines.append(json.dumps(structured, ensure_ascii=False, sort_keys=True))
        pieces.append(lines[-1])
    return McpResult("\n".join(lines), bool(result.is_error), structured, tuple(blobs), tuple(pieces))


def _block(block: Any) -> tuple[str, McpBlob | None]:
    kind = getattr(block, "type", "")
    if kind == "text":
        return block.text, None
    if kind in ("image", "audio"):
        blob = McpBlob(
            "image" if kind == "image" else "audio", block.mime_type or "application/octet-stream", _decode(block.data)
        )
        return blob.describe(), blob
    if kind == "resource_link":
        mime = f" {block.mime_type}" if block.mime_type else ""
        return f"[resource link {block.uri} ({block.name}){mime}]", None
    if kind == "resource":
        return _resource(block.resource)
    return f"[{kind or 'unknown'} content]", None


def _resource(res: Any) -> tuple[str, McpBlob | None]:
    uri, mime = str(res.uri), res.mime_type or "application/octet-stream"
    if getattr(res, "text", None) is not None:
        return f"[resource {uri}]\n{res.text}", None
    blob = McpBlob("resource", mime, _decode(getattr(res, "blob", "") or ""), uri)
    return blob.describe(), blob


def _decode(data: str | bytes) -> bytes:
    raw = data.encode() if isinstance(data, str) else data
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        return raw  # not base64 after all: keep what the server sent


def within_cap(result: McpResult, cap: int, server: str) -> McpResult:
    """``result``, or an error note in its place when its text and blobs are over ``cap`` bytes
    (a stdio reply that big never arrives whole; over HTTP it does, and is kept out here).

    >>> within_cap(McpResult("x" * 10), 4, "s").text
    "MCP server 's' returned a result of 10 bytes, over the cap of 4 bytes per result (max_result_bytes), ..."
    """
    size = len(result.text.encode()) + sum(len(b.data) for b in result.blobs)
    if size <= cap:
        return result
    text = (
        f"MCP server {server!r} returned a result of {size:,} bytes, over the cap of {cap:,} bytes per result "
        "(max_result_bytes), so tether left it out; ask for less (a page, a filter, a summary)"
    )
    return McpResult(text, is_error=True)
