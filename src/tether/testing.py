"""Brains and helpers for testing agents without a model.

* :class:`ScriptedModel`: canned replies, in order; loud when it runs out, and
  :meth:`ScriptedModel.assert_consumed` is loud about replies left over.
* :class:`~tether.policy.FunctionPolicy`: a plain-Python brain.
* :func:`block_model_requests`: make any real (non-loopback) model request fail
  (providers ask :func:`check_model_request` before each one).
* :class:`CrashingStore`: a store that "dies" right after a commit, to test
  that a run resumes from its store with nothing lost.

>>> from tether import Agent, tool
>>> from tether.testing import ScriptedModel
>>> model = ScriptedModel(["hello"])
>>> Agent(model).run_sync("hi").output
'hello'
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from urllib.parse import urlsplit

from .context import Context
from .events import Event
from .exceptions import ModelRequestsBlocked, ScriptExhausted
from .messages import Message
from .policy import Action, FunctionPolicy, Move, to_message
from .store import Lease, RunStore, StoreWrapper
from .tools import Tool

__all__ = [
    "Action",
    "CrashingStore",
    "FunctionPolicy",
    "ScriptedModel",
    "SimulatedCrash",
    "block_model_requests",
    "check_model_request",
]


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
            words = message.text.split(" ")
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


# Tests block real model requests; loopback servers (fakes, local models) stay allowed.
_blocked = False
_LOOPBACK = frozenset(("127.0.0.1", "localhost", "::1", "[::1]"))


@contextlib.contextmanager
def block_model_requests(blocked: bool = True) -> Iterator[None]:
    """Within the block, provider requests to non-loopback hosts raise.

    >>> with block_model_requests():
    ...     pass  # run your agent tests here
    """
    global _blocked
    previous, _blocked = _blocked, blocked
    try:
        yield
    finally:
        _blocked = previous


def check_model_request(url: str) -> None:
    """Raise :class:`~tether.exceptions.ModelRequestsBlocked` if requests to ``url`` are blocked
    (every provider asks before each request it sends).

    >>> with block_model_requests():
    ...     check_model_request("http://127.0.0.1:8080/v1/chat/completions")  # loopback: allowed
    """
    if _blocked and (urlsplit(url).hostname or "") not in _LOOPBACK:
        raise ModelRequestsBlocked(
            f"a real model request to {url!r} was blocked: tests must use tether.testing "
            "policies or a loopback server (see tether.testing.block_model_requests)"
        )


class SimulatedCrash(Exception):
    """Raised by :class:`CrashingStore` where a real worker would have been killed."""


class CrashingStore(StoreWrapper):
    """Wraps a store; commits normally, then raises :class:`SimulatedCrash` right after
    committing the first event ``after`` matches (an event kind or a predicate);
    with ``repeat=True``, after every one.

    The in-process stand-in for a worker killed just after a commit: the event is
    durable, the process that wrote it is gone. Resume the run with a fresh agent
    on the inner store, as a restarted worker would.

    >>> from tether import Action, Agent, tool
    >>> from tether.stores.memory import MemoryStore
    >>> @tool(effect="idempotent")
    ... def charge(amount: int) -> str:
    ...     return f"charged {amount}"
    >>> store = MemoryStore()
    >>> crashing = CrashingStore(store, "tool-started")
    >>> agent = Agent(ScriptedModel([Action("charge", {"amount": 5})]), [charge], store=crashing)
    >>> agent.run_sync("charge 5", run_id="r1")
    Traceback (most recent call last):
    ...
    tether.testing.SimulatedCrash: crashed after committing a 'tool-started' event
    >>> Agent(ScriptedModel(["Charged."]), [charge], store=store).run_sync(run_id="r1").output
    'Charged.'
    """

    def __init__(self, inner: RunStore, after: str | Callable[[Event], bool], *, repeat: bool = False) -> None:
        super().__init__(inner)
        self.after = after if callable(after) else (lambda ev: ev.kind == after)
        self.repeat = repeat
        self.crashed = False

    async def append(
        self, run_id: str, events: Sequence[Event], *, expected_seq: int, lease: Lease | None = None
    ) -> int:
        seq = await self.inner.append(run_id, events, expected_seq=expected_seq, lease=lease)
        hit = next((ev for ev in events if self.after(ev)), None)
        if hit is not None and (self.repeat or not self.crashed):
            self.crashed = True
            raise SimulatedCrash(f"crashed after committing a {hit.kind!r} event")
        return seq
