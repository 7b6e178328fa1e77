"""Images and files in the stores: each part's bytes once per run, given back exactly, checked on load."""

from __future__ import annotations

import asyncio
import os
import sqlite3

import pytest

from support import parts
from tether import Action, Agent, Message, StoreError, tool
from tether.events import Paused, ToolFinished
from tether.journal import Journal
from tether.parts import Image
from tether.stores.sqlite import SQLiteStore
from tether.testing import ScriptedModel

from .conftest import PG_DSN, Backend

MB = 1024 * 1024
SHOT = Image(b"\x89PNG\r\n\x1a\n" + os.urandom(MB), "image/png")  # random: no store can compress it away


@tool(effect="none")
def screenshot(step: int) -> list[object]:
    """Take a screenshot."""
    return [f"step {step}:", SHOT]


@tool(approval=True)
def publish(page: str) -> str:
    """Publish a page (a person approves)."""
    return f"published {page}"


def _agent(store, replies) -> Agent:
    return Agent(ScriptedModel(replies), [screenshot, publish], store=store, max_steps=30, signing_key=b"k" * 32)


async def _size(backend: Backend, store) -> int | None:
    if backend.name == "sqlite":
        store.close()  # the last connection checkpoints the WAL into the file
        return sum(os.path.getsize(p) for p in (backend.path, f"{backend.path}-wal") if os.path.exists(p))
    if backend.name != "postgres":
        return None  # a backend this test does not know how to weigh
    import psycopg

    async with await psycopg.AsyncConnection.connect(PG_DSN) as conn:
        cur = await conn.execute(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r'",
            (backend.schema,),
        )
        row = await cur.fetchone()
    return int(row[0])


async def test_a_1_mb_image_in_a_20_step_run_is_stored_once(backend: Backend) -> None:
    store = await backend.open()
    replies = [Action("screenshot", {"step": i}) for i in range(19)] + [Action("publish", {"page": "home"})]
    paused = await _agent(store, replies).run(Message.user("check the page", SHOT), run_id="shots")
    assert paused.status == "paused" and paused.state.steps == 20
    approved = paused.state.approve(paused.items[0].call.id, key=b"k" * 32)
    done = await _agent(await backend.open(), ["Published."]).run(approved)
    assert done.status == "finished"

    events = await (await backend.open()).load("shots")
    shots = [p for e in events if isinstance(e, ToolFinished) for p in e.result.content if isinstance(p, Image)]
    assert len(shots) == 19 and all(p == SHOT for p in shots)
    assert Journal.of(events).context == done.context  # what was stored is what the run saw
    assert any(isinstance(e, Paused) and len(e.state.messages) == 40 for e in events)
    if backend.name == "memory":  # kept by reference: one bytes object however many events name it
        assert all(p.data is SHOT.data for p in shots)
        return
    size = await _size(backend, store)
    if size is None:
        return
    assert size < 3 * MB, f"{size:,} bytes for a run that names a 1 MiB image in 20 notes and a paused state"


async def test_parts_come_back_exactly_from_another_store_object(backend: Backend) -> None:
    store = await backend.open()
    note = Message.user("two images", SHOT, Image(b"GIF89a;", "image/gif"))
    await Agent(ScriptedModel(["Seen."]), store=store).run(note, run_id="r1")
    other = await backend.open()
    first = (await other.load("r1"))[0]
    assert first.messages[-1] == note
    assert [p.data for p in first.messages[-1].parts] == [SHOT.data, b"GIF89a;"]


def test_a_stored_part_whose_bytes_were_changed_is_refused_on_load(tmp_path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    Agent(ScriptedModel(["Seen."]), store=store).run_sync(Message.user("look", SHOT), run_id="r1")
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        assert conn.execute("SELECT count(*) FROM blobs").fetchone() == (1,)
        conn.execute("UPDATE blobs SET data = ?", (b"\x89PNG\r\n\x1a\nforged",))
    with pytest.raises(StoreError, match="do not match their digest"):
        asyncio.run(store.load("r1"))
    store.close()


async def test_deleting_a_run_deletes_its_parts(tmp_path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    await Agent(ScriptedModel(["Seen."]), store=store).run(Message.user("look", SHOT), run_id="r1")
    await store.delete("r1")
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        assert conn.execute("SELECT count(*) FROM blobs").fetchone() == (0,)
    store.close()


def test_any_notes_with_parts_come_back_from_sqlite_exactly(tmp_path) -> None:
    import uuid

    from hypothesis import given, settings

    from tether.events import Compacted, RunStarted

    store = SQLiteStore(tmp_path / "runs.db")

    @settings(max_examples=60, deadline=None)
    @given(parts, parts)
    def round_trip(first, later) -> None:
        run_id = uuid.uuid4().hex
        events = [RunStarted(run_id, (Message.user(*first),)), Compacted((Message.user(*later), Message.user(*first)))]
        asyncio.run(store.append(run_id, events, expected_seq=0))
        assert asyncio.run(store.load(run_id)) == events

    round_trip()
    store.close()
