"""MCP tools inside durable tether runs: approval pauses, resumes in a new agent, changed servers."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp_support import Oracle, stdio

from tether import Action, Agent, RunState, StateIncompatible
from tether.mcp import McpClient
from tether.stores.sqlite import SQLiteStore
from tether.testing import ScriptedModel

pytest.importorskip("mcp", reason="needs tether[mcp]")


def paused_delete(oracle: Oracle, db: Path) -> RunState:
    """A run that asked to delete a file and waits for a human (its agent and server are gone after)."""
    with McpClient([stdio(oracle)]) as client:
        agent = Agent(
            ScriptedModel([Action("t__delete", {"path": "a.txt"})]), client.tools_sync(), store=SQLiteStore(db)
        )
        paused = agent.run_sync("delete a.txt", run_id="del-1")
    assert paused.status == "paused"
    assert [p.call.name for p in paused.items] == ["t__delete"]
    assert oracle.rows("delete") == []
    return paused.state


def test_a_destructive_tool_waits_for_approval_and_runs_once_after_it(oracle: Oracle, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    state = paused_delete(oracle, db)
    approved = RunState.from_json(state.to_json()).approve(state.open_calls[0].call.id)
    with McpClient([stdio(oracle)]) as client:  # a new server process, a new client, a new agent
        agent = Agent(ScriptedModel(["Deleted."]), client.tools_sync(), store=SQLiteStore(db))
        done = agent.run_sync(approved)
    assert done.status == "finished" and done.output == "Deleted."
    assert [r["path"] for r in oracle.rows("delete")] == ["a.txt"]
    assert [m.content for m in done.context if m.role == "tool"] == ["deleted a.txt"]


def test_a_denied_call_never_reaches_the_server(oracle: Oracle, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    state = paused_delete(oracle, db)
    with McpClient([stdio(oracle)]) as client:
        agent = Agent(ScriptedModel(["Kept it."]), client.tools_sync(), store=SQLiteStore(db))
        done = agent.run_sync(state.deny(state.open_calls[0].call.id, "keep that file"))
    assert done.output == "Kept it."
    assert oracle.rows("delete") == []


def test_resuming_after_the_server_changed_the_tool_fails_loudly(oracle: Oracle, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    state = paused_delete(oracle, db)
    approved = state.approve(state.open_calls[0].call.id)
    with McpClient([stdio(oracle, env={"TOOL_VERSION": "2"})]) as client:
        tools = {t.name: t for t in client.tools_sync()}
        assert "force" in tools["t__delete"].parameters["properties"]  # the server really changed it
        agent = Agent(ScriptedModel(["never"]), list(tools.values()), store=SQLiteStore(db))
        with pytest.raises(StateIncompatible, match="tool definitions"):
            agent.run_sync(approved)
    assert oracle.rows("delete") == []
