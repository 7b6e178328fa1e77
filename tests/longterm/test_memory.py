"""Long-term memory on the real local model and real databases: across processes, namespaces,
forget, history, near-duplicates."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest

from tether.exceptions import UserError
from tether.longterm import Memory, MiniLM


def in_another_process(store: Any, body: str) -> str:
    """Run ``body`` (async code with ``memory`` open on ``store``'s database) in a fresh Python."""
    head = [
        "import asyncio",
        "from tether.longterm import Memory",
        "from tether.stores.sqlite import SQLiteStore",
        "from tether.stores.postgres import PostgresStore",
        "async def main():",
        f"    store = {store.reopen}",
        "    memory = Memory.on(store)",
    ]
    tail = ["    await memory.aclose()", "    await store.aclose()", "asyncio.run(main())"]
    script = "\n".join([*head, textwrap.indent(textwrap.dedent(body).strip(), "    "), *tail])
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_a_fact_remembered_in_one_process_is_recalled_in_another(store: Any, minilm: MiniLM) -> None:
    memory = Memory.on(store, embed=minilm)
    assert await memory.recall("how does Ann want to be contacted?", namespace="user:ann") == []  # cached: empty
    printed = in_another_process(
        store,
        """
        for fact in ["Ann wants to be contacted by email, never by phone.",
                     "Ann's account is on the annual business plan.",
                     "Ann ships to a warehouse in Rotterdam."]:
            print((await memory.remember(fact, namespace="user:ann")).id)
        """,
    )
    ids = printed.split()
    found = await memory.recall("how does Ann want to be contacted?", namespace="user:ann", k=3)
    assert (
        sorted(f.item.id for f in found) == sorted(ids) and found[0].item.id == ids[0]
    )  # the other process's write moved the counter
    assert found[0].item.text == "Ann wants to be contacted by email, never by phone."
    assert found[0].score > found[1].score
    await memory.aclose()


async def test_namespaces_keep_users_apart(store: Any, minilm: MiniLM) -> None:
    memory = Memory.on(store, embed=minilm)
    await memory.remember("My delivery address is 12 Elm Street.", namespace="user:ann")
    await memory.remember("Bob pays by invoice.", namespace="user:bob")
    found = await memory.recall("what is my delivery address?", namespace="user:bob", k=5)
    assert [f.item.text for f in found] == ["Bob pays by invoice."]  # Ann's item is never a candidate
    assert [i.namespace for i in await memory.all("user:ann")] == ["user:ann"]
    await memory.aclose()


async def test_forget_removes_the_item_everywhere(store: Any, minilm: MiniLM) -> None:
    memory = Memory.on(store, embed=minilm)
    item = await memory.remember("Carla is allergic to peanuts.", namespace="user:carla")
    await memory.update(item.id, "Carla is allergic to peanuts and sesame.")
    assert await memory.forget(item.id) is True
    assert await memory.recall("food allergies", namespace="user:carla") == []
    assert await memory.history(item.id) == []  # forgetting takes the earlier versions too
    assert await memory.forget(item.id) is False
    assert in_another_process(store, 'print(await memory.recall("allergies", namespace="user:carla"))') == "[]\n"
    await memory.aclose()


async def test_an_update_keeps_the_earlier_versions(store: Any, minilm: MiniLM) -> None:
    memory = Memory.on(store, embed=minilm)
    item = await memory.remember("Dan's plan is Basic.", namespace="user:dan", meta={"field": "plan"})
    new = await memory.update(item.id, "Dan's plan is Pro since March.", source="run 7")
    versions = await memory.history(item.id)
    assert [(v.version, v.text, v.source) for v in versions] == [
        (1, "Dan's plan is Basic.", "api"),
        (2, "Dan's plan is Pro since March.", "run 7"),
    ]
    assert new.meta == {"field": "plan"}
    found = await memory.recall("which plan is Dan on?", namespace="user:dan", k=1)
    assert found[0].item.text == "Dan's plan is Pro since March."  # the search uses the new vector
    await memory.aclose()


async def test_near_identical_items_are_stored_once(store: Any, minilm: MiniLM) -> None:
    memory = Memory.on(store, embed=minilm)
    first = await memory.remember("Eve prefers email.", namespace="user:eve")
    again, new = await memory.remember_new("EVE prefers  email!", namespace="user:eve")
    assert (again.id, new) == (first.id, False)
    for fact in ("Eve prefers phone calls.", "Refunds for Eve above $500 need a sign-off."):
        other, other_new = await memory.remember_new(fact, namespace="user:eve")
        assert other_new and other.id != first.id  # a different fact, however close in words, is kept
    _, update_new = await memory.remember_new("Refunds for Eve above $50 need a sign-off.", namespace="user:eve")
    assert update_new  # the same sentence with another value is news, not a duplicate
    assert len(await memory.all("user:eve")) == 4
    await memory.aclose()


async def test_the_same_key_stores_once(store: Any, minilm: MiniLM) -> None:
    memory = Memory.on(store, embed=minilm)
    a = await memory.remember("Fay's timezone is CET.", namespace="user:fay", key="run1:call_1")
    b = await memory.remember("Fay lives in Berlin.", namespace="user:fay", key="run1:call_1")
    assert a == b and len(await memory.all("user:fay")) == 1
    await memory.aclose()


async def test_bad_input_is_refused_by_name() -> None:
    memory = Memory(embed=lambda texts: [[1.0, 0.0] for _ in texts])
    with pytest.raises(UserError, match="namespace"):
        await memory.remember("x", namespace="")
    with pytest.raises(UserError, match="non-empty"):
        await memory.remember("   ", namespace="user:a")
    with pytest.raises(UserError, match="k must be"):
        await memory.recall("x", namespace="user:a", k=0)
    with pytest.raises(UserError, match="no memory item"):
        await memory.update("m-nope", "x")
    bad = Memory(embed=lambda texts: [[1.0]])  # one vector for two texts
    with pytest.raises(UserError, match="shape"):
        await bad._vectors(["a", "b"])


async def test_a_run_of_writes_reads_the_namespace_once_and_a_foreign_write_makes_it_read_again() -> None:
    from tether.longterm import LocalItems

    class Counting(LocalItems):
        reads = 0

        async def vectors(self, namespace: str, model: str) -> Any:
            self.reads += 1
            return await super().vectors(namespace, model)

    items = Counting()
    embed = lambda texts: [[t.count(c) + 0.01 for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts]  # noqa: E731
    mine, theirs = Memory(items, embed=embed), Memory(items, embed=embed)
    for text in ("a", "bee", "cat in a hat", "eeeee"):
        await mine.remember(text, namespace="n")
    assert items.reads == 1  # the first remember's duplicate check; then each new row joins the cache
    await theirs.remember("banana bread", namespace="n")  # another writer: the counter jumps past ours
    found = await mine.recall("banana bread", namespace="n", k=1)
    assert found[0].item.text == "banana bread" and items.reads == 3


async def test_a_lone_surrogate_is_stored_as_a_replacement_character(store: Any) -> None:
    memory = Memory.on(store, embed=lambda texts: [[1.0, float(len(t))] for t in texts])
    item = await memory.remember("Ann's code is \ud800!", namespace="user:ann")
    assert item.text == "Ann's code is \ufffd!"
    assert [i.text for i in await memory.all("user:ann")] == ["Ann's code is \ufffd!"]
    await memory.aclose()
