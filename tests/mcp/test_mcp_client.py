"""The MCP client against a real MCPServer, over stdio and over streamable HTTP."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from typing import Any

import pytest
from mcp_support import SERVER, Oracle, alive, stdio

from tether import Action, Agent, Message, RunResult, UserError
from tether.mcp import McpClient, McpResult, McpServer, McpUnavailable, ToolRule
from tether.testing import ScriptedModel

pytest.importorskip("mcp", reason="needs tether[mcp]")


SRC_ENV = {**os.environ, "PYTHONPATH": str(SERVER.parents[2] / "src")}  # subprocesses import this checkout


def notes(result: RunResult) -> list[Message]:
    return [m for m in result.context if m.role == "tool"]


def run(client: McpClient, *replies: Any, **agent: Any) -> RunResult:
    tools = client.tools_sync()
    return Agent(ScriptedModel([*replies, "done"]), tools, **agent).run_sync("go", run_id="r1")


def test_the_servers_tools_become_tether_tools_with_a_contract_from_their_annotations(server: McpServer) -> None:
    with McpClient([server]) as client:
        tools = {t.name: t for t in client.tools_sync()}
    contracts = {name: (t.effect, t.approval) for name, t in tools.items() if name != "t__extra"}
    assert contracts == {
        "t__add": ("none", False),  # readOnlyHint
        "t__boom": ("none", False),
        "t__delete": ("once", True),  # destructiveHint
        "t__die": ("none", False),
        "t__env": ("none", False),
        "t__grow": ("none", False),
        "t__huge": ("none", False),
        "t__note": ("once", True),  # no hints: MCP's defaults are "destructive, not idempotent"
        "t__picture": ("none", False),
        "t__remember": ("idempotent", False),  # idempotentHint, destructiveHint: false
        "t__slow": ("none", False),
        "t__weather": ("none", False),
        "t__whoami": ("none", False),
        "t__wipe": ("none", False),  # readOnlyHint, believed (trust="verify" does not)
    }
    add = tools["t__add"]
    assert add.description == "Add two integers."
    assert add.parameters["properties"]["a"] == {"title": "A", "type": "integer"}
    assert add.parameters["required"] == ["a"]
    assert add.timeout == 120.0


def test_the_contract_is_overridden_per_server_and_per_tool(oracle: Oracle) -> None:
    rules = {"add": ToolRule(approval=True, timeout=5.0), "remember": ToolRule(effect="once")}
    server = stdio(oracle, "calc", approval=False, prefix="c_", tools=rules, include=("add", "remember", "delete"))
    with McpClient([server]) as client:
        tools = {t.name: (t.effect, t.approval, t.timeout) for t in client.tools_sync()}
    assert tools == {
        "c_add": ("none", True, 5.0),
        "c_delete": ("once", False, 120.0),
        "c_remember": ("once", False, 120.0),
    }


def test_results_become_the_notes_the_model_reads(server: McpServer, oracle: Oracle) -> None:
    seen: list[McpResult] = []
    with McpClient([server], on_result=lambda call, result: seen.append(result)) as client:
        result = run(
            client,
            Action("t__add", {"a": "5", "b": 2}),  # "5" is coerced, as @tool does
            Action("t__weather", {"city": "Oslo"}),
            Action("t__picture"),
            Action("t__boom"),
            Action("t__add", {"a": "five"}),
        )
    texts = [(n.text, n.is_error) for n in notes(result)]
    assert texts[0] == ("7", False)
    assert texts[1] == ('{\n  "city": "Oslo",\n  "celsius": 21\n}', False)
    assert texts[2] == ("[image image/png, 69 bytes]", False)
    (shown,) = notes(result)[2].parts  # the picture itself reaches a model that can see it
    assert (shown.media_type, shown.data) == ("image/png", seen[2].blobs[0].data)
    assert texts[3] == ("tool 't__boom' failed: McpToolError: Error executing tool boom: the disk is on fire", True)
    assert texts[4][1] and "field 'a': Input should be a valid integer" in texts[4][0]
    assert [r.structured for r in seen[:2]] == [{"result": 7}, {"city": "Oslo", "celsius": 21}]
    image = seen[2].blobs[0]
    assert (image.kind, image.mime_type, image.data[:4]) == ("image", "image/png", b"\x89PNG")
    assert seen[3].is_error and len(seen) == 4  # the invalid call never reached the server


def test_an_idempotent_call_carries_tethers_idempotency_key_in_meta(server: McpServer, oracle: Oracle) -> None:
    with McpClient([server]) as client:
        result = run(client, Action("t__remember", {"key": "k", "value": "v"}), Action("t__add", {"a": 1}))
    call_id = result.context[1].tool_calls[0].id
    assert [row["idem"] for row in oracle.rows("remember")] == [f"r1:{call_id}"]


def test_a_call_past_its_timeout_is_stopped_and_the_server_told(oracle: Oracle) -> None:
    server = stdio(oracle, tools={"slow": ToolRule(timeout=0.5)})
    with McpClient([server]) as client:
        result = run(client, Action("t__slow", {"seconds": 30}))
        note = notes(result)[0]
        assert note.is_error and note.content == "tool 't__slow' timed out after 0.5 seconds"
        oracle.wait_for("slow-cancelled")
        assert oracle.rows("slow-done") == []


def test_cancelling_the_run_cancels_the_call_on_the_server(server: McpServer, oracle: Oracle) -> None:
    async def go(client: McpClient) -> list[str]:
        tools = await client.tools()
        agent = Agent(ScriptedModel([Action("t__slow", {"seconds": 30}), "never"]), tools)
        cancel = asyncio.Event()

        async def when_the_server_runs_it() -> None:
            await asyncio.to_thread(oracle.wait_for, "slow-start")
            cancel.set()

        watcher = asyncio.create_task(when_the_server_runs_it())
        kinds = [event.kind async for event in agent.stream("go", cancel=cancel)]
        await watcher
        return kinds

    with McpClient([server]) as client:
        kinds = asyncio.run(go(client))
        oracle.wait_for("slow-cancelled")
    assert kinds[-1] == "cancelled"


def test_a_dead_stdio_server_is_reported_and_started_again_on_the_next_call(oracle: Oracle) -> None:
    server = stdio(oracle, tools={"die": ToolRule(effect="once")})
    with McpClient([server]) as client:
        result = run(client, Action("t__whoami"), Action("t__die"), Action("t__whoami"))
    first, died, second = notes(result)
    assert died.is_error and "McpServerLost: MCP server 't' exited during the call to 'die'" in died.content
    assert "outcome is unknown" in died.content
    assert not second.is_error and second.content != first.content  # a new process
    assert len(oracle.rows("die")) == 1


def test_a_call_that_is_safe_to_repeat_is_repeated_once_on_a_new_server(oracle: Oracle) -> None:
    with McpClient([stdio(oracle)]) as client:
        result = run(client, Action("t__die"))  # read-only: repeated once, and it dies again
    assert "McpServerLost" in notes(result)[0].content
    assert len(oracle.rows("die")) == 2


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
def test_a_changed_tool_list_is_followed(oracle: Oracle, protocol: str) -> None:
    """2026 servers announce it on a subscriptions/listen stream, older ones with a notification."""
    server = stdio(oracle, protocol=protocol, tools={"note": ToolRule(approval=False)})
    with McpClient([server]) as client:
        before = client.tools_sync()
        version = client.version
        asyncio.run(client.call("t", "grow"))
        deadline = time.monotonic() + 30
        while client.version == version and time.monotonic() < deadline:
            time.sleep(0.02)
        agent = Agent(ScriptedModel([Action("t__note", {"text": "hi"}), Action("t__add", {"a": 1}), "done"]), before)
        stale, unchanged = notes(agent.run_sync("go"))
        after = {t.name: t for t in client.tools_sync()}
    assert stale.is_error and "McpToolChanged: MCP server 't' changed tool 'note' since this agent" in stale.content
    assert oracle.rows("note") == []  # a changed tool is never called through its old definition
    assert unchanged.content == "1"  # the tools that did not change still work
    assert "t__extra" in after and after["t__note"].description == "Write a note (changed at run time)."


def test_stdio_servers_get_a_scrubbed_environment(oracle: Oracle, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_API_KEY", "s3cret")
    scrubbed = stdio(oracle, "a", env={"GIVEN": "${SECRET_API_KEY}"})
    inherited = stdio(oracle, "b", inherit_env=True)

    async def read(client: McpClient) -> list[str]:
        calls = [("a", "SECRET_API_KEY"), ("a", "GIVEN"), ("a", "PATH"), ("b", "SECRET_API_KEY")]
        return [(await client.call(s, "env", {"name": n})).text for s, n in calls]

    with McpClient([scrubbed, inherited]) as client:
        secret, given, path, inherited_secret = asyncio.run(read(client))
    assert (secret, given, inherited_secret) == ("", "s3cret", "s3cret")
    assert path == os.environ["PATH"]


def test_one_server_serves_every_run_and_event_loop_until_closed(oracle: Oracle) -> None:
    with McpClient([stdio(oracle)]) as client:
        pids = {run(client, Action("t__whoami")).context[2].content for _ in range(3)}
        pids.add(asyncio.run(client.call("t", "whoami")).text)
        assert len(pids) == 1
        pid = int(pids.pop())
        assert alive(pid)
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)
    with pytest.raises(UserError, match="closed"):
        client.tools_sync()


@pytest.mark.parametrize(
    ("command", "says"),
    [
        (["/nonexistent/mcp-server"], "could not be started or reached: FileNotFoundError"),
        ([sys.executable, "-c", "import sys; print('no config here', file=sys.stderr); sys.exit(4)"], "no config here"),
        ([sys.executable, "-c", "import time; time.sleep(60)"], "did not answer within 1 s"),
    ],
)
def test_a_server_that_cannot_start_says_why_without_hanging(command: list[str], says: str) -> None:
    server = McpServer("broken", command=command[0], args=tuple(command[1:]), connect_timeout=1)
    started = time.monotonic()
    with McpClient([server]) as client, pytest.raises(McpUnavailable, match="MCP server 'broken'") as info:
        client.tools_sync()
    assert says in str(info.value)
    assert time.monotonic() - started < 20  # the SDK's own shutdown allows a few seconds for a stuck server


def test_an_http_server_that_is_not_there_is_reported(oracle: Oracle) -> None:
    from mcp_support import free_port

    gone = McpServer("gone", url=f"http://127.0.0.1:{free_port()}/mcp")
    with (
        McpClient([gone]) as client,
        pytest.raises(McpUnavailable, match=r"MCP server 'gone' .* reached: ConnectError"),
    ):
        client.tools_sync()


def test_an_http_server_that_restarts_is_reconnected(oracle: Oracle) -> None:
    from mcp_support import free_port, serve_http

    port = free_port()
    command, env = [sys.executable, str(SERVER), "http", str(port)], {"ORACLE": str(oracle.path)}
    with McpClient([McpServer("h", url=f"http://127.0.0.1:{port}/mcp")]) as client:
        with serve_http(command, port, env):
            first = asyncio.run(client.call("h", "whoami")).text
        with serve_http(command, port, env):
            second = asyncio.run(client.call("h", "whoami")).text
    assert first != second


def test_configuration_mistakes_are_caught_before_anything_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    with pytest.raises(UserError, match=r"uses \$\{NOT_SET_ANYWHERE\}, which is not set"):
        McpClient([McpServer("a", url="http://127.0.0.1:1/mcp", headers={"Authorization": "${NOT_SET_ANYWHERE}"})])
    with pytest.raises(UserError, match="two MCP servers are named 'a'"):
        McpClient([McpServer("a", command="x"), McpServer("a", command="y")])
    with McpClient([McpServer("a", command="x")]) as client, pytest.raises(UserError, match="no MCP server named 'b'"):
        client.tools_sync("b")


def test_importing_tether_or_tether_mcp_does_not_import_the_sdk() -> None:
    code = "import sys, tether, tether.mcp; print(sorted(m for m in ('mcp', 'mcp_types', 'anyio') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=SRC_ENV)
    assert out.stdout.strip() == "[]"


def test_a_tool_of_a_closed_client_says_so_in_its_note(oracle: Oracle) -> None:
    with McpClient([stdio(oracle)]) as client:
        tools = client.tools_sync()
    result = Agent(ScriptedModel([Action("t__add", {"a": 1}), "done"]), tools).run_sync("go")
    assert notes(result)[0].content == "tool 't__add' failed: UserError: this MCP client is closed"


def test_calls_of_one_reply_run_together_on_one_connection(server: McpServer) -> None:
    with McpClient([server]) as client:
        result = run(client, [Action("t__add", {"a": n, "b": 100}) for n in range(5)])
    assert [n.content for n in notes(result)] == ["100", "101", "102", "103", "104"]


def test_the_server_of_a_client_left_open_does_not_outlive_the_process(oracle: Oracle) -> None:
    code = (
        "import asyncio, sys\n"
        "from tether.mcp import McpClient, McpServer\n"
        f"client = McpClient([McpServer('t', command=sys.executable, args=({str(SERVER)!r}, 'stdio'))])\n"
        "print(asyncio.run(client.call('t', 'whoami')).text, flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=SRC_ENV)
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.strip())
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)
