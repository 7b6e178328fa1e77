"""A decision waits for the worker that holds a run: it is refused while a live worker advances the run or
holds its lease, and recorded once that worker is gone (a lease is judged gone only on its own machine)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from support import refund
from tether import Action, Agent, LeaseConflict, StateError, record_decisions, tool
from tether.stores.memory import MemoryStore
from tether.testing import FunctionPolicy, ScriptedModel

ran: list[Any] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def test_a_decision_on_a_run_a_worker_is_advancing_is_refused_and_the_once_call_runs_once() -> None:
    gate = asyncio.Event()

    @tool(effect="once")
    async def charge(amount: int) -> str:
        """Charge the card."""
        ran.append(amount)
        await gate.wait()
        return f"charged ${amount}"

    def brain(ctx: Any, tools: Any) -> Any:
        return "done" if any(m.role == "tool" for m in ctx) else Action("charge", {"amount": 42})

    async def main() -> None:
        store = MemoryStore()
        worker = asyncio.create_task(Agent(FunctionPolicy(brain), [charge], store=store).run("go", run_id="r1"))
        while not ran:
            await asyncio.sleep(0.001)
        with pytest.raises(StateError, match="is 'running', not waiting for a decision"):
            await record_decisions(store, "r1", lambda s: s.retry(s.open_calls[0].call.id, by="inbox"))
        gate.set()
        assert (await worker).status == "finished"

    asyncio.run(main())
    assert ran == [42]


def test_a_decision_is_refused_while_a_live_worker_holds_the_lease_of_a_paused_run() -> None:
    async def main() -> None:
        store = MemoryStore()
        paused = await Agent(ScriptedModel([Action("refund", {"order": "A1"})]), [refund], store=store).run(
            "go", run_id="r1"
        )
        await store.acquire("r1", "someone-else", ttl=30)  # a worker is taking the run over right now
        with pytest.raises(LeaseConflict, match="being advanced by 'someone-else'"):
            await record_decisions(store, "r1", lambda s: s.approve(paused.items[0].id))

    asyncio.run(main())


def test_a_lease_of_another_machine_or_pid_namespace_is_never_judged_gone() -> None:
    from tether import leases

    me = leases.owner()
    host, machine, _, nonce = me.rsplit(":", 3)
    namespace, boot = machine.split("-")
    assert machine == leases._MACHINE
    other_namespace = f"{host}:{int(namespace) + 1}-{boot}:999999:{nonce}"  # same host name, another namespace
    other_boot = f"{host}:{namespace}-00000000:999999:{nonce}"  # same name and namespace, another machine
    assert leases.gone(other_namespace) is False
    assert leases.gone(other_boot) is False
    assert leases.gone(f"{host}:{machine}:999999:{nonce}") is True  # dead, and on this machine
    assert leases.gone(me) is True  # our own, and no run of ours holds it
    assert leases.gone(f"{host}:999999:{nonce}") is False  # the old three-part form: wait for expiry


def test_a_decision_is_recorded_on_a_paused_run_whose_worker_was_killed_holding_its_lease(tmp_path: Path) -> None:
    """A worker killed -9 right after it paused a run still holds a live lease; it advances nothing."""
    import subprocess
    import sys

    from tether import leases
    from tether.stores.sqlite import SQLiteStore

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host, machine, _, nonce = leases.owner().rsplit(":", 3)
    killed_worker = f"{host}:{machine}:{int(dead.stdout)}:{nonce}"

    async def main() -> str:
        store = SQLiteStore(str(tmp_path / "runs.db"))
        agent = Agent(ScriptedModel([Action("refund", {"order": "A1"}), "Done."]), [refund], store=store)
        paused = await agent.run("go", run_id="r1")
        await store.acquire("r1", killed_worker, ttl=300)  # it paused the run, then died before letting go
        await record_decisions(store, "r1", lambda s: s.approve(paused.items[0].id))
        return (await agent.run(run_id="r1")).output

    assert asyncio.run(main()) == "Done."
