"""``tether serve --workers 0``: the server advances nothing itself; worker processes' queue does.

A run started and approved over the API is queued on the real Procrastinate
queue and advanced by a worker (here in the same event loop, with its own
dispatcher and store connection, as ``tether worker`` would run it).
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from durability.conftest import pg_url
from durability.harness import PG_DSN
from support import approve_through_the_api, refund_desk
from tether import UserError
from tether.dispatch.procrastinate import ProcrastinateDispatcher
from tether.serve import Server
from tether.stores.postgres import PostgresStore

pytestmark = pytest.mark.postgres
TOKEN = "t" * 64
KEY = "ab" * 32  # TETHER_SIGNING_KEY: the server signs decisions, the worker checks them


def test_a_server_without_workers_needs_an_engine() -> None:
    with pytest.raises(UserError, match="dispatcher"):
        Server([refund_desk([])], store="memory://", workers=0, env={"TETHER_SERVE_TOKEN": TOKEN})


async def test_runs_started_and_approved_over_the_api_are_advanced_by_a_worker_through_the_queue(
    store_schema: str, queue_schema: str, tmp_path: Any
) -> None:
    calls: list[str] = []
    url = pg_url(store_schema)
    server = Server([refund_desk(calls)], store=url, workers=0, env={"TETHER_SERVE_TOKEN": TOKEN, "TETHER_SIGNING_KEY": KEY},
                    dispatcher=ProcrastinateDispatcher.for_store(url, schema=queue_schema))  # fmt: skip
    worker_store = await PostgresStore.connect(PG_DSN, schema=store_schema)
    worker_agent = refund_desk(calls)
    worker_agent.store, worker_agent.signing_key = worker_store, bytes.fromhex(KEY)
    worker = ProcrastinateDispatcher(PG_DSN, {"support": worker_agent}, schema=queue_schema)
    transport = httpx.ASGITransport(app=server.app)
    headers = {"authorization": f"Bearer {TOKEN}", "host": "127.0.0.1"}
    async with server.running(), httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1",
                                                   headers=headers) as c:  # fmt: skip
        work = asyncio.create_task(worker.work(concurrency=2, sweep_every=30, poll_every=0.2))
        try:
            run_id = (await c.post("/api/runs", json={"agent": "support", "input": "Refund A1"})).json()["run_id"]
            await approve_through_the_api(c, run_id, seconds=30)  # workers advance and resume it
        finally:
            work.cancel()
            with pytest.raises(asyncio.CancelledError):
                await work
            await worker.aclose()
            await worker_store.aclose()
    assert calls == ["A1"]
