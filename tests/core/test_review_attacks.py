"""Attacks from an adversarial review of the approval gate, states, trees and leases; each must fail."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tether import (
    Action,
    Agent,
    Cancelled,
    LeaseConflict,
    RunState,
    StateError,
    ToolCall,
    ask_human,
    record_decisions,
    state_of,
    tool,
)
from tether.messages import Message, Usage
from tether.stores.memory import MemoryStore
from tether.stores.sqlite import SQLiteStore
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
            await record_decisions(store, "r1", lambda s: s.retry(s.pending[0].call.id, by="inbox"))
        gate.set()
        assert (await worker).status == "finished"

    asyncio.run(main())
    assert ran == [42]


def test_a_decision_is_refused_while_a_live_worker_holds_the_lease_of_a_paused_run() -> None:
    @tool(approval=True)
    def refund(amount: int) -> str:
        """Refund."""
        return "ok"

    async def main() -> None:
        store = MemoryStore()
        paused = await Agent(ScriptedModel([Action("refund", {"amount": 5})]), [refund], store=store).run(
            "go", run_id="r1"
        )
        await store.acquire("r1", "someone-else", ttl=30)  # a worker is taking the run over right now
        with pytest.raises(LeaseConflict, match="being advanced by 'someone-else'"):
            await record_decisions(store, "r1", lambda s: s.approve(paused.pending[0].id))

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

    @tool(approval=True)
    def refund(amount: int) -> str:
        """Refund."""
        return f"refunded {amount}"

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host, machine, _, nonce = leases.owner().rsplit(":", 3)
    killed_worker = f"{host}:{machine}:{int(dead.stdout)}:{nonce}"

    async def main() -> str:
        store = SQLiteStore(str(tmp_path / "runs.db"))
        agent = Agent(ScriptedModel([Action("refund", {"amount": 5}), "Done."]), [refund], store=store)
        paused = await agent.run("go", run_id="r1")
        await store.acquire("r1", killed_worker, ttl=300)  # it paused the run, then died before letting go
        await record_decisions(store, "r1", lambda s: s.approve(paused.pending[0].id))
        return (await agent.run(run_id="r1")).output

    assert asyncio.run(main()) == "Done."


@pytest.mark.parametrize("arguments", ['{"amount": NaN}', '{"amount": Infinity}', '{"amount": -Infinity}'])
def test_nan_and_infinity_are_not_json_and_cannot_slip_past_a_threshold_gate(arguments: str) -> None:
    @tool(approval=lambda a, ctx: a["amount"] > 50)
    def refund(amount: float) -> str:
        """Refund."""
        ran.append(amount)
        return "refunded"

    call = Message.assistant("", [ToolCall("c1", "refund", arguments)])
    result = Agent(ScriptedModel([call, "ok"]), [refund]).run_sync("go")
    assert ran == [] and result.context[2].is_error and "not a JSON value" in result.context[2].content


def test_a_lone_surrogate_in_gated_arguments_pauses_the_run_instead_of_crashing_it(tmp_path: Path) -> None:
    @tool(approval=True)
    def note(text: str) -> str:
        """Write a note."""
        ran.append(text)
        return "noted"

    store = SQLiteStore(tmp_path / "runs.db")
    call = Message.assistant("", [ToolCall("c1", "note", '{"text": "\\ud800"}')])
    paused = Agent(ScriptedModel([call]), [note], store=store).run_sync("go", run_id="r1")
    assert paused.status == "paused"
    done = Agent(ScriptedModel(["ok"]), [note], store=store).run_sync(paused.state.approve("c1"))
    assert done.status == "finished" and ran == ["\ud800"]
    store.close()


def test_an_ancestors_approver_and_cost_budget_cover_its_child_runs() -> None:
    @tool(effect="once")
    def wire_money(amount: int) -> str:
        """Wire money."""
        ran.append(amount)
        return "wired"

    child = Agent(ScriptedModel([Action("wire_money", {"amount": 10_000}), "wired it"]), [wire_money], name="child")
    root = Agent(
        ScriptedModel([Action("child", {"task": "pay"}), "ok"]),
        [child.as_tool()],
        approver=lambda t, a, c: t.effect == "once",  # every `once` call anywhere needs a person
    )
    paused = root.run_sync("pay")
    assert paused.status == "paused" and ran == [] and paused.pending[0].label == "agent › child › wire_money"

    spender = Agent(
        ScriptedModel(
            [
                Message("assistant", "", (ToolCall.of("ping", {}, id=f"p{i}"),), usage=Usage(10**6, 0, 1))
                for i in range(5)
            ]
        ),
        [tool(name="ping", effect="none")(lambda: "pong")],
        name="spender",
    )
    from tether.cost import Price

    prices = {"": Price(input=1.0, output=1.0)}
    capped = Agent(
        ScriptedModel([Action("spender", {"task": "spend"}), "stopped"]),
        [spender.as_tool()],
        max_cost=2.0,
        prices=prices,
    )
    spender.prices = prices
    result = capped.run_sync("go")
    assert "ended limit-reached" in result.context[-1].content  # the child stopped at what the root had left
    assert result.usage.input_tokens == 2_000_000  # 2 of its 5 replies: $2, then the root is out of budget too
    assert (result.status, result.limit) == ("limit-reached", "cost")


def test_edited_arguments_that_do_not_fit_leave_the_run_paused_and_decidable_again() -> None:
    @tool(approval=True)
    def write(path: str) -> str:
        """Write a file."""
        ran.append(path)
        return "written"

    store = MemoryStore()
    paused = Agent(ScriptedModel([Action("write", {"path": "a.txt"})]), [write], store=store).run_sync(
        "go", run_id="r1"
    )
    call_id = paused.pending[0].id
    asyncio.run(record_decisions(store, "r1", lambda s: s.approve(call_id, {"path": 5})))
    agent = Agent(ScriptedModel(["ok"]), [write], store=store)
    with pytest.raises(StateError, match=r"edited arguments for call .* do not fit"):
        agent.run_sync(run_id="r1")
    assert asyncio.run(store.get("r1")).status == "paused"  # type: ignore[union-attr]  # nothing was committed
    asyncio.run(record_decisions(store, "r1", lambda s: s.approve(call_id, {"path": "b.txt"}), replace=True))
    assert agent.run_sync(run_id="r1").status == "finished" and ran == ["b.txt"]


def test_a_run_cancelled_for_good_does_not_resume_through_a_state_either() -> None:
    @tool(approval=True)
    def refund(amount: int) -> str:
        """Refund."""
        ran.append(amount)
        return "ok"

    store = MemoryStore()
    paused = Agent(ScriptedModel([Action("refund", {"amount": 5})]), [refund], store=store).run_sync("go", run_id="r1")
    asyncio.run(record_decisions(store, "r1", lambda s: s.approve(paused.pending[0].id)))
    events = asyncio.run(store.load("r1"))
    asyncio.run(store.append("r1", [Cancelled("closed by a person", final=True)], expected_seq=len(events)))
    with pytest.raises(StateError, match="cancelled for good"):
        Agent(ScriptedModel(["ok"]), [refund], store=store).run_sync(state_of(events))
    assert ran == []


def test_the_model_reads_the_validated_answer_not_what_the_person_typed() -> None:
    class Size(BaseModel):
        size: int

    ask = ask_human("ask_size", answer=Size)
    agent = Agent(ScriptedModel([Action("ask_size", {"question": "size?"}), "ok"]), [ask])
    paused = agent.run_sync("order")
    done = agent.run_sync(paused.state.answer(paused.pending[0].id, {"size": "7"}))
    assert done.context[-2].content == '{"size": 7}'


def test_the_state_size_cap_counts_bytes_not_characters() -> None:
    text = RunState("r1", (Message.user("é" * 60),)).to_json()
    cap = len(text) + 10  # more characters fit than bytes do
    assert len(text) < cap < len(text.encode())
    with pytest.raises(StateError, match=f"over the cap of {cap}"):
        RunState.from_json(text, max_bytes=cap)


def test_a_new_sqlite_store_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "private" / "runs.db").close()
    assert oct((tmp_path / "private" / "runs.db").stat().st_mode & 0o777) == "0o600"
    assert oct((tmp_path / "private").stat().st_mode & 0o777) == "0o700"
