"""Memory: remember, recall, update and forget items, by similarity of their embeddings.

Search is brute force over numpy: a namespace's vectors are one float32 matrix,
a recall is one product with the query's vector. The matrix is cached per
namespace and read again only when the namespace's write counter has moved (one
indexed lookup per recall), so a write in another process is seen by the next
recall here.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import time
import uuid
import weakref
from collections.abc import Callable
from typing import Any

from ..exceptions import UserError
from ..messages import Message
from ..parts import safe_text
from ..store import RunStore, StoreWrapper
from .items import Item, ItemStore, LocalItems, Recalled, bumped
from .minilm import MiniLM, numpy
from .quoting import quoted

__all__ = ["Embed", "Memory", "Recalled"]

Embed = Callable[[list[str]], Any]
"""Texts to vectors: a function (sync or async) returning one row of floats per text."""

DEDUPE = 0.99
"""Cosine at or above which a new text is the same item as an old one (the same numbers too).
bench_memory.py quality measured the same wording with other values (Bronze/Platinum, $500/$50)
at up to 0.983, so a lower bar would drop an update as a duplicate; case and punctuation alone
are caught by comparing words, whatever the cosine."""
FLOOR = 0.2  # cosine under which an item is not offered to a run unasked
MAX_TEXT_BYTES = 8 * 1024  # one item's text: a fact, not a document (recall blocks quote whole items)


_LOCAL: weakref.WeakKeyDictionary[Any, LocalItems] = weakref.WeakKeyDictionary()


def items_for(store: RunStore) -> ItemStore:
    """The memory tables of ``store``'s database (one shared dict for an in-process store)."""
    from ..stores.memory import MemoryStore
    from ..stores.postgres import PostgresStore
    from ..stores.sqlite import SQLiteStore
    from .sql import PostgresItems, SQLiteItems

    while isinstance(store, StoreWrapper):
        store = store.inner
    if isinstance(store, SQLiteStore):
        return SQLiteItems(store.path, durability=store.durability)
    if isinstance(store, PostgresStore):
        return PostgresItems(store.dsn, schema=store.schema)
    if isinstance(store, MemoryStore):
        return _LOCAL.setdefault(store, LocalItems())
    raise UserError(f"no memory tables for a {type(store).__name__}: pass Memory(items=...) yourself")


class Memory:
    """Long-term memory: items of text and metadata under namespaces, found by meaning.

    >>> import asyncio
    >>> from tether.longterm import Memory
    >>> def letters(texts):  # any embedding function will do; the default is the local MiniLM
    ...     return [[t.count(c) + 0.01 for c in "aeiou"] for t in texts]
    >>> async def main():
    ...     memory = Memory(embed=letters)
    ...     await memory.remember("Ann prefers email", namespace="user:ann")
    ...     found = await memory.recall("how to contact Ann", namespace="user:ann", k=1)
    ...     return found[0].item.text, await memory.recall("x", namespace="user:bob")
    >>> asyncio.run(main())
    ('Ann prefers email', [])

    ``Memory.on(store)`` keeps the items in a run store's database (SQLite, PostgreSQL, or the
    in-process store); ``Memory()`` keeps them in this process. ``embed`` is any function from
    texts to vectors, :func:`tether.longterm.openai_embeddings` for an ``/embeddings`` endpoint,
    or by default :class:`tether.longterm.MiniLM`, the local model.
    """

    def __init__(
        self,
        items: ItemStore | None = None,
        *,
        embed: Embed | None = None,
        model: str | None = None,
        dedupe: float = DEDUPE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.items: ItemStore = items if items is not None else LocalItems()
        self.embed: Embed = embed if embed is not None else MiniLM()
        self.model: str = model or str(
            getattr(self.embed, "name", None) or getattr(self.embed, "__qualname__", "embed")
        )
        if not 0 < dedupe <= 1.0:
            raise UserError(f"dedupe must be a cosine in (0, 1], got {dedupe!r}")
        self.dedupe = dedupe
        self.clock = clock
        self._cache: dict[str, _Index] = {}

    @classmethod
    def on(cls, store: RunStore, **options: Any) -> Memory:
        """A memory in ``store``'s database (its tables come with the store's migrations)."""
        return cls(items_for(store), **options)

    async def aclose(self) -> None:
        await self.items.aclose()

    # -- writing ----------------------------------------------------------

    async def remember(
        self,
        text: str,
        *,
        namespace: str,
        meta: dict[str, Any] | None = None,
        source: str = "api",
        key: str | None = None,
    ) -> Item:
        """Store ``text``; a near-identical item already there is returned instead of a new one.

        ``key`` makes the write idempotent: a second call with the same key returns the first's item.
        """
        return (await self.remember_new(text, namespace=namespace, meta=meta, source=source, key=key))[0]

    async def remember_new(
        self,
        text: str,
        *,
        namespace: str,
        meta: dict[str, Any] | None = None,
        source: str = "api",
        key: str | None = None,
    ) -> tuple[Item, bool]:
        """:meth:`remember`, also saying whether the item is new (False: served before, or a duplicate)."""
        _check(text, namespace)
        text, namespace = safe_text(text), safe_text(namespace)  # a lone surrogate: U+FFFD, as in notes
        if key is not None:  # a key is one namespace's: another's same run and call ids are not this call
            key = json.dumps([namespace, key])
            if (done := await self.items.served(key)) is not None and done.namespace == namespace:
                return done, False
        vector = (await self._vectors([text]))[0]
        same = await self._search(vector, namespace, 1)
        if same and _duplicate(text, same[0], self.dedupe):
            return same[0].item, False
        now = self.clock()
        item = Item(f"m-{uuid.uuid4().hex[:12]}", namespace, text, dict(meta or {}), source, 1, now, now)
        stored = await self.items.add(item, self.model, vector.tobytes(), key)
        if stored.id == item.id:
            await self._extend(namespace, item.id, vector)
        return stored, stored.id == item.id

    async def update(self, id: str, text: str, *, meta: dict[str, Any] | None = None, source: str = "api") -> Item:
        """Replace item ``id``'s text (and metadata, if given); its earlier version goes to its history."""
        old = await self._get(id)
        _check(text, old.namespace)
        text = safe_text(text)
        vector = (await self._vectors([text]))[0]
        new = bumped(old, text, old.meta if meta is None else dict(meta), source, self.clock())
        await self.items.update(new, self.model, vector.tobytes())
        return new

    async def forget(self, id: str) -> bool:
        """Delete item ``id`` and its history; False when there was none."""
        found = await self.items.get([id])
        if found:
            await self.items.delete(id)
        return bool(found)

    # -- reading ----------------------------------------------------------

    async def recall(self, query: str, *, namespace: str, k: int = 5, min_score: float = 0.0) -> list[Recalled]:
        """The ``k`` items of ``namespace`` most similar to ``query``, best first."""
        if not isinstance(k, int) or k < 1:
            raise UserError(f"k must be a positive integer, got {k!r}")
        _check(query, namespace)
        found = await self._search((await self._vectors([safe_text(query)]))[0], safe_text(namespace), k)
        return [r for r in found if r.score >= min_score]

    async def history(self, id: str) -> list[Item]:
        """Item ``id``'s versions, oldest first, the current one last."""
        return await self.items.history(id)

    async def all(self, namespace: str) -> list[Item]:
        """Every item of ``namespace``, oldest first."""
        return await self.items.items(namespace)

    async def brief(
        self, task: str, *, namespace: str, k: int = 5, budget: int = 300, min_score: float = FLOOR
    ) -> Message:
        """The first note of a run: ``task``, after the items most like it, quoted as data.

        At most ``k`` items scoring at least ``min_score``, within ``budget`` tokens (about
        four characters each). Pass the note as the run's task: the run journals it in its
        ``run-started`` event, so a resumed run sees the very same items even if memory
        changed in between.
        """
        found = await self.recall(task, namespace=namespace, k=k, min_score=min_score)
        block = quoted(found, self.clock(), budget=budget)
        return Message.user(f"{block}\n\n{task}" if block else task)

    # -- the index --------------------------------------------------------

    async def _get(self, id: str) -> Item:
        found = await self.items.get([id])
        if not found:
            raise UserError(f"no memory item {id!r}")
        return found[0]

    async def _vectors(self, texts: list[str]) -> Any:
        np = numpy()
        if isinstance(self.embed, MiniLM) or not inspect.iscoroutinefunction(self.embed):
            out = await asyncio.to_thread(self.embed, texts)  # a forward pass: off the event loop
        else:
            out = await self.embed(texts)
        rows = np.asarray(out, dtype=np.float32)
        if rows.ndim != 2 or rows.shape[0] != len(texts):
            raise UserError(f"the embedding function gave shape {rows.shape} for {len(texts)} texts")
        norms = np.sqrt((rows**2).sum(axis=1, keepdims=True))
        return rows / norms.clip(min=1e-12)

    async def _search(self, vector: Any, namespace: str, k: int) -> list[Recalled]:
        np = numpy()
        ids, matrix = await self._matrix(namespace)
        if not ids:
            return []
        if matrix.shape[1] != vector.shape[0]:
            raise UserError(f"memory {namespace!r} holds {matrix.shape[1]}-wide vectors of {self.model!r}")
        scores = matrix @ vector
        top = np.argpartition(-scores, k - 1)[:k] if k < len(ids) else np.arange(len(ids))
        top = top[np.argsort(-scores[top])]
        items = {i.id: i for i in await self.items.get([ids[j] for j in top])}
        return [Recalled(items[ids[j]], float(scores[j])) for j in top if ids[j] in items]

    async def _extend(self, namespace: str, id: str, vector: Any) -> None:
        """Add our own new row to the cached index when ours is the only write since it was read
        (the counter moved by exactly one), so a run of writes never reads the namespace again."""
        index = self._cache.get(namespace)
        if index is not None and await self.items.writes(namespace) == index.writes + 1:
            index.add(id, vector)

    async def _matrix(self, namespace: str) -> tuple[list[str], Any]:
        index = self._cache.get(namespace)
        if index is None or index.writes != await self.items.writes(namespace):
            found = await self.items.vectors(namespace, self.model)
            index = self._cache[namespace] = _Index(found.writes, list(found.ids), found.blobs)
        return index.ids, index.matrix


class _Index:
    """A namespace's vectors in one matrix with room to grow (doubling), and the ids of its rows."""

    def __init__(self, writes: int, ids: list[str], blobs: tuple[bytes, ...]) -> None:
        np = numpy()
        self.writes, self.ids = writes, ids
        flat = np.frombuffer(b"".join(blobs), dtype=np.float32)
        # a read-only view of the bytes read: the first add copies it into a matrix with room to grow
        self._rows = flat.reshape(len(ids), -1) if ids else np.zeros((0, 0), np.float32)

    @property
    def matrix(self) -> Any:
        return self._rows[: len(self.ids)]

    def add(self, id: str, vector: Any) -> None:
        np = numpy()
        n = len(self.ids)
        if self._rows.shape[1] not in (0, vector.shape[0]):
            return  # another model's width: the next read starts over
        if n == self._rows.shape[0]:
            grown = np.zeros((max(8, 2 * n), vector.shape[0]), np.float32)
            if n:
                grown[:n] = self._rows[:n]
            self._rows = grown
        self._rows[n] = vector
        self.ids.append(id)
        self.writes += 1


def _duplicate(text: str, nearest: Recalled, bar: float) -> bool:
    """The same words (case and punctuation aside), or nearly the same meaning with the same numbers."""
    words, old = re.findall(r"\w+", text.casefold()), re.findall(r"\w+", nearest.item.text.casefold())
    numbers = [w for w in words if w.isdigit()], [w for w in old if w.isdigit()]
    return words == old or (nearest.score >= bar and numbers[0] == numbers[1])


def _check(text: str, namespace: str) -> None:
    if not isinstance(text, str) or not text.strip():
        raise UserError("memory text must be a non-empty string")
    if (size := len(text.encode("utf-8", "surrogatepass"))) > MAX_TEXT_BYTES:
        raise UserError(
            f"memory text is {size} bytes, more than {MAX_TEXT_BYTES}: remember one fact, a sentence or a few"
        )
    if not isinstance(namespace, str) or not namespace.strip():
        raise UserError(f"a memory namespace is a non-empty string (e.g. 'user:ann'), got {namespace!r}")
