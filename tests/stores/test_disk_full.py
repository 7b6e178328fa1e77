"""The store's disk fills up at every transition of a run.

The SQLite file lives on a small tmpfs (we are root in CI). Right before the
k-th commit of a run the test fills that filesystem, so the commit fails in
SQLite itself. For every k: the error reaches the caller as StoreError, nothing
half-written is left, a tool whose ``tool-started`` commit failed never ran;
after space is freed, a resume by run_id from a fresh store object completes
with no ``once`` effect repeated. Only when mounting is impossible (not root)
does the test fall back to a connection that fails its writes on demand.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tether import Action, Agent, Context, Failed, FunctionPolicy, Invocation, RunStarted, StoreError, Tool, tool
from tether.events import Event
from tether.store import Lease, StoreWrapper
from tether.stores.sqlite import SQLiteStore

# The committed events of the run below when nothing fails.
TRANSITIONS = [
    "run-started", "model-replied", "tool-started", "tool-finished",  # charge (once)
    "model-replied", "tool-started", "tool-finished",  # ship (idempotent)
    "model-replied", "finished",
]  # fmt: skip


class TmpfsDisk:
    """A real, tiny filesystem that can be filled to the last byte."""

    kind = "tmpfs"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.filler = root / "filler"

    def fill(self) -> None:
        with open(self.filler, "ab", buffering=0) as f, contextlib.suppress(OSError):
            while True:
                f.write(b"\xff" * 4096)
        with open(self.filler, "ab", buffering=0) as f, contextlib.suppress(OSError):
            while True:  # the last partial block
                f.write(b"\xff")

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def attach(self, store: SQLiteStore) -> None:
        pass


class InjectedDisk(TmpfsDisk):
    """Fallback without mount rights: the store's connection fails writes while 'full'."""

    kind = "injected"
    full = False

    def fill(self) -> None:
        self.full = True

    def free(self) -> None:
        self.full = False

    def attach(self, store: SQLiteStore) -> None:
        store._conn = _FailingConnection(store._conn, self)  # type: ignore[assignment]


@dataclass
class _FailingConnection:
    conn: sqlite3.Connection
    disk: InjectedDisk

    def execute(self, sql: str, *args: Any) -> Any:
        self._check(sql)
        return self.conn.execute(sql, *args)

    def executemany(self, sql: str, *args: Any) -> Any:
        self._check(sql)
        return self.conn.executemany(sql, *args)

    def _check(self, sql: str) -> None:
        if self.disk.full and sql.split()[0] in ("INSERT", "UPDATE", "DELETE"):
            raise sqlite3.OperationalError("database or disk is full")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


def mount_tmpfs(root: Path, size: str) -> bool:
    try:
        cmd = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(root)]
        return subprocess.run(cmd, capture_output=True, check=False).returncode == 0
    except OSError:  # no mount(8)
        return False


@pytest.fixture(scope="module")
def disk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TmpfsDisk]:
    root = tmp_path_factory.mktemp("small-fs")
    mounted = mount_tmpfs(root, "384k")
    try:
        yield TmpfsDisk(root) if mounted else InjectedDisk(root)
    finally:
        if mounted:
            subprocess.run(["umount", str(root)], check=True)


class FillBefore(StoreWrapper):
    """A store that fills the disk right before its nth append, then writes as usual."""

    def __init__(self, inner: SQLiteStore, n: int, disk: TmpfsDisk) -> None:
        super().__init__(inner)
        self.n, self.disk, self.calls = n, disk, 0

    async def append(
        self, run_id: str, events: Sequence[Event], *, expected_seq: int, lease: Lease | None = None
    ) -> int:
        self.calls += 1
        if self.calls == self.n:
            self.disk.fill()
        return await self.inner.append(run_id, events, expected_seq=expected_seq, lease=lease)


@dataclass
class Effects:
    """The side-effect oracle: every execution, outside the store under test."""

    charges: list[str] = field(default_factory=list)
    shipments: list[str] = field(default_factory=list)

    def tools(self) -> list[Tool]:
        @tool
        def charge(amount: int, call: Invocation) -> str:
            """Charge the customer (must not happen twice)."""
            self.charges.append(call.idempotency_key)
            return f"charged {amount}"

        @tool(effect="idempotent")
        def ship(order: str, call: Invocation) -> str:
            """Ship an order (safe to repeat with the same key)."""
            self.shipments.append(call.idempotency_key)
            return f"shipped {order}"

        return [charge, ship]


def brain(context: Context, tools: object) -> Any:
    """Decides from the notebook alone, so a resumed run asks the same questions."""
    results = sum(m.role == "tool" for m in context)
    if results == 0:
        return Action("charge", {"amount": 5})
    if results == 1:
        return Action("ship", {"order": "A1"})
    return "all done"


def agent(store: Any, effects: Effects) -> Agent:
    return Agent(FunctionPolicy(brain), effects.tools(), store=store)


async def test_the_run_commits_the_transitions_the_test_fails(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    result = await agent(store, Effects()).run("go")
    assert [e.kind for e in await store.load(result.run_id)] == TRANSITIONS
    store.close()


@pytest.mark.parametrize(
    "k", range(1, len(TRANSITIONS) + 1), ids=[f"{i}-{kind}" for i, kind in enumerate(TRANSITIONS, 1)]
)
async def test_a_full_disk_at_any_commit_stops_the_run_and_a_resume_completes(disk: TmpfsDisk, k: int) -> None:
    if os.environ.get("CI"):
        assert disk.kind == "tmpfs", "CI runs as root: the disk must really fill"
    db, run_id, effects = disk.root / f"runs-{k}.db", f"run-{k}", Effects()
    inner = SQLiteStore(db)
    disk.attach(inner)
    try:
        if k == 1:  # nothing was written: there is no run to resume, the error is raised
            with pytest.raises(StoreError, match="full") as failure:
                await agent(FillBefore(inner, k, disk), effects).run("go", run_id=run_id)
            assert "LeaseConflict" not in type(failure.value).__name__
        else:  # the run ends as failed, with a clear message and a resumable state
            stopped = await agent(FillBefore(inner, k, disk), effects).run("go", run_id=run_id)
            assert stopped.status == "failed" and stopped.state.status == "failed"
            assert stopped.error is not None and "run store failed" in stopped.error and "full" in stopped.error
            assert isinstance(stopped.events[-1], Failed)
        committed = [e.kind for e in await inner.load(run_id)]
        assert committed == TRANSITIONS[: k - 1]  # nothing half-written
        # A tool ran only if its tool-started commit succeeded.
        assert len(effects.charges) == (k > 3)
        assert len(effects.shipments) == (k > 6)
    finally:
        disk.free()
    inner.close()

    fresh = SQLiteStore(db)
    resumed = agent(fresh, effects)
    result = await (resumed.run(run_id=run_id) if committed else resumed.run("go", run_id=run_id))
    if result.status == "needs-decision":  # the charge's outcome was lost with its commit
        assert k == 4 and [p.call.name for p in result.items] == ["charge"]
        call_id = result.items[0].call.id
        result = await resumed.run(result.state.skip(call_id, "the ledger shows the charge"))
    assert (result.status, result.output) == ("finished", "all done")
    assert len(effects.charges) == 1  # never twice
    assert len(effects.shipments) == (2 if k == 7 else 1)  # re-run only when its result was lost
    assert len(set(effects.shipments)) == 1  # ... and then with the same idempotency key
    events = await fresh.load(run_id)
    assert isinstance(events[0], RunStarted) and events[-1].kind == "finished"
    assert fresh.integrity_check() == "ok"
    fresh.close()
    db.unlink()


@pytest.fixture
def read_only_fs(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "ro"
    root.mkdir()
    if not mount_tmpfs(root, "1m"):
        pytest.skip("mounting a tmpfs needs root")  # CI runs as root
    try:
        yield root
    finally:
        subprocess.run(["umount", str(root)], check=True)


async def test_a_database_on_a_read_only_filesystem_is_a_store_error(read_only_fs: Path) -> None:
    store = SQLiteStore(read_only_fs / "runs.db")
    await store.append("r", [RunStarted("r")], expected_seq=0)
    store.close()
    subprocess.run(["mount", "-o", "remount,ro", str(read_only_fs)], check=True)
    try:
        with pytest.raises(StoreError, match="could not open") as info:
            SQLiteStore(read_only_fs / "runs.db")
        assert isinstance(info.value.__cause__, sqlite3.Error)
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(read_only_fs)], check=True)
    store = SQLiteStore(read_only_fs / "runs.db")
    assert await store.load("r") == [RunStarted("r")]
    assert store.integrity_check() == "ok"
    store.close()
