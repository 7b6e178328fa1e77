"""One helper for policies that stream: ``decide`` is draining ``stream`` to its final Message."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator

from ..messages import Message

__all__ = ["final_message"]


async def final_message(pieces: AsyncGenerator[str | Message, None]) -> Message:
    """The Message a stream of text pieces ends with (the stream is closed either way)."""
    async with contextlib.aclosing(pieces) as stream:
        async for piece in stream:
            if isinstance(piece, Message):
                return piece
    raise AssertionError("unreachable: a policy's stream always ends with a Message")
