"""The server as an ASGI app inside another one: mounted under a prefix, with its lifespan run by the host app."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.routing import Mount

from support import approve_through_the_api, refund_desk, until
from tether import Action, Agent, FunctionPolicy, tool
from tether.serve import Server
from tether.stores.memory import MemoryStore

TOKEN = "t" * 64


async def test_a_server_mounted_under_a_prefix_serves_its_api_and_pages_there() -> None:
    calls: list[str] = []
    server = Server([refund_desk(calls)], store=MemoryStore(), env={"TETHER_SERVE_TOKEN": TOKEN})
    outer = Starlette(routes=[Mount("/tether", app=server.app)], lifespan=lambda _: server.running())
    transport = httpx.ASGITransport(app=outer)
    headers = {"authorization": f"Bearer {TOKEN}", "host": "127.0.0.1"}
    async with (
        server.running(),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers=headers) as c,
    ):
        started = await c.post("/tether/api/runs", json={"agent": "support", "input": "Refund A1"})
        assert started.status_code == 201 and started.headers["location"].startswith("/tether/api/runs/")
        await approve_through_the_api(c, started.json()["run_id"], prefix="/tether")
        login = await c.get("/tether/", headers={"authorization": ""})
        assert login.status_code == 303 and login.headers["location"] == "/tether/login?next=/"
        signed_in = await c.post("/tether/login", data={"name": "ana", "token": TOKEN}, headers={"authorization": ""})
        assert "Path=/tether" in signed_in.headers["set-cookie"]
        page = await c.get("/tether/login")
        assert 'href="/tether/static/inbox.css"' in page.text
    assert calls == ["A1"]


async def test_cancelling_a_running_run_stops_its_worker_at_its_next_commit() -> None:
    gate = asyncio.Event()
    asked: list[int] = []

    @tool(effect="none")
    async def wait(n: int) -> int:
        """Wait for the gate."""
        await gate.wait()
        return n

    def brain(context: Any, tools: Any) -> Any:
        asked.append(len(context))
        return "done" if any(m.role == "tool" for m in context) else Action("wait", {"n": 1})

    store = MemoryStore()
    server = Server([Agent(FunctionPolicy(brain), [wait], name="w")], store=store, env={"TETHER_SERVE_TOKEN": TOKEN})
    async with server.running():
        view, _ = await server.service.start("w", "go", run_id=None, key=None, meta={})

        async def in_the_tool() -> bool:
            events = await store.load(view.run_id)
            return events[-1].kind == "tool-started"

        await until(in_the_tool, "the tool runs")
        cancelled = await server.service.cancel(view.run_id, reason="wrong customer", by="api:ana")
        assert (cancelled.status, cancelled.closed) == ("cancelled", True)
        gate.set()

        async def worker_done() -> bool:
            return not server.workers.active

        await until(worker_done, "the worker lets go")
        after = await store.load(view.run_id)
    assert after[-1].kind == "cancelled" and "wrong customer" in after[-1].reason  # type: ignore[union-attr]
    assert len(asked) == 1  # the model was never asked again


def _finished(store: MemoryStore, run_id: str) -> Any:
    async def check() -> bool:
        events = await store.load(run_id)
        return bool(events) and events[-1].kind == "finished"

    return check


async def test_stopping_the_workers_just_as_a_run_lets_go_of_its_lease_never_hangs() -> None:
    """A cancellation that lands while a run releases its lease used to be swallowed (the pool then hung)."""
    for n in range(30):
        store = MemoryStore()
        server = Server(
            [Agent(FunctionPolicy(lambda c, t: "hi"), name="a")], store=store, env={"TETHER_SERVE_TOKEN": TOKEN}
        )
        async with asyncio.timeout(20):
            async with server.running():
                view, _ = await server.service.start("a", f"hello {n}", run_id=None, key=None, meta={})

                await until(_finished(store, view.run_id), "the run finishes")
        assert (await store.get(view.run_id)).status == "finished"  # type: ignore[union-attr]
