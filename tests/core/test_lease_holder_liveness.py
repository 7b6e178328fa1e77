"""A lease this process holds is never judged gone by this process, from the moment it is taken until it is released."""

from __future__ import annotations

import pytest

from tether import LeaseConflict, leases
from tether.leases import Holder, Lease, gone
from tether.stores.sqlite import SQLiteStore


class Watched(SQLiteStore):
    """A real SQLite store that looks at the owner, as another thread would, while a lease changes hands."""

    seen: list[tuple[str, bool]]
    owners: list[str]

    async def acquire(self, run_id: str, owner: str, ttl: float, *, take_over: str | None = None) -> Lease:
        self.seen.append(("taking", gone(owner)))
        self.owners.append(owner)
        lease = await super().acquire(run_id, owner, ttl, take_over=take_over)
        self.seen.append(("taken", gone(owner)))  # committed: the lease is live in the store now
        return lease

    async def release(self, lease: Lease) -> None:
        self.seen.append(("releasing", gone(lease.owner)))  # still live in the store
        await super().release(lease)


async def test_a_lease_of_this_process_is_not_gone_while_it_is_taken_held_or_released(tmp_path) -> None:
    store = Watched(tmp_path / "runs.db")
    store.seen, store.owners = [], []
    holder = Holder(store, 30)
    await holder.take("r1")
    assert holder.lease is not None and not gone(holder.lease.owner)
    await holder.let_go()
    assert [s for s in store.seen if s[0] != "taking"] == [("taken", False), ("releasing", False)]
    assert gone(holder.lease.owner)  # released: a run of this process that ended


async def test_an_owner_that_failed_to_take_a_lease_is_not_left_live(tmp_path) -> None:
    store = Watched(tmp_path / "runs.db")
    store.seen, store.owners = [], []
    await store.acquire("r1", "elsewhere:0-0:1:worker", 60)  # a live holder on another machine
    store.seen, store.owners = [], []
    holder = Holder(store, 30)
    with pytest.raises(LeaseConflict):
        await holder.take("r1")
    assert store.seen == [("taking", False)]  # counted live while it tried
    assert holder.lease is None and store.owners[-1] not in leases._LIVE and gone(store.owners[-1])
