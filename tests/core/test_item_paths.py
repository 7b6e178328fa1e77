"""Item paths are unambiguous: a provider call id holding "/" cannot make one item stand for another.

Call ids come from the model's endpoint verbatim, so a self-hosted model, a gateway
or a middlebox chooses them. A parent's call whose own id is ``c1/X`` and the call
``X`` of the child run under the parent's call ``c1`` must be two addresses, and a
decision made (by hash) for one must never run the other.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tether import Agent, Choice, record_decisions, tool
from tether.exceptions import StateError
from tether.messages import Message, ToolCall
from tether.pending import child_run_id, item_id, item_path
from tether.stores.sqlite import SQLiteStore
from tether.testing import FunctionPolicy

ran: list[str] = []
ARGS = '{"order_id": "A1", "amount": 9999}'  # the same arguments, so the same args_hash


@tool(approval=True)
def issue_refund(order_id: str, amount: int) -> str:
    """Refund an order (a person approves)."""
    ran.append(f"refund {order_id} {amount}")
    return "refunded"


@tool(approval=True)
def note_customer(order_id: str, amount: int) -> str:
    """Write a note on the customer's file (harmless, still asked)."""
    ran.append(f"note {order_id} {amount}")
    return "noted"


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def _calls(*calls: ToolCall) -> Message:
    return Message.assistant("", list(calls))


def billing_brain(context: Any, tools: Any) -> Any:
    if not any(m.role == "tool" for m in context):
        return _calls(ToolCall("X", "issue_refund", ARGS))
    return "billing done"


def support_brain(context: Any, tools: Any) -> Any:
    if not any(m.role == "tool" for m in context):  # the endpoint chose the ids: one of them holds a "/"
        return _calls(ToolCall("c1", "billing", '{"task": "refund A1"}'), ToolCall("c1/X", "note_customer", ARGS))
    return "support done"


def desk(store: SQLiteStore) -> Agent:
    billing = Agent(FunctionPolicy(billing_brain), [issue_refund], name="billing")
    tools = [billing.as_tool(description="Billing."), note_customer]
    return Agent(FunctionPolicy(support_brain), tools, name="support", store=store)


def test_a_parent_call_named_like_a_child_path_is_its_own_item_and_approving_it_runs_only_it(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    paused = desk(store).run_sync("refund A1", run_id="r1")
    assert paused.status == "paused" and ran == []
    by_name = {p.call.name: p for p in paused.items}
    note, refund = by_name["note_customer"], by_name["issue_refund"]
    assert note.id != refund.id and refund.id == "c1/X"
    assert note.args_hash == refund.args_hash  # only the address tells them apart
    # The reviewer's move: approve the harmless item, by its id and the hash shown.
    asyncio.run(record_decisions(store, "r1", Choice("approve", note.id, args_hash=note.args_hash), by="ana"))
    again = desk(store).run_sync(run_id="r1")
    assert ran == ["note A1 9999"]  # the refund nobody approved did not run
    assert again.status == "paused" and [p.call.name for p in again.items] == ["issue_refund"]
    assert [p.id for p in again.items] == ["c1/X"]
    asyncio.run(store.aclose())


def test_approving_the_child_item_runs_only_the_child_call(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    paused = desk(store).run_sync("refund A1", run_id="r1")
    refund = next(p for p in paused.items if p.call.name == "issue_refund")
    asyncio.run(record_decisions(store, "r1", Choice("approve", refund.id, args_hash=refund.args_hash), by="ana"))
    again = desk(store).run_sync(run_id="r1")
    assert ran == ["refund A1 9999"]
    assert [p.call.name for p in again.items] == ["note_customer"]
    asyncio.run(store.aclose())


def test_a_lone_call_id_with_a_slash_is_addressed_and_runs_once_approved(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")

    def brain(context: Any, tools: Any) -> Any:
        if not any(m.role == "tool" for m in context):
            return _calls(ToolCall("x/y", "issue_refund", ARGS))
        return "done"

    agent = Agent(FunctionPolicy(brain), [issue_refund], store=store)
    paused = agent.run_sync("refund", run_id="r2")
    [item] = paused.items
    assert item_path(item.id) == ("x/y",)
    asyncio.run(record_decisions(store, "r2", Choice("approve", item.id, args_hash=item.args_hash), by="ana"))
    done = agent.run_sync(run_id="r2")
    assert done.status == "finished" and ran == ["refund A1 9999"]
    assert done.state.messages[-2].tool_call_id == "x/y"  # the provider's id is kept verbatim
    asyncio.run(store.aclose())


def test_a_delegated_call_id_with_a_slash_gets_a_child_run_of_its_own() -> None:
    assert child_run_id("r1", "c1/X") != child_run_id(child_run_id("r1", "c1"), "X")
    assert child_run_id("r1", "c1") == "r1/c1"  # plain ids (every stored run tree so far) keep their names


@pytest.mark.parametrize(
    "path", [("c1",), ("c1", "X"), ("c1/X",), ("a~1b",), ("~", "/"), ("a/b/c", "d~0e", ""), ("call_1_0",), ("%2F",)]
)
def test_item_ids_round_trip_and_never_collide(path: tuple[str, ...]) -> None:
    assert item_path(item_id(path)) == path
    others = [("c1",), ("c1", "X"), ("c1/X",), ("a~1b",), ("a/b",), ("~", "/"), ("a/b/c", "d~0e", ""), ("%2F",)]
    assert [o for o in others if o != path and item_id(o) == item_id(path)] == []


def test_a_choice_for_an_address_nothing_waits_at_is_refused(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    paused = desk(store).run_sync("refund A1", run_id="r1")
    with pytest.raises(StateError):
        paused.state.approve("c1~1Y")
    with pytest.raises(StateError):
        paused.state.approve("c1/X/Z")
    asyncio.run(store.aclose())


def test_deciding_both_colliding_items_records_each_on_its_own_run(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    paused = desk(store).run_sync("refund A1", run_id="r1")
    by_name = {p.call.name: p for p in paused.items}
    refund, note = by_name["issue_refund"], by_name["note_customer"]
    asyncio.run(record_decisions(store, "r1", Choice("deny", refund.id, message="no"), by="ana"))
    # The child's X now has a decision; the parent's own "c1/X" is another call and is still open.
    asyncio.run(record_decisions(store, "r1", Choice("approve", note.id, args_hash=note.args_hash), by="ana"))
    done = desk(store).run_sync(run_id="r1")
    assert ran == ["note A1 9999"] and done.status == "finished"
    asyncio.run(store.aclose())


async def test_through_the_api_approving_the_harmless_item_by_hash_never_runs_the_other(tmp_path: Path) -> None:
    # The review's attack, as it was made: the person approves note_customer by its hash over HTTP
    # (raw item id in the URL), and the child's refund must not run.
    pytest.importorskip("starlette", reason="needs tether[serve]")
    import httpx

    from support import until
    from tether.serve import Server

    token = "t" * 64
    store = SQLiteStore(tmp_path / "runs.db")
    server = Server([desk(store)], store=store, env={"TETHER_SERVE_TOKEN": token})
    headers = {"authorization": f"Bearer {token}", "host": "127.0.0.1"}
    transport = httpx.ASGITransport(app=server.app)
    async with (
        server.running(),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers=headers) as c,
    ):
        run_id = (await c.post("/api/runs", json={"agent": "support", "input": "refund A1"})).json()["run_id"]

        async def both_wait() -> bool:
            return len((await c.get(f"/api/runs/{run_id}")).json()["items"]) == 2

        await until(both_wait, "the run pauses with both items")
        items = {i["tool"]: i for i in (await c.get(f"/api/runs/{run_id}")).json()["items"]}
        note, refund = items["note_customer"], items["issue_refund"]
        assert note["call_id"] != refund["call_id"] and note["args_hash"] == refund["args_hash"]
        url = f"/api/runs/{run_id}/items/{note['call_id']}/approve"
        assert (await c.post(url, json={"args_hash": note["args_hash"]})).status_code == 200

        async def noted() -> bool:
            return ran == ["note A1 9999"]

        decided = {i["tool"]: i["decision"] for i in (await c.get(f"/api/runs/{run_id}")).json()["items"]}
        assert decided["note_customer"]["verdict"] == "approve" and decided["issue_refund"] is None
        # The run resumes once every item is decided: the refund is denied, so only the note may run.
        url = f"/api/runs/{run_id}/items/{refund['call_id']}/deny"
        assert (await c.post(url, json={"args_hash": refund["args_hash"], "message": "no"})).status_code == 200

        async def finished() -> bool:
            return (await c.get(f"/api/runs/{run_id}")).json()["status"] == "finished"

        await until(finished, "the run finishes")
    assert ran == ["note A1 9999"]  # never the refund
