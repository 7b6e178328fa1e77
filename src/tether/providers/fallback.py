"""Model fallback: a policy that asks the next model when one fails.

:class:`Fallback` holds policies in order of preference. Each decision goes to
the first; when it raises :class:`~tether.exceptions.ProviderError` (its own
retries are spent, or the failure was not worth retrying) the same decision
goes to the next, and so on. Only provider failures move on: a model mistake
(malformed arguments, an unknown tool) is not an exception at all, it is a note
the loop writes for the same model to read.

Every reply says which model wrote it: ``Message.model`` is set to the name of
the policy that answered (its ``model`` attribute, or the ``names`` given), and
it is committed with the ``model-replied`` event, so the journal shows where a
run switched models. ``Message.model`` is bookkeeping: it is not part of what
the next model reads, and messages compare equal without it.

Each decision starts again from the first policy (there is no state to resume
or to lose); give the primary ``max_retries=0`` to move on without waiting.
Text streamed by a policy that failed mid-answer has been shown as ``token``
events already; the committed reply is the one to trust, as with retries.

>>> from tether.testing import ScriptedModel
>>> policy = Fallback(ScriptedModel(["hi"]), ScriptedModel(["hello"]), names=["small", "large"])
>>> policy.names
('small', 'large')
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncGenerator, Sequence
from typing import cast

from ..context import Context
from ..exceptions import ProviderError, UserError
from ..messages import Message
from ..policy import Policy, ask
from ..tools import Tool
from ._stream import final_message

__all__ = ["Fallback"]


class Fallback:
    """Ask ``primary``; after a provider failure, ask ``backup`` (and any further policies) in turn.

    ``names`` label the policies in ``Message.model`` (default: each one's
    ``model`` attribute, else its class name). When every policy fails, the
    last ProviderError is raised with all the failures in its message, and the
    agent ends the run ``failed`` (resumable) as for any provider failure.

    >>> from tether.providers import Anthropic, OpenAICompatible
    >>> Fallback(OpenAICompatible("gpt-4o-mini"), Anthropic("claude-haiku-4-5"))   # doctest: +SKIP
    Fallback('gpt-4o-mini', 'claude-haiku-4-5')
    """

    def __init__(self, primary: Policy, backup: Policy, *more: Policy, names: Sequence[str] | None = None) -> None:
        self.policies: tuple[Policy, ...] = (primary, backup, *more)
        self.names = tuple(names) if names is not None else tuple(_name(p) for p in self.policies)
        if len(self.names) != len(self.policies):
            raise UserError(f"Fallback got {len(self.policies)} policies but {len(self.names)} names")

    async def decide(self, context: Context, tools: Sequence[Tool]) -> Message:
        """The first reply any policy manages, marked with its name."""
        return await final_message(self.stream(context, tools))

    async def stream(self, context: Context, tools: Sequence[Tool]) -> AsyncGenerator[str | Message, None]:
        """Text pieces from the policy answering, then its Message (``model`` set)."""
        failures: list[str] = []
        for policy, name in zip(self.policies, self.names, strict=True):
            try:
                answer = cast(AsyncGenerator[str | Message, None], ask(policy, context, tools))  # an async generator
                async with contextlib.aclosing(answer) as pieces:
                    async for piece in pieces:
                        yield piece if isinstance(piece, str) else _signed(piece, name)
                return
            except ProviderError as exc:
                failures.append(f"{name}: {exc}")
                last = exc
        raise ProviderError(
            f"every model failed ({'; '.join(failures)})",
            status_code=last.status_code,
            body=last.body,
            retryable=last.retryable,
        ) from last

    async def aclose(self) -> None:
        """Close every policy that holds connections."""
        for policy in self.policies:
            closer = getattr(policy, "aclose", None)
            if closer is not None:
                await closer()

    async def __aenter__(self) -> Fallback:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"Fallback({', '.join(map(repr, self.names))})"


def _name(policy: Policy) -> str:
    model = getattr(policy, "model", None)
    return model if isinstance(model, str) and model else type(policy).__name__


def _signed(message: Message, name: str) -> Message:
    # A nested Fallback has named the model already: keep the innermost name.
    return message if message.model is not None else dataclasses.replace(message, model=name)
