"""Who advances the served runs: a bounded pool of workers that notices every change.

:class:`Workers` owns a :class:`~tether.dispatch.LocalPool` and decides which
runs it should look at:

* a run started over the API, at once;
* a paused run whose open items have all been decided, as soon as the last
  decision is recorded, wherever it was recorded (the API, the inbox, the CLI
  or ``record_decisions`` in another process): the server's own appends are
  seen at once, everyone else's through the store's change notifications;
* on start, and every ``sweep_every`` seconds, runs that are ``running`` with no
  live worker (their server died; the lease says so), paused runs that are
  ready, and the runs this server's last shutdown interrupted.

Each worker takes the run's lease (``agent.run(run_id=...)``), so two servers
on one database never advance a run twice; the loser of a race does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ..agent import Agent, RunResult
from ..dispatch import DepsFactory, Dispatcher, LocalPool, record_stuck
from ..events import Event
from ..exceptions import LeaseConflict, StateError, StoreError
from ..store import Lease, RunStore, StoreWrapper
from ._hub import Hub
from ._views import WAITING, RunView, Views

__all__ = ["ServedStore", "Workers"]

log = logging.getLogger("tether.serve")
WAKE_KINDS = frozenset(("paused", "approval-decided", "cancelled"))


class ServedStore(StoreWrapper):
    """The store as the server's agents and decisions use it: each append is announced at once."""

    def __init__(self, inner: RunStore, on_append: Callable[[str, Sequence[Event]], None]) -> None:
        super().__init__(inner)
        self.on_append = on_append

    async def append(
        self, run_id: str, events: Sequence[Event], *, expected_seq: int, lease: Lease | None = None
    ) -> int:
        seq = await self.inner.append(run_id, events, expected_seq=expected_seq, lease=lease)
        self.on_append(run_id, events)
        return seq


class Workers:
    """The pool, and the rules for which run it should advance now."""

    def __init__(
        self,
        agents: dict[str, Agent],
        store: ServedStore,
        hub: Hub,
        views: Views,
        *,
        concurrency: int,
        on_waiting: Callable[[RunView], None] | None = None,
        interrupted: Path | None = None,
        sweep_every: float = 5.0,
        dispatcher: Dispatcher | None = None,
        deps: DepsFactory | None = None,
    ) -> None:
        self.agents, self.store, self.hub, self.views = agents, store, hub, views
        # Without in-process workers, runs go to an engine (tether worker processes advance them).
        self.remote = dispatcher
        pool = LocalPool(agents, concurrency=concurrency, on_done=self._done, deps=deps) if dispatcher is None else None
        self.pool = pool
        self.on_waiting = on_waiting
        self.interrupted = interrupted
        self.sweep_every = sweep_every
        self.active: set[str] = set()  # submitted and not yet reported done
        self.again: set[str] = set()  # changed while active: look again when done
        self.refused: dict[str, int] = {}  # run -> length when a worker refused it (not for lease reasons)
        self.notified: set[tuple[str, int]] = set()  # (run, position of its pause) already announced
        self._tasks: list[asyncio.Task[None]] = []
        self._looks: set[asyncio.Task[None]] = set()

    # -- lifecycle -----------------------------------------------------------------

    async def start(self) -> None:
        """Start the pool, pick up what the last server left, and keep watching."""
        if self.pool is not None:
            self.pool.start()
        await self._recover()
        self._tasks = [asyncio.create_task(self._watch()), asyncio.create_task(self._sweep_forever())]

    async def stop(self) -> None:
        """Stop watching and cancel the runs in flight (each ends resumable; the next start resumes it)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        in_flight = sorted(self.active)
        if self.pool is not None:
            await self.pool.aclose()
        aclose = getattr(self.remote, "aclose", None)
        if aclose is not None:
            await aclose()
        if self.interrupted is not None and in_flight:
            self.interrupted.parent.mkdir(parents=True, exist_ok=True)
            self.interrupted.write_text(json.dumps(in_flight))

    # -- what to advance -----------------------------------------------------------

    async def submit(self, run_id: str, agent: str) -> None:
        """Advance ``run_id`` with the agent named ``agent`` (once at a time per run)."""
        if agent not in self.agents:
            return
        if self.pool is None:  # handed to the engine: a duplicate loses the lease race there
            assert self.remote is not None
            await self.remote.submit(run_id, agent)
            return
        if run_id in self.active:
            self.again.add(run_id)
            return
        self.active.add(run_id)
        await self.pool.submit(run_id, agent)

    def appended(self, run_id: str, events: Sequence[Event]) -> None:
        """The server itself appended ``events``: wake the streams, and look at the run if it may need us."""
        self.hub.changed(run_id)
        if any(ev.kind in WAKE_KINDS for ev in events):
            look = asyncio.get_running_loop().create_task(self.consider(run_id))
            self._looks.add(look)
            look.add_done_callback(self._looks.discard)

    async def consider(self, run_id: str, *, sweeping: bool = False, quiet: bool = False) -> None:
        """Advance the run if it is ready, announce it if it starts waiting."""
        run_id = run_id.partition("/")[0]  # a child run is advanced (and waits) through its root run
        if run_id in self.active:
            self.again.add(run_id)
            return
        try:
            view: RunView | None = await self.views.get(run_id)
        except StoreError as exc:
            log.warning("could not look at run %r: %s", run_id, exc)
            return
        if view is None or self.refused.get(run_id) == view.seq:
            return
        if view.status in WAITING:
            await self._waiting(view, quiet=quiet)
        elif view.status == "running" and (sweeping or not await self._lease_live(run_id)):
            await self.submit(run_id, view.agent)

    async def _waiting(self, view: RunView, *, quiet: bool) -> None:
        if view.items and not view.waiting:
            await self.submit(view.run_id, view.agent)
            return
        key = (view.run_id, _pause_position(view))
        if view.waiting and key not in self.notified:
            self.notified.add(key)
            if self.on_waiting is not None and not quiet and view.agent in self.agents:
                self.on_waiting(view)

    async def _lease_live(self, run_id: str) -> bool:
        info = await self.store.get(run_id)
        return info is not None and info.lease_expires_at is not None and info.lease_expires_at > time.time()

    async def _done(self, run_id: str, outcome: RunResult | BaseException) -> None:
        self.active.discard(run_id)
        if isinstance(outcome, BaseException) and not isinstance(outcome, LeaseConflict | StateError):
            log.error("run %r could not be advanced: %s: %s", run_id, type(outcome).__name__, outcome)
            if not await record_stuck(self.store, run_id, outcome):  # the run says why (failed), or
                info = await self.store.get(run_id)  # it is left alone until it changes
                self.refused[run_id] = info.seq if info else 0
        if run_id in self.again or isinstance(outcome, RunResult):
            self.again.discard(run_id)
            await self.consider(run_id)

    # -- watching and sweeping -----------------------------------------------------

    async def _watch(self) -> None:
        try:  # a store without a change feed reports nothing: the sweep alone finds what changed
            async for run_id in self.store.changes():
                self.hub.changed(run_id)
                try:
                    await self.consider(run_id)
                except Exception as exc:  # the engine's queue is down (say): the next sweep looks again
                    log.warning("could not look at run %r: %s", run_id, exc)
        except StoreError as exc:
            log.warning("the store stopped reporting changes (%s); sweeping every %.0f s", exc, self.sweep_every)

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_every)
            try:
                await self.sweep()
            except Exception as exc:  # the store or the engine's queue went away: sweep again later
                log.warning("sweep failed: %s: %s", type(exc).__name__, exc)

    async def sweep(self, *, quiet: bool = False) -> None:
        """Look at every run that may need a worker or a person."""
        for status in ("running", "paused", "needs-decision"):
            for info in await self.store.list_runs(status, limit=100_000):
                await self.consider(info.run_id, sweeping=True, quiet=quiet)

    async def _recover(self) -> None:
        """Runs the last shutdown interrupted, then every run that was running or is ready."""
        if self.interrupted is not None and self.interrupted.exists():
            for run_id in _run_ids(self.interrupted):
                view = await self.views.get(run_id)
                if view is not None and view.status in ("cancelled", "running") and not view.closed:
                    await self.submit(run_id, view.agent)
            self.interrupted.unlink(missing_ok=True)
        await self.sweep(quiet=True)


def _pause_position(view: RunView) -> int:
    return max((n for n, ev in enumerate(view.events, 1) if ev.kind == "paused"), default=0)


def _run_ids(path: Path) -> list[str]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return [r for r in data if isinstance(r, str)] if isinstance(data, list) else []
