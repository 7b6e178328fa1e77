"""Who advances which run: dispatchers hand run ids to workers.

The store is the truth; a dispatcher only says *which worker should look at
which run now*. A worker advances a run by resuming it from the store
(``agent.run(run_id=...)``), which takes the run's lease: a duplicate or late
delivery loses the lease race (or finds the run already paused or finished)
and does nothing. So a dispatcher may deliver a run id more than once; it must
not lose one for good (a sweeper finds runnable runs without a live lease).

:class:`LocalPool` is the in-process dispatcher: a bounded pool of asyncio
workers, used by ``tether serve`` and the evaluation harness.
:class:`~tether.dispatch.procrastinate.ProcrastinateDispatcher` hands runs to
worker processes (``tether worker``) through a task queue on the store's
PostgreSQL, and :class:`Sweeper` finds the runs a lost delivery left behind.
See ``docs/scale.md``.

>>> import asyncio
>>> from tether import Agent
>>> from tether.stores.memory import MemoryStore
>>> from tether.testing import ScriptedModel
>>> store = MemoryStore()
>>> agent = Agent(ScriptedModel(["hello"]), store=store, name="greeter")
>>> from tether import Message, RunStarted
>>> async def main():
...     await store.append("r1", [RunStarted("r1", (Message.user("hi"),), False, agent.fingerprint, "greeter")],
...                        expected_seq=0)
...     async with LocalPool({"greeter": agent}) as pool:
...         await pool.submit("r1", "greeter")
...         await pool.drain()
...     return (await store.get("r1")).status
>>> asyncio.run(main())
'finished'
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from ..agent import Agent, RunResult
from ..exceptions import LeaseConflict, StateError, UserError
from ._deps import INPUTS_LABEL, DepsFactory, deps_for, inputs_label, record_stuck, refuse_missing

__all__ = [
    "INPUTS_LABEL",
    "DepsFactory",
    "Dispatcher",
    "LocalPool",
    "Sweeper",
    "deps_for",
    "inputs_label",
    "record_stuck",
    "refuse_missing",
    "runnable",
    "tune_gc",
]

log = logging.getLogger("tether.dispatch")

OnDone = Callable[[str, "RunResult | BaseException"], Awaitable[None] | None]


def tune_gc(young: int = 10_000) -> tuple[int, int, int]:
    """Collect the youngest objects less often, for a process that holds many runs at once.

    With CPython's default (a young collection every 700 net allocations), thousands of
    concurrent runs trigger a full collection over the whole, growing heap again and again:
    at 10,000 runs CPU per step rose 45 % over 100 runs (bench/bench_scale.py), all of it in
    the collector. At ``young=10_000`` it rose about 12 %. ``tether worker`` and ``tether serve``
    call this; call it yourself in a process of your own that runs thousands of agents.
    Returns the thresholds now in force (never lowers them).

    >>> tune_gc()[0] >= 10_000
    True
    """
    gen0, gen1, gen2 = gc.get_threshold()
    if 0 < gen0 < young:
        gc.set_threshold(young, gen1, gen2)
    return gc.get_threshold()


class Dispatcher(Protocol):
    """Hands runs to workers; ``submit`` may be called more than once for one run."""

    async def submit(self, run_id: str, agent: str, *, delay: float = 0.0) -> None:
        """Ask for ``run_id`` to be advanced by the agent named ``agent`` (after ``delay`` seconds)."""
        ...


class LocalPool:
    """A bounded pool of asyncio workers in this process.

    ``agents`` maps agent names to agents (each with a store); a submitted run
    is resumed by the agent its ``run-started`` event names. ``concurrency``
    bounds how many runs advance at once; a run already queued is not queued
    twice. ``deps`` is the factory that makes each run's dependencies
    (:mod:`tether.dispatch._deps`). ``on_done(run_id, result_or_error)`` is called after each attempt.
    Closing the pool cancels the runs in flight: each ends ``cancelled``
    (interrupted, resumable) in its store.
    """

    def __init__(
        self,
        agents: Mapping[str, Agent],
        *,
        concurrency: int = 8,
        on_done: OnDone | None = None,
        deps: DepsFactory | None = None,
    ) -> None:
        if not isinstance(concurrency, int) or concurrency < 1:
            raise UserError(f"concurrency must be a positive integer, got {concurrency!r}")
        for name, agent in agents.items():
            if agent.store is None:
                raise UserError(f"agent {name!r} has no store: a pool resumes runs from a store")
        self.agents = dict(agents)
        self.concurrency = concurrency
        self.on_done = on_done
        self.deps = deps
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._queued: set[str] = set()
        self._workers: list[asyncio.Task[None]] = []
        self._timers: set[asyncio.TimerHandle] = set()
        self._closed = False

    async def __aenter__(self) -> LocalPool:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def start(self) -> None:
        """Start the workers (idempotent)."""
        if not self._workers:
            self._workers = [
                asyncio.create_task(self._work(), name=f"tether-worker-{i}") for i in range(self.concurrency)
            ]

    async def submit(self, run_id: str, agent: str, *, delay: float = 0.0) -> None:
        """Queue ``run_id`` for the agent named ``agent``, now or after ``delay`` seconds."""
        if self._closed:
            raise UserError("the pool is closed")
        if agent not in self.agents:
            raise UserError(f"no agent named {agent!r} in this pool (it has {sorted(self.agents)})")
        if delay > 0:
            loop = asyncio.get_running_loop()
            handle = loop.call_later(delay, self._enqueue, run_id, agent)
            self._timers.add(handle)
            return
        self._enqueue(run_id, agent)

    def _enqueue(self, run_id: str, agent: str) -> None:
        if not self._closed and run_id not in self._queued:
            self._queued.add(run_id)
            self._queue.put_nowait((run_id, agent))

    async def drain(self) -> None:
        """Wait until every queued run has been attempted."""
        await self._queue.join()

    async def aclose(self) -> None:
        """Stop taking work and cancel the runs in flight (each ends resumable)."""
        self._closed = True
        for handle in self._timers:
            handle.cancel()
        for task in self._workers:
            task.cancel()
        for task in self._workers:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._workers = []

    async def _work(self) -> None:
        while True:
            run_id, name = await self._queue.get()
            self._queued.discard(run_id)
            try:
                outcome: RunResult | BaseException = await self._advance(run_id, name)
            except Exception as exc:  # reported, never fatal to the pool
                log.exception("run %r failed in the pool", run_id)
                outcome = exc
            finally:
                self._queue.task_done()
            try:
                await self._report(run_id, outcome)
            except Exception:  # the callback's failure (its store went away) must not stop this worker
                log.exception("on_done failed for run %r", run_id)

    async def _advance(self, run_id: str, name: str) -> RunResult | BaseException:
        agent = self.agents[name]
        assert agent.store is not None
        try:
            deps = await deps_for(self.deps, agent.store, run_id, name)
            return await agent.run(run_id=run_id, deps=deps)
        except (LeaseConflict, StateError) as exc:  # another worker has it, or there is nothing to do
            log.debug("run %r not advanced: %s", run_id, exc)
            return exc

    async def _report(self, run_id: str, outcome: RunResult | BaseException) -> None:
        if self.on_done is None:
            return
        maybe = self.on_done(run_id, outcome)
        if maybe is not None:
            await maybe


from ._sweeper import Sweeper, runnable  # noqa: E402  (it builds on Dispatcher above)
