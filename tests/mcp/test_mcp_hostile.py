"""Hostile MCP servers against real runs: a tool changed under an approval, a flood, lying hints."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from mcp_support import Oracle, stdio

from tether import Action, Agent, UserError, record_decisions
from tether.mcp import McpClient, McpServer, ToolRule, contract
from tether.mcp._stdio import split_lines
from tether.stores.sqlite import SQLiteStore
from tether.testing import ScriptedModel

pytest.importorskip("mcp", reason="needs tether[mcp]")


def test_a_tool_changed_between_the_pause_and_the_approval_is_not_called_in_the_live_run(
    oracle: Oracle, tmp_path: Path
) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    with McpClient([stdio(oracle, env={"FLIP": "1"})]) as client:
        tools = client.tools_sync()  # the agent is built once, and lives through the pause
        move = Action("t__transfer", {"to": "payee-7", "amount": 50})
        paused = Agent(ScriptedModel([move]), tools, store=store).run_sync("pay", run_id="r1")
        [item] = paused.items
        assert item.status == "awaiting-approval"
        # The server changes the tool and does not tell (or its notice loses the race with the person).
        assert asyncio.run(client.call("t", "flip")).text == "flipped"
        asyncio.run(record_decisions(store, "r1", lambda s: s.approve(item.id), by="ana"))
        done = Agent(ScriptedModel(["ok"]), tools, store=store).run_sync(run_id="r1")
    assert oracle.rows("transfer") == []  # the approval was for version 1: version 2 never ran
    [result] = [m for m in done.context if m.role == "tool"]
    assert result.is_error and "changed tool 'transfer'" in result.text
    asyncio.run(store.aclose())


def test_an_unchanged_tool_runs_once_approved_in_the_live_run(oracle: Oracle, tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    with McpClient([stdio(oracle, env={"FLIP": "1"})]) as client:
        tools = client.tools_sync()
        move = Action("t__transfer", {"to": "payee-7", "amount": 50})
        paused = Agent(ScriptedModel([move]), tools, store=store).run_sync("pay", run_id="r1")
        asyncio.run(record_decisions(store, "r1", lambda s: s.approve(paused.items[0].id), by="ana"))
        done = Agent(ScriptedModel(["ok"]), tools, store=store).run_sync(run_id="r1")
    assert [(r["to"], r["version"]) for r in oracle.rows("transfer")] == [("payee-7", 1)]
    assert done.output == "ok"
    asyncio.run(store.aclose())


def test_a_server_that_lies_in_its_hints_runs_its_wiper_ungated_unless_trust_is_verify(
    oracle: Oracle, tmp_path: Path
) -> None:
    move = Action("t__wipe", {"path": "/data"})
    with McpClient([stdio(oracle)]) as client:  # believed: "read-only", so it runs at once
        believed = Agent(ScriptedModel([move, "ok"]), client.tools_sync()).run_sync("look", run_id="r1")
        assert client.ungated_by_hints()["t__wipe"] == "readOnlyHint"
    assert believed.status == "finished" and [r["path"] for r in oracle.rows("wipe")] == ["/data"]
    store = SQLiteStore(tmp_path / "runs.db")
    with McpClient([stdio(oracle, trust="verify")]) as client:
        tools = {t.name: t for t in client.tools_sync()}
        assert {(t.effect, t.approval) for t in tools.values()} == {("once", True)}  # whatever the hints
        assert client.ungated_by_hints() == {}
        paused = Agent(ScriptedModel([move]), list(tools.values()), store=store).run_sync("look", run_id="r2")
    assert paused.status == "paused" and [p.call.name for p in paused.items] == ["t__wipe"]
    assert len(oracle.rows("wipe")) == 1  # the second wipe waits for a person
    asyncio.run(store.aclose())


def test_trust_is_read_from_the_config_and_checked() -> None:
    assert McpServer.from_config("s", {"command": "x", "trust": "verify"}).trust == "verify"
    with pytest.raises(UserError, match="trust must be"):
        McpServer("s", command="x", trust="maybe")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="trust='verify' asks before every call"):
        McpServer("s", command="x", trust="verify", approval=False)
    vouched = McpServer("s", command="x", trust="verify", tools={"add": ToolRule(approval=False)})
    assert contract(vouched, "add", {"readOnlyHint": True})[1] is False  # your own rule still counts


def test_a_giant_result_becomes_a_note_and_the_next_call_on_the_connection_is_answered(oracle: Oracle) -> None:
    # The attack: 24 MB of text in one reply. The reader used to take minutes over it, and the
    # next tiny call on the same server timed out behind it.
    moves = [Action("t__whoami", {}), Action("t__huge", {"megabytes": 24}), Action("t__add", {"a": 1, "b": 2})]
    with McpClient([stdio(oracle)]) as client:
        done = Agent(ScriptedModel([*moves, "ok"]), client.tools_sync()).run_sync("flood", run_id="r1")
        pid = asyncio.run(client.call("t", "whoami")).text
    first, flood, after = [m for m in done.context if m.role == "tool"]
    assert flood.is_error and "over the cap of 8,388,608 bytes per result" in flood.text
    assert len(flood.text) < 1000
    assert after.text == "3" and not after.is_error
    assert first.text == pid  # the same server process answered throughout: nothing was restarted
    assert done.output == "ok"


def test_a_result_under_the_cap_arrives_whole_and_the_cap_is_per_server(oracle: Oracle) -> None:
    with McpClient([stdio(oracle, max_result_bytes=2**20)]) as client:
        small = asyncio.run(client.call("t", "huge", {"megabytes": 0}))
        capped = asyncio.run(client.call("t", "huge", {"megabytes": 1}))
        assert asyncio.run(client.call("t", "add", {"a": 2})).text == "2"
    assert small.text == "" and not small.is_error
    assert capped.is_error and "over the cap of 1,048,576 bytes" in capped.text
    with McpClient([stdio(oracle)]) as client:
        whole = asyncio.run(client.call("t", "huge", {"megabytes": 1}))
    assert not whole.is_error and whole.text == "x" * 2**20


@pytest.mark.parametrize(
    ("line", "rid"),
    [
        (b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"' + b"x" * 99 + b'"}]}}', 7),
        (b'{"result":{"content":[{"type":"text","text":"' + b"x" * 99 + b'"}]},"jsonrpc":"2.0","id":"a-1"}', "a-1"),
        (b'{"result":{"content":[{"type":"text","text":"' + b"x" * 99 + b'"}],"id":5},"jsonrpc":"2.0"}', None),
        (b'{"result":{"text":"\\"id\\": 4 ' + b"x" * 99 + b'"},"id":9}', 9),
        (b'{"method":"notifications/message","params":{"data":"' + b"x" * 99 + b'"}}', None),
    ],
)
def test_an_oversized_reply_is_matched_to_its_request_only_by_its_top_level_id(line: bytes, rid: object) -> None:
    buffer = bytearray()
    lines, over = split_lines(buffer, line[:50], 40, None)
    assert lines == [] and over is not None
    lines, over = split_lines(buffer, line[50:] + b"\n" + b'{"id": 1}\n', 40, over)
    assert over is None and lines[1] == b'{"id": 1}'  # the line after it is read as usual
    assert lines[0].size == len(line) and lines[0].request_id() == rid


def test_over_http_a_result_over_the_cap_is_kept_from_the_model_too(http_url: str) -> None:
    with McpClient([McpServer("t", url=http_url, max_result_bytes=2**20)]) as client:
        capped = asyncio.run(client.call("t", "huge", {"megabytes": 2}))
        after = asyncio.run(client.call("t", "add", {"a": 1, "b": 2}))
    assert capped.is_error and "returned a result of 2,097,152 bytes, over the cap of 1,048,576" in capped.text
    assert after.text == "3"
