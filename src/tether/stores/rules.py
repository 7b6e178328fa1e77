"""The rules every run store keeps, written once: each backend reads, these decide.

A backend (memory, SQLite, PostgreSQL, yours) fetches what a rule needs inside
the transaction of its write, and calls the rule; the rule raises the refusal
the contract (:mod:`tether.store`) names, in the same words whatever the backend:

* **position** (fencing): an append lands only at the run's current length
  (:func:`check_position`); only :data:`~tether.events.PERSISTED` kinds are
  stored (:func:`check_persisted`);
* **leases**: an append that names a lease needs it to be the run's current one
  (:func:`holds`, else :func:`held_by`); ``acquire`` renews its owner's lease,
  takes over an expired one (or the lease of a worker known to be gone) with a
  higher token, and refuses a live one (:func:`granted`);
* **sessions**: a run that starts a session's next run must continue the
  session's last run, and not while a worker holds that run
  (:func:`session_of`, :func:`check_continues`, :func:`check_free`); an older
  run of a session cannot advance past a newer one (:func:`check_latest`);
* **status**: a run's status after an append (:func:`status_after`, the
  journal's own rule).

>>> from tether.leases import Lease
>>> lease = granted("r1", None, "worker-a", ttl=30, now=1_000.0)
>>> lease.token, holds(lease, lease)
(1, True)
>>> granted("r1", lease, "worker-b", ttl=30, now=1_010.0)
Traceback (most recent call last):
...
tether.exceptions.LeaseConflict: run 'r1' is being advanced by 'worker-a' (lease token 1, 20 s left); ...
>>> granted("r1", lease, "worker-b", ttl=30, now=1_031.0).token  # expired: taken over, a higher token
2
"""

from __future__ import annotations

from collections.abc import Sequence

from ..events import PERSISTED, Event, RunStarted
from ..exceptions import LeaseConflict, StoreError
from ..journal import status_of as status_after
from ..leases import Lease

__all__ = [
    "check_continues",
    "check_free",
    "check_latest",
    "check_persisted",
    "check_position",
    "conflict",
    "granted",
    "held_by",
    "holds",
    "live",
    "session_of",
    "status_after",
]

# -- position ----------------------------------------------------------------


def check_persisted(events: Sequence[Event]) -> None:
    """Refuse events that are never stored (streamed ``token`` events)."""
    for ev in events:
        if ev.kind not in PERSISTED:
            raise StoreError(f"{ev.kind!r} events are not persisted")


def check_position(run_id: str, found: int, expected: int) -> None:
    """Refuse a writer whose ``expected_seq`` is not the run's length: another worker advanced it."""
    if found != expected:
        raise conflict(run_id, found, expected)


def conflict(run_id: str, found: int, expected: int) -> LeaseConflict:
    """The refusal a stale writer gets."""
    return LeaseConflict(
        f"run {run_id!r} has {found} events, the writer expected {expected}: "
        "another worker advanced it (this writer must stop and reload)"
    )


# -- leases ------------------------------------------------------------------


def live(lease: Lease | None, now: float) -> bool:
    """Whether ``lease`` still holds its run at ``now`` (the store's clock)."""
    return lease is not None and lease.expires_at > now


def holds(current: Lease | None, lease: Lease) -> bool:
    """Whether ``lease`` is the run's current lease (same owner, same token), live or not."""
    return current is not None and (current.owner, current.token) == (lease.owner, lease.token)


def granted(
    run_id: str, current: Lease | None, owner: str, ttl: float, now: float, *, take_over: str | None = None
) -> Lease:
    """The lease ``acquire`` hands ``owner`` when the run's lease is ``current``, or the refusal.

    Its own lease is renewed (same token); an expired one, or a live one whose
    owner is ``take_over``, changes hands with the next token.
    """
    if current is not None and current.owner not in (owner, take_over) and live(current, now):
        raise held_by(run_id, current, now)
    token = current.token + (current.owner != owner) if current else 1
    return Lease(run_id, owner, token, now + ttl)


def held_by(run_id: str, lease: Lease | None, now: float) -> LeaseConflict:
    """The refusal a worker gets for a run whose lease it does not hold."""
    if lease is None or not live(lease, now):
        return LeaseConflict(f"run {run_id!r}: this worker's lease was released or taken over; it must stop")
    return LeaseConflict(
        f"run {run_id!r} is being advanced by {lease.owner!r} "
        f"(lease token {lease.token}, {lease.expires_at - now:.0f} s left); try again after it ends or expires",
        holder=lease.owner,
    )


# -- sessions ----------------------------------------------------------------


def session_of(events: Sequence[Event]) -> tuple[str, str] | None:
    """``(session, the run it continues)`` when ``events`` start a run of a session.

    >>> session_of([RunStarted("r2", meta={"session": "s", "continues": "r1"})])
    ('s', 'r1')
    """
    first = events[0] if events else None
    if not isinstance(first, RunStarted) or first.resumed or "session" not in first.meta:
        return None
    return first.meta["session"], first.meta.get("continues", "")


def check_continues(session: str, continues: str, last: str | None) -> None:
    """Refuse a new run of ``session`` that does not continue its ``last`` run ("" continues none)."""
    if (last or "") != continues:
        now = f"its last run is {last!r}" if last else "it has no run"
        raise LeaseConflict(
            f"session {session!r} moved on: this run continues {continues or 'nothing'!r} but {now} "
            "(another process started a run of it meanwhile); start again from the session's last run"
        )


def check_free(session: str, lease: Lease | None, now: float) -> None:
    """Refuse a new run of ``session`` while a worker holds ``lease``, the lease of its last run."""
    if lease is not None and live(lease, now):
        raise LeaseConflict(
            f"session {session!r} cannot start a new run: its last run {lease.run_id!r} is being advanced "
            f"by {lease.owner!r}; try again after it ends",
            holder=lease.owner,
        )


def check_latest(run_id: str, session: str, newer: str | None) -> None:
    """Refuse to advance ``run_id`` once ``newer``, a later run of its session, continued the session."""
    if newer is not None:
        raise LeaseConflict(
            f"run {run_id!r} cannot go on: session {session!r} moved on to run {newer!r}, which continues it "
            "(resuming the older run would repeat what the newer one may have done); continue the session instead"
        )
