"""Context: the append-only notebook of a run.

A :class:`Context` is an immutable sequence of :class:`~tether.messages.Message`.
``add`` returns a new Context and never changes the old one. Appending is
amortised O(1): contexts share one growing list, and a Context that is the tip
of that list appends in place; only adding to a Context that is *not* the tip
(a branch) copies its prefix once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, overload

from .messages import Message

__all__ = ["Context"]


class Context:
    """An immutable, append-only sequence of messages.

    >>> ctx = Context().add(Message.user("hi"))
    >>> ctx2 = ctx.add(Message.assistant("hello"))
    >>> len(ctx), len(ctx2)
    (1, 2)
    """

    __slots__ = ("_items", "_len")

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        self._items: list[Message] = list(messages)
        self._len = len(self._items)

    def add(self, *messages: Message) -> Context:
        """A new Context with ``messages`` appended; this one is unchanged."""
        for m in messages:
            if not isinstance(m, Message):
                raise TypeError(f"Context.add takes Message values, got {type(m).__name__}")
        new = Context.__new__(Context)
        if len(self._items) == self._len:
            # We are the tip of the shared list: extend it in place. Older
            # Contexts keep their own length, so they never see the new notes.
            new._items = self._items
        else:
            new._items = self._items[: self._len]
        new._items.extend(messages)
        new._len = len(new._items)
        return new

    @property
    def messages(self) -> tuple[Message, ...]:
        """A snapshot of the messages as a tuple (O(n): prefer iteration)."""
        return tuple(self._items[: self._len])

    def last(self) -> Message | None:
        """The most recent message, or None."""
        return self._items[self._len - 1] if self._len else None

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[Message]:
        items, n = self._items, self._len
        return (items[i] for i in range(n))

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> Context: ...
    def __getitem__(self, index: int | slice) -> Message | Context:
        if isinstance(index, slice):
            return Context(self._items[: self._len][index])
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("context index out of range")
        return self._items[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Context):
            return NotImplemented
        return self._len == other._len and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(self.messages)

    def __repr__(self) -> str:
        return f"Context({self._len} messages)"

    def to_list(self) -> list[dict[str, Any]]:
        """JSON-ready list of message dicts."""
        return [m.to_dict() for m in self]

    @classmethod
    def from_list(cls, data: list[dict[str, Any]]) -> Context:
        if not isinstance(data, list):
            raise ValueError(f"a context must be a JSON list, got {type(data).__name__}")
        return cls(Message.from_dict(d) for d in data)
