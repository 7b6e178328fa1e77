"""Brains and helpers for testing agents without a model.

* :class:`ScriptedModel`: canned replies, in order; loud when it runs out, and
  :meth:`ScriptedModel.assert_consumed` is loud about replies left over.
* :class:`~tether.policy.FunctionPolicy`: a plain-Python brain.
* :func:`block_model_requests`: make any real (non-loopback) model request fail.

>>> from tether import Agent, tool
>>> from tether.testing import ScriptedModel
>>> model = ScriptedModel(["hello"])
>>> Agent(model).run_sync("hi").output
'hello'
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator, Sequence

from .context import Context
from .exceptions import ScriptExhausted
from .messages import Message
from .policy import Action, FunctionPolicy, Move, set_model_requests_blocked, to_message
from .tools import Tool

__all__ = ["Action", "FunctionPolicy", "ScriptedModel", "block_model_requests"]


class ScriptedModel:
    """A policy that plays back a list of replies.

    Each reply is what a plain brain may return: a final-answer string, an
    :class:`~tether.policy.Action`, a list of Actions, a ToolCall or a Message.
    ``stream=True`` also streams each reply's text word by word.
    ``requests`` records the context of every request, for assertions.
    """

    def __init__(self, replies: Sequence[Move], *, stream: bool = False) -> None:
        self.replies = list(replies)
        self.requests: list[Context] = []
        self._stream = stream

    @property
    def remaining(self) -> int:
        return len(self.replies) - len(self.requests)

    async def decide(self, context: Context, tools: Sequence[Tool]) -> Message:
        n = len(self.requests)
        if n >= len(self.replies):
            raise ScriptExhausted(
                f"ScriptedModel was asked for reply #{n + 1} but has only {len(self.replies)}; "
                f"the last message was {context.last()!r}"
            )
        self.requests.append(context)
        return to_message(self.replies[n], f"call_{n + 1}")

    async def stream(self, context: Context, tools: Sequence[Tool]) -> AsyncIterator[str | Message]:
        message = await self.decide(context, tools)
        if self._stream and message.content:
            words = message.content.split(" ")
            for i, word in enumerate(words):
                yield word if i == len(words) - 1 else word + " "
        yield message

    def assert_consumed(self) -> None:
        """Raise AssertionError if some replies were never asked for."""
        if self.remaining:
            raise AssertionError(
                f"ScriptedModel has {self.remaining} unused replies: {self.replies[len(self.requests) :]!r}"
            )

    def __repr__(self) -> str:
        return f"ScriptedModel({len(self.replies)} replies, {self.remaining} left)"


@contextlib.contextmanager
def block_model_requests(blocked: bool = True) -> Iterator[None]:
    """Within the block, provider requests to non-loopback hosts raise.

    >>> with block_model_requests():
    ...     pass  # run your agent tests here
    """
    from . import policy

    previous = policy._requests_blocked
    set_model_requests_blocked(blocked)
    try:
        yield
    finally:
        set_model_requests_blocked(previous)
