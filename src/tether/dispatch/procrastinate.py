"""Runs handed to worker processes through Procrastinate, a task queue on the store's PostgreSQL.

``pip install 'tether[workers]'``. One database holds both the runs (the
store, the truth) and the queue (which worker should look at which run now);
the queue's tables live in a schema of their own (``tether_queue`` by default),
created on first use. A job says "advance run R with agent A"; a worker takes
it, resumes the run from the store under the run's lease, and is done when the
run pauses, finishes or fails. So:

* a duplicate or late job loses the lease race, or finds the run already
  paused or finished, and does nothing;
* a job lost with a worker killed by ``kill -9`` is not retried by the queue:
  the :class:`~tether.dispatch.Sweeper` every worker runs finds the run
  ``running`` without a live lease and submits it again;
* a decision recorded anywhere wakes the run: the store notifies its change,
  the sweepers look at the run and submit it once its items are all decided;
* delayed work (``submit(..., delay=60)``, a run that failed on its provider
  and is tried again later) is a job scheduled in the database, not a sleeping
  task, so it survives the worker that asked for it;
* a worker shut down gracefully cancels its runs (each ends resumable) and
  submits them again before it exits.

>>> dispatcher = ProcrastinateDispatcher("postgresql://localhost/app", {"desk": agent})  # doctest: +SKIP
>>> await dispatcher.submit("r1", "desk")                                                 # doctest: +SKIP
>>> await dispatcher.work(concurrency=16)   # in each worker process                      # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Mapping
from typing import Any

from ..agent import Agent, RunResult
from ..exceptions import LeaseConflict, StateError, StoreError, UserError, import_extra
from ._deps import DepsFactory, deps_for, record_stuck, refuse_missing, transient
from ._sweeper import Sweeper, backoff, runnable

__all__ = ["ProcrastinateDispatcher"]

log = logging.getLogger("tether.dispatch")
TASK = "tether.advance"
WAITING = ("paused", "needs-decision")


def _procrastinate() -> Any:
    return import_extra("procrastinate", extra="workers", needs="ProcrastinateDispatcher needs procrastinate")


class ProcrastinateDispatcher:
    """A :class:`~tether.dispatch.Dispatcher` over Procrastinate (see the module docstring).

    ``agents`` are the agents this process can advance (a process that only
    submits, such as ``tether serve --workers 0``, may pass none). Runs that end
    ``failed`` on a provider error are tried again after ``retry_after``
    seconds, up to ``retries`` times. ``deps`` makes each run's dependencies
    (:mod:`tether.dispatch._deps`); an agent that needs them is refused without it.
    """

    def __init__(
        self,
        dsn: str,
        agents: Mapping[str, Agent] | None = None,
        *,
        schema: str = "tether_queue",
        queue: str = "tether",
        retry_after: float = 60.0,
        retries: int = 3,
        deps: DepsFactory | None = None,
    ) -> None:
        pc = _procrastinate()
        if not schema.replace("_", "").isalnum():
            raise UserError(f"the queue schema must be a plain name (letters, digits, _), got {schema!r}")
        self.dsn, self.schema, self.queue = dsn, schema, queue
        self.agents = dict(agents or {})
        for name, agent in self.agents.items():
            if agent.store is None:
                raise UserError(f"agent {name!r} has no store: a worker resumes runs from a store")
        self.retry_after, self.retries = retry_after, retries
        refuse_missing(self.agents, deps)  # at start, not run by run
        self.deps = deps
        connector = pc.PsycopgConnector(conninfo=dsn, kwargs={"options": f"-c search_path={schema}"}, max_size=8)
        self.app = pc.App(connector=connector)
        self._task = self.app.task(name=TASK, queue=queue)(self._advance)
        self._opened = False
        self.in_flight: set[str] = set()
        self._runs: set[asyncio.Task[None]] = set()

    @classmethod
    def for_store(
        cls,
        url: str,
        agents: Mapping[str, Agent] | None = None,
        *,
        schema: str = "tether_queue",
        deps: DepsFactory | None = None,
    ) -> ProcrastinateDispatcher:
        """The queue on the PostgreSQL of the store at ``url`` (``postgresql://...?schema=...``).

        >>> ProcrastinateDispatcher.for_store("postgresql://db/app?schema=desk").dsn
        'postgresql://db/app'
        """
        from ..stores import open_store

        if not url.startswith(("postgresql://", "postgres://")):
            raise UserError("workers share the store's PostgreSQL: give a postgresql://... store URL")
        return cls(open_store(url).dsn, agents, schema=schema, deps=deps)  # type: ignore[attr-defined]

    # -- lifecycle ---------------------------------------------------------------

    async def open(self) -> ProcrastinateDispatcher:
        """Connect, and create the queue's schema if it is not there yet (idempotent)."""
        if not self._opened:
            import psycopg

            try:
                await self._ensure_schema()
            except psycopg.OperationalError as exc:  # no server, no database, wrong password: one line
                raise StoreError(f"cannot connect to the queue's PostgreSQL: {str(exc).strip()}") from exc
            await self.app.open_async()
            self._opened = True
        return self

    async def aclose(self) -> None:
        if self._opened:
            self._opened = False
            await self.app.close_async()

    async def __aenter__(self) -> ProcrastinateDispatcher:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the Dispatcher protocol ------------------------------------------------------

    async def submit(self, run_id: str, agent: str, *, delay: float = 0.0) -> None:
        """Queue a job for ``run_id`` (after ``delay`` seconds); a run already queued now is not queued twice."""
        await self.open()
        pc = _procrastinate()
        if delay > 0:
            deferrer = self._task.configure(schedule_in={"seconds": delay})
        else:  # one waiting job per run is enough; a delayed one does not hold back an immediate one
            deferrer = self._task.configure(queueing_lock=run_id)
        with contextlib.suppress(pc.exceptions.AlreadyEnqueued):
            await deferrer.defer_async(run_id=run_id, agent=agent)

    # -- working ------------------------------------------------------------------

    async def work(
        self, *, concurrency: int = 8, sweep_every: float = 5.0, poll_every: float = 1.0, name: str | None = None
    ) -> None:
        """Advance queued runs, ``concurrency`` at a time, and sweep the store, until cancelled.

        New jobs arrive at once (``LISTEN``); the queue is also polled every
        ``poll_every`` seconds, which is when delayed jobs fall due. A database
        that drops the worker's connections (a restart, a failover, terminated
        backends) does not stop it: it takes jobs again after a backoff, and the
        runs it was advancing go on (their store reconnects). On cancellation
        the runs in flight end resumable and are submitted again.
        """
        if not self.agents:
            raise UserError("a worker needs agents: ProcrastinateDispatcher(dsn, {name: agent})")
        await self.open()
        stores = {id(a.store): a.store for a in self.agents.values()}
        sweepers = [Sweeper(s, self, every=sweep_every, agents=self.agents) for s in stores.values()]  # type: ignore[arg-type]
        options = dict(queues=[self.queue], concurrency=concurrency, name=name, install_signal_handlers=False,
                       delete_jobs="successful", shutdown_graceful_timeout=1.0, fetch_job_polling_interval=poll_every,
                       update_heartbeat_interval=max(1.0, sweep_every))  # fmt: skip
        try:
            async with asyncio.TaskGroup() as tasks:
                for sweeper in sweepers:
                    tasks.create_task(sweeper.run())
                tasks.create_task(self._take_jobs(options))
        finally:  # the runs belong to the worker, not to their jobs: stop them last, each resumable
            await self._stop_runs()

    async def _take_jobs(self, options: dict[str, Any]) -> None:
        """Procrastinate's worker, started again whenever it stops: it stops (or raises) when the
        database drops one of its connections, and a worker must outlive a database restart."""
        failures = 0
        while True:
            began = time.monotonic()
            try:
                await self.app.run_worker_async(**options)
                why = "it stopped (a connection of the queue failed)"
            except Exception as exc:  # ConnectorException and the like: the database went away
                why = f"{type(exc).__name__}: {exc}".strip()
            failures = 1 if time.monotonic() - began > 60 else failures + 1
            pause = backoff(failures)
            log.warning("the queue's worker stopped (%s); taking jobs again in %.1f s", why, pause)
            await asyncio.sleep(pause)

    async def _stop_runs(self) -> None:
        for task in list(self._runs):
            task.cancel()
        await asyncio.gather(*self._runs, return_exceptions=True)

    async def _advance(self, run_id: str, agent: str) -> None:
        """The job: advance the run as far as it goes now."""
        if agent not in self.agents:
            raise UserError(f"this worker has no agent named {agent!r} (it has {sorted(self.agents)})")
        store = self.agents[agent].store
        assert store is not None
        info = await store.get(run_id)
        if info is not None and info.status in WAITING and await runnable(store, run_id, info) is None:
            return  # still waiting for a person: a late or duplicate job leaves the run as it is
        run = asyncio.create_task(self._run(run_id, agent), name=f"tether-run-{run_id}")
        self._runs.add(run)
        run.add_done_callback(self._runs.discard)
        # A job the queue aborts (its worker restarting after a lost connection) leaves the run going.
        await asyncio.shield(run)

    async def _run(self, run_id: str, agent: str) -> None:
        store = self.agents[agent].store
        assert store is not None
        self.in_flight.add(run_id)
        try:
            deps = await deps_for(self.deps, store, run_id, agent)
            result = await self.agents[agent].run(run_id=run_id, deps=deps)
        except (LeaseConflict, StateError) as exc:  # a live worker has it, or there is nothing to do
            log.debug("run %r not advanced: %s", run_id, exc)
            return
        except Exception as exc:  # it cannot advance here: say so in the run, not only in this log
            if transient(exc):
                raise  # the store or the network: the job fails, the sweeper submits the run again
            log.error("run %r could not be advanced: %s: %s", run_id, type(exc).__name__, exc)
            await record_stuck(store, run_id, exc)
            return
        except asyncio.CancelledError:  # shutting down: the run ended resumable; hand it on
            await asyncio.shield(self._hand_on(run_id, agent))
            raise
        finally:
            self.in_flight.discard(run_id)
        await self._maybe_retry(result, agent)

    async def _hand_on(self, run_id: str, agent: str) -> None:
        try:
            await self.submit(run_id, agent)
        except Exception:  # the sweeper finds it anyway
            log.warning("could not hand run %r on at shutdown; a sweeper will find it", run_id)

    async def _maybe_retry(self, result: RunResult, agent: str) -> None:
        if result.status != "failed" or not _provider_failed(result):
            return
        store = self.agents[agent].store
        assert store is not None
        failures = sum(1 for ev in await store.load(result.run_id) if ev.kind == "failed")
        if failures <= self.retries:
            log.info("run %r failed on its provider; trying again in %.0f s", result.run_id, self.retry_after)
            await self.submit(result.run_id, agent, delay=self.retry_after)

    async def _ensure_schema(self) -> None:
        """Create the queue's tables once, even when several workers start together."""
        import psycopg

        pc = _procrastinate()
        lock = int.from_bytes(hashlib.sha256(self.schema.encode()).digest()[:7], "big")
        async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock,))
            await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            await conn.execute(f'SET LOCAL search_path TO "{self.schema}"')
            cur = await conn.execute("SELECT to_regclass('procrastinate_jobs')")
            row = await cur.fetchone()
            if row is None or row[0] is None:
                await conn.execute(pc.schema.SchemaManager.get_schema())


def _provider_failed(result: RunResult) -> bool:
    last = result.events[-1] if result.events else None
    return last is not None and last.kind == "failed" and getattr(last, "error_type", "") == "ProviderError"
