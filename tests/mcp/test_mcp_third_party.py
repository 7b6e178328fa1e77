"""Servers someone else wrote: mcp-server-time (Python, PyPI) and server-everything (Node, npm)."""

from __future__ import annotations

import json

import pytest
from mcp_support import third_party

from tether import Action, Agent
from tether.mcp import McpClient, McpResult, McpServer
from tether.testing import ScriptedModel

pytest.importorskip("mcp", reason="needs tether[mcp]")


def test_mcp_server_time_answers_through_an_agent() -> None:
    server = McpServer("time", command=third_party("mcp-server-time"))
    with McpClient([server]) as client:
        tools = {t.name: t for t in client.tools_sync()}
        assert (tools["time__get_current_time"].effect, tools["time__get_current_time"].approval) == ("none", False)
        agent = Agent(
            ScriptedModel([Action("time__get_current_time", {"timezone": "Europe/Paris"}), "done"]), tools.values()
        )
        result = agent.run_sync("what time is it in Paris?")
    note = next(m for m in result.context if m.role == "tool")
    assert not note.is_error
    assert json.loads(note.content)["timezone"] == "Europe/Paris"


def test_mcp_server_time_reports_a_bad_timezone_as_a_note() -> None:
    with McpClient([McpServer("time", command=third_party("mcp-server-time"))]) as client:
        agent = Agent(
            ScriptedModel([Action("time__get_current_time", {"timezone": "Mars/Olympus"}), "sorry"]),
            client.tools_sync(),
        )
        note = next(m for m in agent.run_sync("time on Mars?").context if m.role == "tool")
    assert note.is_error and "Mars/Olympus" in note.content


@pytest.fixture
def everything() -> McpServer:
    return McpServer("every", command=third_party("mcp-server-everything"), args=("stdio",))


def test_server_everythings_annotations_map_onto_tethers_contract(everything: McpServer) -> None:
    with McpClient([everything]) as client:
        tools = {t.name: (t.effect, t.approval) for t in client.tools_sync()}
    assert tools["every__echo"] == ("none", False)  # readOnlyHint
    assert tools["every__gzip-file-as-resource"] == ("idempotent", False)  # idempotent, not destructive
    assert tools["every__toggle-simulated-logging"] == ("once", False)  # destructiveHint: false


def test_server_everythings_results_image_and_coercion(everything: McpServer) -> None:
    results: list[McpResult] = []
    with McpClient([everything], on_result=lambda call, r: results.append(r)) as client:
        replies = [
            Action("every__get-tiny-image"),
            Action("every__get-sum", {"a": "2", "b": 3}),
            Action("every__get-structured-content", {"location": "Chicago"}),
        ]
        result = Agent(ScriptedModel([*replies, "done"]), client.tools_sync()).run_sync("go")
    image, total, weather = (m.text for m in result.context if m.role == "tool")
    assert json.loads(weather) == results[2].structured
    assert image.splitlines()[1].startswith("[image image/png, ") and image.splitlines()[1].endswith(" bytes]")
    assert results[0].blobs[0].data.startswith(b"\x89PNG")
    shown = next(m for m in result.context if m.role == "tool").parts  # the picture reaches the model
    assert [p.media_type for p in shown] == ["image/png"] and shown[0].data == results[0].blobs[0].data
    assert total == "The sum of 2 and 3 is 5."
    assert set(results[2].structured) == {"temperature", "conditions", "humidity"}


def test_server_everything_sees_only_the_scrubbed_environment(
    everything: McpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-leaks")
    with McpClient([everything]) as client:
        import asyncio

        seen = json.loads(asyncio.run(client.call("every", "get-env")).text)
    assert "OPENAI_API_KEY" not in seen
    assert set(seen) <= {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}
