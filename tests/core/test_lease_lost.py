"""A worker that loses its run stops its calls: a freeze past the lease, or a takeover it learns of on renewal.

A freeze is a blocking ``time.sleep`` in the event loop: nothing of the process
runs meanwhile, and the monotonic clock goes on, as under SIGSTOP. The real
attack, with processes, is tests/durability/test_stalled_retry.py.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest

from tether import LeaseConflict, Message, ToolFinished
from tether.leases import Holder, late
from tether.stores.sqlite import SQLiteStore


class Slow(SQLiteStore):
    """Renewals that take longer than the lease lasts (a slow database): not a loss by themselves."""

    async def acquire(self, run_id: str, owner: str, ttl: float, *, take_over: str | None = None):  # type: ignore[no-untyped-def]
        if getattr(self, "slow", False):
            await asyncio.sleep(ttl * 1.5)
        return await super().acquire(run_id, owner, ttl, take_over=take_over)


async def long_call(steps: list[int]) -> str:
    for i in range(200):
        await asyncio.sleep(0.01)
        steps.append(i)
    return "effect done"


async def test_a_worker_frozen_past_its_lease_cancels_its_call_on_waking(tmp_path: Path) -> None:
    holder = Holder(SQLiteStore(tmp_path / "runs.db"), 0.3)
    await holder.take("r1")
    steps: list[int] = []
    call = asyncio.ensure_future(holder.guard(long_call(steps)))
    await asyncio.sleep(0.05)
    time.sleep(0.8)  # the whole process stops, past its lease
    with pytest.raises(LeaseConflict, match=r"stopped for .* past its lease"):
        await call
    assert len(steps) < 200 and holder.expired()  # the call never reached its end
    await holder.let_go()


async def test_another_workers_takeover_seen_on_renewal_cancels_the_call(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    holder = Holder(store, 0.3)
    await holder.take("r1")
    steps: list[int] = []
    call = asyncio.ensure_future(holder.guard(long_call(steps)))
    assert holder.lease is not None
    await store.acquire("r1", "elsewhere:0-0:1:ab", 30, take_over=holder.lease.owner)  # another worker
    with pytest.raises(LeaseConflict, match="another worker"):
        await call
    assert len(steps) < 200
    await holder.let_go()


async def test_a_slow_store_is_not_a_lost_run(tmp_path: Path) -> None:
    store = Slow(tmp_path / "runs.db")
    holder = Holder(store, 0.3)
    await holder.take("r1")
    store.slow = True  # type: ignore[attr-defined]
    steps: list[int] = []
    assert await holder.guard(long_call(steps)) == "effect done"  # 2 s of calls across slow renewals
    assert not holder.expired()
    await holder.let_go()


def test_a_late_result_is_logged_and_never_reported(caplog: pytest.LogCaptureFixture) -> None:
    result = ToolFinished(Message.tool_result("c1", "sent to ana", name="send"))
    with caplog.at_level(logging.WARNING, logger="tether.leases"):
        late("r1", result, LeaseConflict("run 'r1' is no longer this worker's"))
    assert "late result of call 'c1' in run 'r1'" in caplog.text and "sent to ana" in caplog.text
