"""Who waits for which run to change, and one shared copy of each watched run's events.

The :class:`Hub` is told a run changed (by the server's own appends at once,
and by the store's change notifications for everyone else's). It wakes the
streams that wait on that run and the streams that wait on any run. A
:class:`Feed` is one run's events as its subscribers read them: however many
people watch a run, each change is loaded from the store once.

>>> import asyncio
>>> async def demo():
...     hub = Hub()
...     waiter = asyncio.ensure_future(hub.wait("r1", timeout=5))
...     await asyncio.sleep(0)
...     hub.changed("r1")
...     return await waiter
>>> asyncio.run(demo())
True
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator

from ..events import Event
from ..store import RunStore

__all__ = ["Feed", "Hub", "Listener", "wait_for"]


async def wait_for(flag: asyncio.Event, timeout: float) -> bool:
    """Whether ``flag`` was set within ``timeout`` seconds."""
    try:
        async with asyncio.timeout(timeout):
            await flag.wait()
    except TimeoutError:
        return False
    return True


class Feed:
    """The events of one run as its subscribers read them, loaded again only after a change.

    Each event's SSE frame is encoded once (``render``), however many read it.
    """

    def __init__(self, store: RunStore, run_id: str, render: Callable[[int, Event], str]) -> None:
        self.store, self.run_id, self.render = store, run_id, render
        self.events: list[Event] = []
        self.frames: list[str] = []
        self.subscribers = 0
        self.stale = True  # set by the hub on each change
        self._lock = asyncio.Lock()

    async def after(self, position: int) -> list[str]:
        """The frames of the events after ``position`` (a count of events)."""
        async with self._lock:
            if self.stale:
                self.stale = False
                info = await self.store.get(self.run_id)
                if info is not None and info.seq > len(self.events):
                    self.events = await self.store.load(self.run_id)
                    done = len(self.frames)
                    self.frames += [self.render(n, ev) for n, ev in enumerate(self.events[done:], done + 1)]
        return self.frames[position:]


class Listener:
    """The runs that changed since the listener last looked (a set: a busy run counts once)."""

    def __init__(self) -> None:
        self.flag = asyncio.Event()
        self.pending: set[str] = set()

    def take(self) -> list[str]:
        """The runs that changed, now forgotten (clears the flag)."""
        self.flag.clear()
        runs, self.pending = sorted(self.pending), set()
        return runs


class Hub:
    """Wakes whoever waits on a run (or listens to every run) when it changes."""

    def __init__(self) -> None:
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._listeners: set[Listener] = set()
        self._feeds: dict[str, Feed] = {}

    def changed(self, run_id: str) -> None:
        """Run ``run_id`` has new events: wake its waiters and tell every listener."""
        feed = self._feeds.get(run_id)
        if feed is not None:
            feed.stale = True
        for flag in self._waiters.get(run_id, ()):
            flag.set()
        for listener in self._listeners:
            listener.pending.add(run_id)
            listener.flag.set()

    @contextlib.contextmanager
    def listen(self) -> Iterator[Listener]:
        """A :class:`Listener` told of every change, for as long as the block runs."""
        listener = Listener()
        self._listeners.add(listener)
        try:
            yield listener
        finally:
            self._listeners.discard(listener)

    @contextlib.contextmanager
    def subscription(self, run_id: str) -> Iterator[asyncio.Event]:
        """A flag set whenever ``run_id`` changes, for as long as the block runs.

        Clear it *before* looking at the run, then wait on it: a change that
        lands in between is never missed.
        """
        flag = asyncio.Event()
        self._waiters.setdefault(run_id, set()).add(flag)
        try:
            yield flag
        finally:
            waiters = self._waiters[run_id]
            waiters.discard(flag)
            if not waiters:
                del self._waiters[run_id]

    async def wait(self, run_id: str, timeout: float) -> bool:
        """Wait until ``run_id`` changes; False if ``timeout`` passed first."""
        with self.subscription(run_id) as flag:
            return await wait_for(flag, timeout)

    @contextlib.contextmanager
    def feed(self, store: RunStore, run_id: str, render: Callable[[int, Event], str]) -> Iterator[Feed]:
        """The shared :class:`Feed` of ``run_id`` while the caller streams it."""
        feed = self._feeds.get(run_id) or self._feeds.setdefault(run_id, Feed(store, run_id, render))
        feed.subscribers += 1
        try:
            yield feed
        finally:
            feed.subscribers -= 1
            if not feed.subscribers:
                self._feeds.pop(run_id, None)
