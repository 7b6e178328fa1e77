"""Serving an agent that uses deps: a factory makes each run's deps; one that needs them and has none is refused.

The agent reads its deps twice, as pydantic-ai-style agents do: its instructions
(``inv.deps``) and a tool that takes ``Invocation[Desk]``. The server runs in
process (its API over ASGI, a real SQLite file), and ``tether serve`` in a
child process for the command line's refusal.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from support import until
from tether import Action, Agent, FunctionPolicy, Invocation, tool
from tether.exceptions import UserError
from tether.serve import Server
from tether.stores.sqlite import SQLiteStore

TOKEN = "t" * 64
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Desk:
    customer: str
    refunds: list[str]


def desk_agent() -> Agent:
    @tool(effect="once", approval="always")
    def issue_refund(order: str, call: Invocation[Desk]) -> str:
        """Refund an order."""
        call.deps.refunds.append(f"{call.deps.customer}:{order}")
        return f"refunded {order} for {call.deps.customer}"

    def brain(context: Any, tools: Any) -> Any:
        if any(m.role == "tool" for m in context):
            return "done"
        return Action("issue_refund", {"order": "A1"})

    return Agent(
        FunctionPolicy(brain),
        [issue_refund],
        name="desk",
        instructions=lambda inv: f"You help {inv.deps.customer}.",
    )


def client_of(server: Server) -> httpx.AsyncClient:
    headers = {"authorization": f"Bearer {TOKEN}", "host": "127.0.0.1"}
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=server.app), base_url="http://127.0.0.1", headers=headers
    )


async def test_a_deps_using_agent_is_served_with_a_factory_fed_by_the_runs_inputs(tmp_path: Path) -> None:
    refunds: list[str] = []
    made: list[tuple[str, str, dict[str, Any]]] = []

    async def make_deps(run_id: str, agent: str, inputs: dict[str, Any]) -> Desk:
        made.append((run_id, agent, inputs))
        return Desk(inputs["customer"], refunds)

    store = SQLiteStore(str(tmp_path / "runs.db"))
    server = Server([desk_agent()], store=store, env={"TETHER_SERVE_TOKEN": TOKEN}, deps=make_deps)
    async with server.running(), client_of(server) as c:
        started = await c.post("/api/runs", json={"agent": "desk", "input": "refund A1", "inputs": {"customer": "ana"}})
        assert started.status_code == 201, started.text
        run_id = started.json()["run_id"]

        async def paused() -> bool:
            return bool((await c.get(f"/api/runs/{run_id}")).json()["items"])

        await until(paused, "the run pauses on the refund")
        page = await c.get("/")  # the inbox lists the item
        assert page.status_code == 200 and "issue_refund" in page.text
        item = (await c.get("/api/items")).json()["items"][0]
        decided = await c.post(
            f"/api/runs/{run_id}/items/{item['call_id']}/approve", json={"args_hash": item["args_hash"]}
        )
        assert decided.status_code == 200, decided.text

        async def finished() -> bool:
            return (await c.get(f"/api/runs/{run_id}")).json()["status"] == "finished"

        await until(finished, "the run finishes after the approval")
        events = (await c.get(f"/api/runs/{run_id}/events")).json()["events"]
    assert refunds == ["ana:A1"]  # the tool got the deps the factory made from the run's inputs
    assert events[0]["event"]["messages"][0]["content"] == "You help ana."  # and so did the instructions
    assert {m[0] for m in made} == {run_id} and {m[1] for m in made} == {"desk"}
    assert all(m[2] == {"customer": "ana"} for m in made)
    assert len(made) >= 3  # at the start, and each time a worker advanced the run (before and after the pause)
    assert [e["kind"] for e in events].count("run-started") == 2  # the start, and the resume after the decision


async def test_an_api_started_run_has_one_run_started_event(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "runs.db"))
    server = Server(
        [Agent(FunctionPolicy(lambda c, t: "hi"), name="g")], store=store, env={"TETHER_SERVE_TOKEN": TOKEN}
    )
    async with server.running(), client_of(server) as c:
        run_id = (await c.post("/api/runs", json={"agent": "g", "input": "hello"})).json()["run_id"]

        async def finished() -> bool:
            return (await c.get(f"/api/runs/{run_id}")).json()["status"] == "finished"

        await until(finished, "the run finishes")
        kinds = [e["kind"] for e in (await c.get(f"/api/runs/{run_id}/events")).json()["events"]]
    assert kinds == ["run-started", "model-replied", "finished"]


def test_an_agent_that_needs_deps_is_refused_at_start_without_a_factory() -> None:
    with pytest.raises(UserError, match=r"agent 'desk' needs run dependencies and none are given: tool 'issue_refund'"):
        Server([desk_agent()], store="memory://", env={"TETHER_SERVE_TOKEN": TOKEN})


def test_instructions_that_read_deps_are_refused_at_start_without_a_factory() -> None:
    agent = Agent(FunctionPolicy(lambda c, t: "hi"), name="g", instructions=lambda inv: f"Help {inv.deps.name}.")
    with pytest.raises(UserError, match=r"its instructions fail without deps \(AttributeError"):
        Server([agent], store="memory://", env={"TETHER_SERVE_TOKEN": TOKEN})


async def test_a_run_that_cannot_advance_shows_failed_with_its_reason(tmp_path: Path) -> None:
    def make_deps(run_id: str, agent: str, inputs: dict[str, Any]) -> Any:
        return Desk("ana", []) if inputs.get("good") else SimpleNamespace(customer="ana")  # the tool wants a Desk

    store = SQLiteStore(str(tmp_path / "runs.db"))
    server = Server([desk_agent()], store=store, env={"TETHER_SERVE_TOKEN": TOKEN}, deps=make_deps)
    async with server.running(), client_of(server) as c:
        body = {"agent": "desk", "input": "refund A1", "inputs": {"good": False}}
        run_id = (await c.post("/api/runs", json=body)).json()["run_id"]

        async def failed() -> bool:
            return (await c.get(f"/api/runs/{run_id}")).json()["status"] == "failed"

        await until(failed, "the run shows failed")
        run = (await c.get(f"/api/runs/{run_id}")).json()
        page = await c.get(f"/runs/{run_id}")
    assert "tool 'issue_refund' needs run dependencies" in run["error"]
    assert "got deps of type SimpleNamespace" in run["error"]
    assert "got deps of type SimpleNamespace" in page.text  # the inbox's run page says why too


async def test_a_factory_that_fails_after_a_decision_leaves_the_run_failed_with_its_reason(tmp_path: Path) -> None:
    """Approved, then the factory breaks: the run must not sit paused with nothing waiting and no error."""
    broken: list[bool] = []

    def make_deps(run_id: str, agent: str, inputs: dict[str, Any]) -> Desk:
        if broken:
            raise RuntimeError("the customer database is down")
        return Desk("ana", [])

    store = SQLiteStore(str(tmp_path / "runs.db"))
    server = Server([desk_agent()], store=store, env={"TETHER_SERVE_TOKEN": TOKEN}, deps=make_deps)
    async with server.running(), client_of(server) as c:
        run_id = (await c.post("/api/runs", json={"agent": "desk", "input": "refund A1"})).json()["run_id"]

        async def paused() -> bool:
            return bool((await c.get(f"/api/runs/{run_id}")).json()["items"])

        await until(paused, "the run pauses on the refund")
        broken.append(True)
        item = (await c.get("/api/items")).json()["items"][0]
        approve = f"/api/runs/{run_id}/items/{item['call_id']}/approve"
        assert (await c.post(approve, json={"args_hash": item["args_hash"]})).status_code == 200

        async def failed() -> bool:
            return (await c.get(f"/api/runs/{run_id}")).json()["status"] == "failed"

        await until(failed, "the run shows failed after its approval")
        run = (await c.get(f"/api/runs/{run_id}")).json()
    assert "the customer database is down" in run["error"]


async def test_a_factory_that_refuses_the_inputs_is_a_422_and_no_run(tmp_path: Path) -> None:
    def make_deps(run_id: str, agent: str, inputs: dict[str, Any]) -> Desk:
        return Desk(inputs["customer"], [])

    store = SQLiteStore(str(tmp_path / "runs.db"))
    server = Server([desk_agent()], store=store, env={"TETHER_SERVE_TOKEN": TOKEN}, deps=make_deps)
    async with server.running(), client_of(server) as c:
        refused = await c.post("/api/runs", json={"agent": "desk", "input": "refund A1", "run_id": "r1"})
        assert refused.status_code == 422
        assert refused.json()["error"]["code"] == "deps-refused" and "KeyError" in refused.json()["error"]["message"]
        assert (await c.get("/api/runs/r1")).status_code == 404


def test_tether_serve_refuses_an_agent_that_needs_deps_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "deskapp.py").write_text(
        "from tests.serve.test_deps import desk_agent, Desk\n"
        "desk = desk_agent()\n"
        "def make_deps(run_id, agent, inputs):\n"
        "    return Desk(inputs.get('customer', '?'), [])\n"
    )
    env = {"PYTHONPATH": f"{ROOT / 'src'}:{ROOT}:{ROOT / 'tests'}", "PATH": "/usr/bin:/bin"}
    args = [sys.executable, "-m", "tether", "serve", "deskapp:desk", "--store", "memory://", "--port", "1"]
    done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "needs run dependencies" in done.stderr and "--deps" in done.stderr
    bad = subprocess.run([*args, "--deps", "deskapp:nothing"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr == "error: 'deskapp' has no attribute 'nothing'\n"
