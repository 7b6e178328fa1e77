"""Small breaks an operator met in the served API: the words of a refusal."""

from __future__ import annotations

import httpx

from support import refund_desk, until
from tether.serve import Server
from tether.stores.memory import MemoryStore

TOKEN = "t" * 64


async def test_a_wrong_verdict_names_the_item_kind_with_its_article() -> None:
    server = Server([refund_desk([])], store=MemoryStore(), env={"TETHER_SERVE_TOKEN": TOKEN})
    headers = {"authorization": f"Bearer {TOKEN}", "host": "127.0.0.1"}
    transport = httpx.ASGITransport(app=server.app)
    async with server.running(), httpx.AsyncClient(transport=transport, base_url="http://x", headers=headers) as c:
        run_id = (await c.post("/api/runs", json={"agent": "support", "input": "Refund A1"})).json()["run_id"]

        async def paused() -> bool:
            return bool((await c.get("/api/items")).json()["items"])

        await until(paused, "the refund waits")
        item = (await c.get("/api/items")).json()["items"][0]
        wrong = await c.post(
            f"/api/runs/{run_id}/items/{item['call_id']}/answer", json={"args_hash": item["args_hash"], "answer": "x"}
        )
    assert wrong.status_code == 422
    assert wrong.json()["error"]["message"].startswith("an approval item takes ")
