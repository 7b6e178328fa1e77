"""Images and files at the provider boundary: Anthropic's blocks, and clear refusals.

Anthropic takes ``image`` and ``document`` blocks in user notes and inside
``tool_result`` blocks. A brain that takes text only (the local model) refuses
any part before a request is made. OpenAI's shape of parts is written with the
rest of its wire, in :mod:`tether.providers.openai_compat`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

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
