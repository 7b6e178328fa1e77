"""The RunStore contract, held against memory, SQLite and PostgreSQL alike."""

from __future__ import annotations

import asyncio

import pytest

from tether import (
    ApprovalDecided,
    Cancelled,
    Decision,
    Failed,
    Finished,
    LeaseConflict,
    LimitReached,
    Message,
    ModelReplied,
    Paused,
    PendingCall,
    RunStarted,
    RunState,
    StoreError,
    Token,
    ToolCall,
    ToolFinished,
    state_of,
)
from tether.events import Event, to_dict
from tether.stores import RunStore

from ._events import every_kind, real_journal
from .conftest import Backend


def started(run_id: str) -> RunStarted:
    return RunStarted(run_id, (Message.user(f"task for {run_id}"),))


def marker(n: int) -> ApprovalDecided:
    """A small event that says who wrote it."""
    return ApprovalDecided(Decision("shared", "c1", "approve", "0" * 32, 0, by=f"writer {n}"))


async def test_every_event_kind_round_trips(store: RunStore) -> None:
    events = every_kind()
    assert await store.append("run-1", events, expected_seq=0) == len(events)
    loaded = await store.load("run-1")
    assert loaded == events
    assert [to_dict(e) for e in loaded] == [to_dict(e) for e in events]  # usage too


async def test_a_real_runs_journal_round_trips_one_commit_at_a_time(store: RunStore) -> None:
    events = await real_journal()
    run_id = events[0].run_id  # type: ignore[union-attr]
    kinds = {e.kind for e in events}
    assert {"paused", "approval-decided", "approval-requested", "finished"} <= kinds
    for seq, ev in enumerate(events):
        assert await store.append(run_id, [ev], expected_seq=seq) == seq + 1
    loaded = await store.load(run_id)
    assert [to_dict(e) for e in loaded] == [to_dict(e) for e in events]
    assert state_of(loaded) == state_of(events)
    info = await store.get(run_id)
    assert info is not None and (info.status, info.seq) == ("finished", len(events))


async def test_unknown_runs_are_empty(store: RunStore) -> None:
    assert await store.load("nope") == []
    assert await store.get("nope") is None
    assert await store.list_runs() == []


async def test_a_second_store_object_reads_what_the_first_committed(backend: Backend) -> None:
    first, second = await backend.open(), await backend.open()
    await first.append("r", [started("r")], expected_seq=0)
    assert await second.load("r") == [started("r")]
    await second.append("r", [marker(2)], expected_seq=1)
    assert await first.load("r") == [started("r"), marker(2)]


async def test_events_load_in_order_across_batches(store: RunStore) -> None:
    seq = 0
    for size in (1, 3, 1, 5, 2):
        batch = [marker(seq + i) for i in range(size)]
        seq = await store.append("r", batch, expected_seq=seq)
    assert seq == 12
    assert await store.load("r") == [marker(i) for i in range(12)]


# -- fencing -----------------------------------------------------------------


async def test_a_stale_writer_gets_lease_conflict_and_writes_nothing(store: RunStore) -> None:
    await store.append("r", [started("r"), marker(1)], expected_seq=0)
    before = await store.get("r")
    for stale in (0, 1, 3):
        with pytest.raises(LeaseConflict, match=r"run 'r' has 2 events, the writer expected"):
            await store.append("r", [marker(99), Finished("stolen")], expected_seq=stale)
    assert await store.load("r") == [started("r"), marker(1)]
    assert await store.get("r") == before


async def test_a_run_that_does_not_exist_cannot_be_continued(store: RunStore) -> None:
    with pytest.raises(LeaseConflict):
        await store.append("ghost", [marker(1)], expected_seq=4)
    assert await store.get("ghost") is None
    assert await store.load("ghost") == []


async def test_an_empty_append_checks_the_fence_and_changes_nothing(store: RunStore) -> None:
    await store.append("r", [started("r")], expected_seq=0)
    assert await store.append("r", [], expected_seq=1) == 1
    with pytest.raises(LeaseConflict):
        await store.append("r", [], expected_seq=0)
    assert await store.load("r") == [started("r")]


async def test_twenty_concurrent_appenders_one_wins_each_seq(backend: Backend) -> None:
    writers = [await backend.open() for _ in range(20)]
    winners = []
    for seq in range(5):

        async def write(n: int, s: RunStore, seq: int = seq) -> int | None:
            try:
                await s.append("race", [marker(n)], expected_seq=seq)
            except LeaseConflict:
                return None
            return n

        outcome = await asyncio.gather(*(write(n, s) for n, s in enumerate(writers)))
        won = [n for n in outcome if n is not None]
        assert len(won) == 1, f"round {seq}: winners {won}"
        winners.append(won[0])
    assert await writers[0].load("race") == [marker(n) for n in winners]
    info = await writers[-1].get("race")
    assert info is not None and info.seq == 5


# -- refusals ----------------------------------------------------------------


async def test_token_events_are_refused_and_the_batch_is_not_written(store: RunStore) -> None:
    with pytest.raises(StoreError, match="'token' events are not persisted"):
        await store.append("r", [started("r"), Token("hel")], expected_seq=0)
    assert await store.load("r") == []
    assert await store.get("r") is None


# -- status and listing ------------------------------------------------------


def paused(reason: str) -> Paused:
    return Paused(reason, ("c1",), RunState("r", (Message.user("task"),), (PendingCall(ToolCall("c1", "x")),)))


@pytest.mark.parametrize(
    ("events", "statuses"),
    [
        (
            [started("r"), paused("approval"), marker(1), RunStarted("r", resumed=True), Finished("ok")],
            ["running", "paused", "paused", "running", "finished"],
        ),
        ([started("r"), paused("outcome-unknown")], ["running", "needs-decision"]),
        ([started("r"), Failed("boom", "RuntimeError")], ["running", "failed"]),
        ([started("r"), Cancelled("stop")], ["running", "cancelled"]),
        ([started("r"), LimitReached("steps", 20)], ["running", "limit-reached"]),
    ],
)
async def test_status_follows_the_events(store: RunStore, events: list[Event], statuses: list[str]) -> None:
    seen = []
    for seq, ev in enumerate(events):
        await store.append("r", [ev], expected_seq=seq)
        info = await store.get("r")
        assert info is not None
        seen.append(info.status)
    assert seen == statuses


async def test_a_batch_sets_the_status_of_its_last_status_event(store: RunStore) -> None:
    await store.append(
        "r", [started("r"), paused("approval"), RunStarted("r", resumed=True), marker(1)], expected_seq=0
    )
    info = await store.get("r")
    assert info is not None and (info.status, info.seq) == ("running", 4)


async def make_runs(store: RunStore, statuses: dict[str, str]) -> None:
    ends = {"paused": paused("approval"), "needs-decision": paused("outcome-unknown"),
            "finished": Finished("ok"), "failed": Failed("x"), "cancelled": Cancelled(),
            "limit-reached": LimitReached("steps", 1), "running": marker(0)}  # fmt: skip
    for run_id, status in statuses.items():
        await store.append(run_id, [started(run_id), ends[status]], expected_seq=0)
        await asyncio.sleep(0.002)  # distinct update times, so "newest first" is well defined


async def test_list_runs_by_status_newest_first(store: RunStore) -> None:
    statuses = {"a": "paused", "b": "finished", "c": "paused", "d": "needs-decision", "e": "running",
                "f": "failed", "g": "cancelled", "h": "limit-reached", "i": "paused"}  # fmt: skip
    await make_runs(store, statuses)
    assert [i.run_id for i in await store.list_runs()] == list("ihgfedcba")
    assert [i.run_id for i in await store.list_runs("paused")] == ["i", "c", "a"]
    for status in set(statuses.values()):
        listed = await store.list_runs(status)
        assert {i.run_id for i in listed} == {r for r, s in statuses.items() if s == status}
        assert all(i.status == status and i.seq == 2 for i in listed)
    assert [i.run_id for i in await store.list_runs(limit=2)] == ["i", "h"]
    assert await store.list_runs("no-such-status") == []


async def test_an_update_moves_a_run_to_the_front(store: RunStore) -> None:
    await make_runs(store, {"old": "paused", "new": "paused"})
    await store.append("old", [RunStarted("old", resumed=True)], expected_seq=2)
    assert [i.run_id for i in await store.list_runs()] == ["old", "new"]
    assert [i.run_id for i in await store.list_runs("paused")] == ["new"]
    old = await store.get("old")
    assert old is not None and old.created_at < old.updated_at


async def test_many_runs(store: RunStore) -> None:
    n = 300
    for i in range(n):
        events = [started(f"r{i:03}"), Finished(f"answer {i}") if i % 3 else paused("approval")]
        await store.append(f"r{i:03}", events, expected_seq=0)
    everything = await store.list_runs(limit=10_000)
    assert len(everything) == n
    assert len(await store.list_runs("paused", limit=10_000)) == 100
    assert await store.load("r123") == [started("r123"), paused("approval")]
    assert (await store.load("r250"))[-1] == Finished("answer 250")


# -- delete --------------------------------------------------------------------


async def test_delete_forgets_a_run_and_a_stale_writer_cannot_revive_it(store: RunStore) -> None:
    await make_runs(store, {"keep": "paused", "drop": "paused"})
    await store.delete("drop")
    assert await store.get("drop") is None
    assert await store.load("drop") == []
    assert [i.run_id for i in await store.list_runs()] == ["keep"]
    with pytest.raises(LeaseConflict):
        await store.append("drop", [marker(1)], expected_seq=2)
    assert await store.get("drop") is None
    await store.delete("never-existed")
    assert len(await store.load("keep")) == 2


# -- bodies ------------------------------------------------------------------


ODD_TEXT = 'naïve café — 東京 — שלום — 🦀🙂 — \x00 NUL — \x1b[31mansi\x1b[0m — \\u0000 — \ud800 lone — "q" \n\t'


async def test_unicode_and_awkward_characters_round_trip(store: RunStore) -> None:
    call = ToolCall.of("echo", {"text": ODD_TEXT}, id="c1")
    events = [
        RunStarted("r", (Message.user(ODD_TEXT),)),
        ModelReplied(Message.assistant(ODD_TEXT, [call])),
        ToolFinished(Message.tool_result("c1", ODD_TEXT, name="echo")),
        Paused("approval", ("c1",), RunState(ODD_TEXT, (Message.user(ODD_TEXT),), (PendingCall(call),))),
    ]
    await store.append("r", events, expected_seq=0)
    loaded = await store.load("r")
    assert loaded == events
    # A note's text is made safe where it enters (a lone surrogate becomes U+FFFD); the state's id keeps it raw.
    assert loaded[2].result.content == ODD_TEXT.replace("\ud800", "\ufffd")  # type: ignore[union-attr]
    assert loaded[3].state.run_id == ODD_TEXT  # type: ignore[union-attr]


async def test_a_one_megabyte_result_round_trips(store: RunStore) -> None:
    big = ("0123456789abcdéf🙂" * 70_000)[:1_048_576]
    ev = ToolFinished(Message.tool_result("c1", big, name="read_file"))
    await store.append("r", [started("r")], expected_seq=0)
    await store.append("r", [ev], expected_seq=1)
    loaded = await store.load("r")
    assert loaded[1] == ev and len(loaded[1].result.content) == 1_048_576  # type: ignore[union-attr]


# -- leases ------------------------------------------------------------------


async def test_a_live_lease_is_refused_to_another_owner_and_renewed_by_its_own(store: RunStore) -> None:
    first = await store.acquire("r", "worker-a", ttl=30)
    assert (first.owner, first.token) == ("worker-a", 1)
    with pytest.raises(LeaseConflict, match="is being advanced by 'worker-a'") as refused:
        await store.acquire("r", "worker-b", ttl=30)
    assert refused.value.holder == "worker-a"
    renewed = await store.acquire("r", "worker-a", ttl=60)
    assert renewed.token == 1 and renewed.expires_at > first.expires_at


async def test_an_expired_or_released_lease_is_taken_over_with_a_higher_token(store: RunStore) -> None:
    old = await store.acquire("r", "worker-a", ttl=0.05)
    await asyncio.sleep(0.1)
    new = await store.acquire("r", "worker-b", ttl=30)
    assert new.token == old.token + 1
    await store.release(old)  # not ours any more: a no-op
    with pytest.raises(LeaseConflict):
        await store.acquire("r", "worker-c", ttl=30)
    await store.release(new)
    assert (await store.acquire("r", "worker-c", ttl=30)).token == new.token + 1


async def test_a_live_lease_is_taken_over_from_an_owner_known_to_be_gone(store: RunStore) -> None:
    await store.acquire("r", "worker-a", ttl=30)
    with pytest.raises(LeaseConflict):
        await store.acquire("r", "worker-b", ttl=30, take_over="worker-x")
    taken = await store.acquire("r", "worker-b", ttl=30, take_over="worker-a")
    assert (taken.owner, taken.token) == ("worker-b", 2)


async def test_an_append_under_a_lease_that_changed_hands_is_refused(store: RunStore) -> None:
    zombie = await store.acquire("r", "worker-a", ttl=0.05)
    await store.append("r", [started("r")], expected_seq=0, lease=zombie)
    await asyncio.sleep(0.1)
    fresh = await store.acquire("r", "worker-b", ttl=30)
    with pytest.raises(LeaseConflict):
        await store.append("r", [marker(1)], expected_seq=1, lease=zombie)
    assert await store.append("r", [marker(2)], expected_seq=1, lease=fresh) == 2
    assert await store.append("r", [marker(3)], expected_seq=2) == 3  # an inbox's decision needs no lease


async def test_the_run_info_shows_who_holds_the_lease(store: RunStore) -> None:
    await store.append("r", [started("r")], expected_seq=0)
    info = await store.get("r")
    assert info is not None and info.lease_owner is None
    lease = await store.acquire("r", "worker-a", ttl=30)
    info = await store.get("r")
    assert (
        info is not None
        and info.lease_owner == "worker-a"
        and info.lease_expires_at == pytest.approx(lease.expires_at, abs=1)
    )
    listed = await store.list_runs()
    assert [(i.run_id, i.lease_owner) for i in listed] == [("r", "worker-a")]
