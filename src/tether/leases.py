"""Who advances a run: lease owners, and knowing when an owner is gone.

A worker holds a run's lease (:class:`~tether.store.Lease`) while it streams the
run and renews it in the background. An owner is named
``host:machine:pid:nonce``: ``machine`` is this boot of this machine and pid
namespace, so two containers or two hosts that share a hostname never mistake
each other's processes. A lease whose owner is known to be gone (a run of this
process that ended, or a process of this machine that no longer exists) may be
taken over, or decided on, before it expires; anything else may be alive and is
waited for.

>>> gone(owner())  # a name no run of this process holds
True
>>> gone("elsewhere:0-deadbeef:1:ab12cd34")
False
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from .exceptions import LeaseConflict, StoreError

__all__ = ["Holder", "Lease", "gone", "late", "owner"]

log = logging.getLogger("tether.leases")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Lease:
    """A worker's claim on a run: who holds it, its fencing token, until when.

    >>> Lease("r1", "host:123:ab12", 3, 1_700_000_030.0).token
    3
    """

    run_id: str
    owner: str
    token: int
    expires_at: float


class Leasing(Protocol):
    """The part of a :class:`~tether.store.RunStore` that hands out leases."""

    async def acquire(self, run_id: str, owner: str, ttl: float, *, take_over: str | None = None) -> Lease: ...

    async def release(self, lease: Lease) -> None: ...


_LIVE: set[str] = set()  # the owners of the runs this process is advancing now


def owner() -> str:
    """A lease owner name unique to one run in this process: host, machine, pid and a nonce."""
    return f"{socket.gethostname()}:{_MACHINE}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _machine() -> str:
    """This pid namespace on this boot of this machine ("?" when unknown: never judged gone)."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip().replace("-", "")[:8]
    except OSError:
        return "?"
    return f"{namespace}-{boot}"


_MACHINE = _machine()


def gone(name: str) -> bool:
    """Whether the owner ``name`` is known to be gone (then its lease need not be waited out)."""
    parts = name.rsplit(":", 3)
    if len(parts) != 4 or _MACHINE == "?" or not parts[2].isdigit():
        return False
    host, machine, pid = parts[0], parts[1], int(parts[2])
    if host != socket.gethostname() or machine != _MACHINE:
        return False
    if pid == os.getpid():
        return name not in _LIVE
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # it exists (another user's process): not ours to judge
    return False


class Holder:
    """Holds one run's lease while the run streams: takes it, renews it, lets it go.

    A worker has *lost* the run when the store refuses a renewal (another worker
    took the run over), or when it wakes from a freeze (SIGSTOP, a paused VM) that
    outlasted its lease: another worker may have the run by then. Then the tool
    calls in flight under :meth:`guard` are cancelled at once (on waking, before any
    round trip to the store), and nothing more is committed. A store that is only
    slow or down for a while is not a loss: renewals go on, and the store's fencing
    refuses this worker's commits if another worker took the run meanwhile.
    """

    def __init__(self, store: Leasing, ttl: float) -> None:
        self.store, self.ttl = store, ttl
        self.lease: Lease | None = None
        self.lost = ""  # why the run is no longer this worker's ("" while it is)
        # When the last renewal that succeeded returned (monotonic): the store's expiry is at most a ttl
        # later, so once a ttl has passed since, the lease has expired on the store's clock too.
        self._renewed_at = 0.0
        self._guarded: set[asyncio.Future[Any]] = set()
        self._renewal: asyncio.Task[None] | None = None

    async def take(self, run_id: str) -> None:
        """Take the lease (from an owner known to be gone, if need be), then keep renewing it."""
        me = owner()
        _LIVE.add(me)  # before the store has it: no thread here ever sees its lease live and its owner gone
        try:
            try:
                self.lease = await self.store.acquire(run_id, me, self.ttl)
            except LeaseConflict as exc:
                if exc.holder is None or not gone(exc.holder):
                    raise
                self.lease = await self.store.acquire(run_id, me, self.ttl, take_over=exc.holder)
        except BaseException:
            _LIVE.discard(me)
            raise
        self._renewed_at = time.monotonic()
        self._renewal = asyncio.create_task(self._renew())

    @property
    def owner(self) -> str:
        """The owner name of the lease held (empty before it is taken)."""
        return self.lease.owner if self.lease is not None else ""

    def expired(self) -> bool:
        """Whether the run is lost (see the class docstring)."""
        return bool(self.lost)

    def conflict(self) -> LeaseConflict:
        run_id = self.lease.run_id if self.lease is not None else "?"
        return LeaseConflict(f"run {run_id!r} is no longer this worker's: {self.lost}; its tool calls in "
                             "flight were cancelled and nothing more is committed")  # fmt: skip

    def _lose(self, why: str) -> None:
        self.lost = why
        log.warning("%s: %s", self.lease.run_id if self.lease else "?", why)
        for work in self._guarded:
            work.cancel()

    async def guard(self, work: Awaitable[T]) -> T:
        """``work`` (a tool call), cancelled if the run is lost meanwhile; then :class:`LeaseConflict`."""
        task = asyncio.ensure_future(work)
        self._guarded.add(task)
        try:
            if self.expired():
                task.cancel()
            return await task
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if self.lost and me is not None and not me.cancelling():  # we cancelled it, not our caller
                raise self.conflict() from None
            raise
        finally:
            self._guarded.discard(task)

    async def _renew(self) -> None:
        assert self.lease is not None
        while True:
            planned = time.monotonic() + self.ttl / 3
            await asyncio.sleep(self.ttl / 3)
            now = time.monotonic()
            # The process did not run for a while (the sleep overshot) and the lease has expired meanwhile:
            # it was frozen past its lease. Stop what is in flight first, before any round trip; renew nothing.
            if now - planned > self.ttl / 2 and now - self._renewed_at > self.ttl:
                self._lose(f"this worker was stopped for {now - planned:.1f} s, past its lease ({self.ttl:g} s)")
                return
            try:
                renewed = await self.store.acquire(self.lease.run_id, self.lease.owner, self.ttl)
            except LeaseConflict as exc:
                self._lose(f"another worker took the run over ({exc.holder})")
                return
            except StoreError:  # the store is down: try again; past the ttl the run counts as lost
                continue
            if renewed.token != self.lease.token:  # lost to another worker, then taken back: stay refused
                with contextlib.suppress(StoreError):
                    await self.store.release(renewed)
                self._lose("another worker took the run over meanwhile")
                return
            self.lease, self._renewed_at = renewed, time.monotonic()

    async def let_go(self) -> None:
        """Stop renewing and release the lease; its owner counts as gone only once it is released."""
        try:
            if self._renewal is not None:
                self._renewal.cancel()
                # wait() does not raise the renewal's CancelledError, so a cancellation of this task
                # arriving meanwhile still propagates (suppressing it here lost it: LocalPool.aclose hung).
                await asyncio.wait([self._renewal])
        finally:  # even then, let go now: a run left leased for its TTL refuses decisions and takeovers
            if self.lease is not None:
                try:
                    await asyncio.shield(self._release(self.lease))
                finally:
                    _LIVE.discard(self.lease.owner)

    async def _release(self, lease: Lease) -> None:
        with contextlib.suppress(StoreError, OSError):  # it expires by itself anyway
            await self.store.release(lease)


def late(run_id: str, ev: object, exc: BaseException) -> None:
    """Say so when a tool's result comes after its worker lost the run: it is held here, in the log,
    and never reported into a run another worker now owns (its effect may have happened)."""
    if isinstance(exc, LeaseConflict) and getattr(ev, "kind", "") == "tool-finished":
        result = getattr(ev, "result", None)
        log.warning("late result of call %r in run %r, not reported (%s): %.300s",
                    getattr(result, "tool_call_id", "?"), run_id, exc, getattr(result, "text", ""))  # fmt: skip
