"""Memory items, the contract of the tables that hold them, and the in-process backend.

A backend keeps items, their earlier versions and the keys of the remember calls
it served; it knows nothing of embeddings beyond storing a vector's bytes. Every
write also counts up its namespace's write counter in the same transaction, so a
process that cached a namespace's vectors asks one cheap question before a
recall (has the counter moved?) instead of reading every vector again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol

__all__ = ["Item", "ItemStore", "LocalItems", "Recalled", "Vectors"]


@dataclass(frozen=True, slots=True)
class Item:
    """One thing remembered: its text and metadata, under a namespace (``user:ann``, ``agent:desk``).

    ``source`` says who wrote it (a run's id, or ``api``); ``version`` counts its updates
    (the earlier versions are kept: :meth:`tether.longterm.Memory.history`).
    """

    id: str
    namespace: str
    text: str
    meta: dict[str, Any] = field(default_factory=dict)
    source: str = "api"
    version: int = 1
    created_at: float = 0.0
    updated_at: float = 0.0


@dataclass(frozen=True, slots=True)
class Recalled:
    """An item a recall found, with its cosine similarity to the query."""

    item: Item
    score: float


@dataclass(frozen=True, slots=True)
class Vectors:
    """A namespace's vectors of one model, as stored: item ids and float32 bytes, in one order."""

    writes: int  # the namespace's write counter when these were read
    ids: tuple[str, ...]
    blobs: tuple[bytes, ...]


class ItemStore(Protocol):
    """What :class:`~tether.longterm.Memory` needs from a database."""

    async def writes(self, namespace: str) -> int: ...

    async def vectors(self, namespace: str, model: str) -> Vectors: ...

    async def get(self, ids: list[str]) -> list[Item]: ...

    async def served(self, key: str) -> Item | None: ...

    async def add(self, item: Item, model: str, vector: bytes, key: str | None) -> Item: ...

    async def update(self, item: Item, model: str, vector: bytes) -> None: ...

    async def history(self, id: str) -> list[Item]: ...

    async def delete(self, id: str) -> None: ...

    async def items(self, namespace: str) -> list[Item]: ...

    async def aclose(self) -> None: ...


class LocalItems:
    """Items in a dict of this process (with :class:`~tether.stores.memory.MemoryStore`, or for tests)."""

    def __init__(self) -> None:
        self._items: dict[str, tuple[Item, str, bytes]] = {}
        self._history: dict[str, list[Item]] = {}
        self._keys: dict[str, str] = {}
        self._writes: dict[str, int] = {}

    def _wrote(self, namespace: str) -> None:
        self._writes[namespace] = self._writes.get(namespace, 0) + 1

    async def writes(self, namespace: str) -> int:
        return self._writes.get(namespace, 0)

    async def vectors(self, namespace: str, model: str) -> Vectors:
        rows = [(i.id, v) for i, m, v in self._items.values() if i.namespace == namespace and m == model]
        return Vectors(self._writes.get(namespace, 0), tuple(r[0] for r in rows), tuple(r[1] for r in rows))

    async def get(self, ids: list[str]) -> list[Item]:
        return [self._items[i][0] for i in ids if i in self._items]

    async def served(self, key: str) -> Item | None:
        found = self._keys.get(key)
        return self._items[found][0] if found in self._items else None

    async def add(self, item: Item, model: str, vector: bytes, key: str | None) -> Item:
        if key is not None and (done := await self.served(key)) is not None:
            return done
        self._items[item.id] = (item, model, vector)
        if key is not None:
            self._keys[key] = item.id
        self._wrote(item.namespace)
        return item

    async def update(self, item: Item, model: str, vector: bytes) -> None:
        old = self._items[item.id][0]
        self._history.setdefault(item.id, []).append(old)
        self._items[item.id] = (item, model, vector)
        self._wrote(item.namespace)

    async def history(self, id: str) -> list[Item]:
        now = [self._items[id][0]] if id in self._items else []
        return [*self._history.get(id, []), *now]

    async def delete(self, id: str) -> None:
        if id in self._items:
            self._wrote(self._items.pop(id)[0].namespace)
        self._history.pop(id, None)

    async def items(self, namespace: str) -> list[Item]:
        return sorted((i for i, _, _ in self._items.values() if i.namespace == namespace), key=lambda i: i.created_at)

    async def aclose(self) -> None:
        return None


def bumped(item: Item, text: str, meta: dict[str, Any], source: str, at: float) -> Item:
    """``item``'s next version."""
    return replace(item, text=text, meta=meta, source=source, version=item.version + 1, updated_at=at)
