"""Which runs need a worker now, and the sweeper that hands them to a dispatcher.

A dispatcher may lose a delivery (a worker killed after it took the job, a
queue wiped); the store never does. :class:`Sweeper` reads the store, as the
truth, and submits every run a worker should advance now:

* a ``running`` run without a live lease (its worker died or stalled past its
  lease: the lease says so, on the database's clock);
* a ``paused`` or ``needs-decision`` run whose open items have all been
  decided, wherever the decision was recorded (another process, the CLI, the
  web inbox).

It looks once per ``every`` seconds, and at once when the store reports a
change (where the store is a :class:`~tether.store.ChangeFeed`: PostgreSQL's ``LISTEN``).
Submitting a run twice is harmless: the second worker loses the lease race.

>>> import asyncio
>>> from tether import Action, Agent, tool
>>> from tether.stores.memory import MemoryStore
>>> from tether.testing import ScriptedModel
>>> from tether.dispatch import LocalPool
>>> @tool(approval=True)
... def refund(order: str) -> str:
...     return f"refunded {order}"
>>> store = MemoryStore()
>>> agent = Agent(ScriptedModel([Action("refund", {"order": "A1"}), "Done."]), [refund], store=store, name="desk")
>>> paused = agent.run_sync("Refund A1", run_id="r1")
>>> async def main():
...     from tether import record_decisions
...     await record_decisions(store, "r1", lambda s: s.approve(s.open_calls[0].id, by="ana"))
...     async with LocalPool({"desk": agent}) as pool:
...         found = await Sweeper(store, pool).sweep()
...         await pool.drain()
...     return found, (await store.get("r1")).status
>>> asyncio.run(main())
(['r1'], 'finished')
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Iterable

from ..events import Event, Paused, RunStarted
from ..exceptions import StateError, StoreError
from ..journal import Journal
from ..store import ChangeFeed, RunInfo, RunStore, load_tree
from . import Dispatcher

__all__ = ["Sweeper", "backoff", "runnable"]

log = logging.getLogger("tether.dispatch")
LOOK_AT = ("running", "paused", "needs-decision")


async def runnable(store: RunStore, run_id: str, info: RunInfo | None = None) -> str | None:
    """The name of the agent that should advance ``run_id`` now, or None if no worker should.

    A child run (``root/call``) is advanced through its root run, so it is never runnable itself.
    """
    if "/" in run_id:
        return None
    info = info or await store.get(run_id)
    if info is None or info.status not in LOOK_AT or _held(info):
        return None
    events = await store.load(run_id)
    first = next((e for e in events if isinstance(e, RunStarted) and not e.resumed), None)
    if first is None:
        return None
    if info.status == "running":
        return first.agent
    return first.agent if await _decided(store, run_id, events) else None


def backoff(failures: int, first: float = 0.5, most: float = 30.0) -> float:
    """Seconds to wait after ``failures`` failures in a row: doubling from ``first`` up to ``most``,
    with jitter, so workers a database restart dropped together do not all come back at once.

    >>> 0.25 <= backoff(1) <= 0.5 and 15.0 <= backoff(10) <= 30.0
    True
    """
    return min(most, first * 2.0 ** max(0, failures - 1)) * random.uniform(0.5, 1.0)


def _held(info: RunInfo) -> bool:
    """A live worker holds the run (or has just let go of it: look again after its lease)."""
    return info.lease_expires_at is not None and info.lease_expires_at > time.time()


async def _decided(store: RunStore, run_id: str, events: list[Event]) -> bool:
    """A paused run whose open items (in its child runs too) all have a decision."""
    if Journal.of(events).closed or not any(isinstance(e, Paused) for e in events):
        return False
    try:
        state = await load_tree(store, run_id)
    except StateError:
        return False
    items = state.items()
    return bool(items) and all(state.decision(p.id) is not None for p in items)


class Sweeper:
    """Finds the runs a worker should advance (see the module docstring) and submits them."""

    def __init__(self, store: RunStore, dispatcher: Dispatcher, *, every: float = 5.0, agents: Iterable[str] = ()):
        self.store, self.dispatcher, self.every = store, dispatcher, every
        self.agents = frozenset(agents)  # only these agents' runs (empty: every agent's)
        self._agent: dict[str, str] = {}  # run -> the agent its run-started names
        self._waiting: dict[str, int] = {}  # run -> its length when it was found waiting for a person

    async def consider(self, run_id: str, info: RunInfo | None = None) -> bool:
        """Submit ``run_id`` if a worker should advance it now; True if it was submitted."""
        if "/" in run_id:
            return False
        info = info or await self.store.get(run_id)
        if info is None or info.status not in LOOK_AT or _held(info):
            return False
        agent = self._agent.get(run_id)
        if info.status != "running" and self._waiting.get(run_id) == info.seq:
            return False  # still waiting for a person, as when we last looked
        if info.status != "running" or agent is None:
            agent = await runnable(self.store, run_id, info)
            if agent is None:
                self._waiting[run_id] = info.seq
                return False
            self._agent[run_id] = agent  # a run's agent never changes: sweeps read no journal again
        if self.agents and agent not in self.agents:
            return False
        await self.dispatcher.submit(run_id, agent)
        return True

    async def sweep(self) -> list[str]:
        """Look at every run that may need a worker; the ids of those submitted."""
        found, seen = [], set()
        for status in LOOK_AT:
            for info in await self.store.list_runs(status, limit=1_000_000):
                seen.add(info.run_id)
                if await self.consider(info.run_id, info):
                    found.append(info.run_id)
        for memo in (self._agent, self._waiting):  # forget runs that ended (the memo stays this size)
            for run_id in set(memo) - seen:
                del memo[run_id]
        return found

    async def run(self) -> None:
        """Sweep every ``every`` seconds, and look at each run the store reports changed, until cancelled.

        A sweep that fails (the store, or the dispatcher's queue, is down) is tried again after
        a backoff; nothing the database does stops the sweeper.
        """
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self._watch())
            failures = 0
            while True:
                try:
                    await self.sweep()
                    failures = 0
                except Exception as exc:  # a StoreError, or the queue's own (ConnectorException)
                    failures += 1
                    log.warning("sweep failed (%s: %s); sweeping again", type(exc).__name__, exc)
                await asyncio.sleep(backoff(failures, self.every, max(self.every, 30.0)) if failures else self.every)

    async def _watch(self) -> None:
        if not isinstance(self.store, ChangeFeed):
            return  # the sweeps alone find what changed
        try:
            async for run_id in self.store.changes(interval=self.every):
                root = run_id.partition("/")[0]  # a decision in a child run wakes its root
                try:
                    await self.consider(root)
                except Exception as exc:  # the next sweep looks at it again
                    log.debug("could not look at run %r: %s", root, exc)
        except StoreError as exc:
            log.warning("the store stopped reporting changes (%s); sweeping every %.1f s", exc, self.every)
