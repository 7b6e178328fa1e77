"""Images and files at the provider boundary: each vendor's wire shape, and clear refusals.

OpenAI chat completions takes images (``image_url``, a data URL or a link)
and PDF files (``file`` parts with ``file_data``) in user notes only; a tool
result there is text, so the images and files a tool returned follow the
turn's results as one user note. Anthropic takes ``image`` and ``document``
blocks in user notes and inside ``tool_result`` blocks. A brain that takes
text only (the local model) refuses any part before a request is made.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..context import Context
from ..exceptions import UserError
from ..messages import Message
from ..parts import File, Image, Part, Text

ANTHROPIC_DOCUMENTS = frozenset(("application/pdf", "text/plain"))


def refuse_parts(context: Iterable[Message], brain: str) -> None:
    """Raise :class:`UserError` naming the first image or file a person or the model put in the
    notebook, for a brain that reads text only. A tool's images and files are read as their
    description (``[image image/png, 1234 bytes]``): what a tool returns is not the user's to fix."""
    for i, m in enumerate(context):
        if m.role != "tool" and m.parts:
            raise UserError(
                f"{brain} reads text only, but note {i} ({m.role}) holds {m.parts[0]!r}: use a brain that "
                "reads images and files (OpenAICompatible with a vision model, Anthropic), or send text"
            )


def openai_messages(context: Context, wire: Callable[[Message], dict[str, Any]]) -> list[dict[str, Any]]:
    """The notes in OpenAI's shape; a tool's images and files follow its turn's results as a user note."""
    out: list[dict[str, Any]] = []
    carried: list[Part] = []
    for m in context:
        if m.parts:
            _check_openai(m.parts)
        if m.role == "tool":
            carried += m.parts
        elif carried:
            out.append(_carried(carried))
            carried = []
        out.append(wire(m))
    if carried:
        out.append(_carried(carried))
    return out


def _carried(parts: list[Part]) -> dict[str, Any]:
    note = Message.user(Text("The images and files the tool results above refer to, in order:"), *parts)
    return note.to_openai()


def _check_openai(parts: tuple[Part, ...]) -> None:
    for p in parts:
        if isinstance(p, File) and p.url is not None:
            raise UserError(f"OpenAI chat completions takes files as bytes, not URLs: {p!r} (read it, File(data=...))")


def anthropic_content(m: Message) -> str | list[dict[str, Any]]:
    """A user note's content (or a tool result's) as Anthropic content blocks."""
    if isinstance(m.content, str):
        return m.content
    return [_block(p) for p in m.content]


def _block(p: Part) -> dict[str, Any]:
    if isinstance(p, Text):
        return {"type": "text", "text": p.text}
    if isinstance(p, Image):
        return {"type": "image", "source": _source(p)}
    if p.url is None and p.media_type not in ANTHROPIC_DOCUMENTS:
        raise UserError(f"Anthropic takes documents of {sorted(ANTHROPIC_DOCUMENTS)} only, not {p!r}")
    block: dict[str, Any] = {"type": "document", "source": _source(p)}
    if p.name:
        block["title"] = p.name
    return block


def _source(p: Image | File) -> dict[str, Any]:
    if p.url is not None:
        return {"type": "url", "url": p.url}
    if p.media_type == "text/plain":
        assert p.data is not None
        return {"type": "text", "media_type": "text/plain", "data": p.data.decode("utf-8", "replace")}
    return {"type": "base64", "media_type": p.media_type, "data": p.base64}
