"""The command line with MCP servers from .tether/config.toml: `tether mcp list`, and tools in `tether run`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_support import SERVER, Oracle

pytest.importorskip("mcp", reason="needs tether[mcp]")

SRC = str(Path(__file__).resolve().parents[2] / "src")


def tether(ws: Path, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TETHER_", "OPENAI", "ANTHROPIC", "PYTEST"))}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), PYTHONPATH=SRC, NO_COLOR="1")
    argv = [sys.executable, "-m", "tether", *args]
    return subprocess.run(argv, cwd=ws, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def ws(tmp_path: Path, oracle: Oracle) -> Path:
    """A workspace whose config declares the test server (and whose user config is empty)."""
    ws, home = tmp_path / "ws", tmp_path / "home"
    (ws / ".tether").mkdir(parents=True)
    home.mkdir()
    (ws / ".tether" / "config.toml").write_text(
        f"""
[mcp.servers.t]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(SERVER))}, "stdio"]
env = {{ ORACLE = {json.dumps(str(oracle.path))} }}
include = ["add", "delete", "whoami"]

[mcp.servers.t.tools.whoami]
approval = true
"""
    )
    return ws


def test_mcp_list_shows_each_server_and_its_tools_with_their_contract(ws: Path, tmp_path: Path) -> None:
    done = tether(ws, "mcp", "list", home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines()]
    assert lines[0][0] == "t" and lines[0][1] == "(stdio:"
    assert [line[:3] for line in lines[1:4]] == [
        ["t__add", "effect=none", "runs"],
        ["t__delete", "effect=once", "asks"],
        ["t__whoami", "effect=none", "asks"],  # the config's per-tool rule
    ]


def test_mcp_list_says_which_server_failed(ws: Path, tmp_path: Path) -> None:
    config = ws / ".tether" / "config.toml"
    config.write_text(config.read_text() + '\n[mcp.servers.gone]\ncommand = "/nonexistent/server"\n')
    done = tether(ws, "mcp", "list", home=tmp_path / "home")
    assert done.returncode == 1
    assert "t__add" in done.stdout
    assert "error: MCP server 'gone' (/nonexistent/server) could not be started" in done.stdout


def test_a_bad_server_table_is_one_line_and_exit_status_2(ws: Path, tmp_path: Path) -> None:
    (ws / ".tether" / "config.toml").write_text('[mcp.servers.x]\ncommand = "a"\ncolor = "red"\n')
    done = tether(ws, "mcp", "list", home=tmp_path / "home")
    assert done.returncode == 2
    assert done.stderr.startswith("error: unknown setting 'color' for MCP server 'x'")


def test_run_gives_the_agent_the_servers_tools(ws: Path, tmp_path: Path, oracle: Oracle) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"tool": "t__add", "args": {"a": 2, "b": 3}}, {"answer": "sum: {last_tool_result}"}]))
    done = tether(ws, "run", "add 2 and 3", "--model", f"scripted:{script}", home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    assert "sum: 5" in done.stdout


def test_a_gated_mcp_call_pauses_and_runs_once_after_approve_and_resume(
    ws: Path, tmp_path: Path, oracle: Oracle
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"tool": "t__delete", "args": {"path": "x"}}, "deleted"]))
    brain, home = f"scripted:{script}", tmp_path / "home"
    paused = tether(ws, "run", "delete x", "--model", brain, home=home)
    assert paused.returncode == 3, paused.stderr
    assert "waits for a decision" in paused.stderr and "t__delete" in paused.stderr
    assert oracle.rows("delete") == []
    run_id = paused.stderr.split("paused: run ")[1].split()[0]
    assert tether(ws, "approve", run_id, home=home).returncode == 0
    resumed = tether(ws, "resume", run_id, "--model", brain, home=home)
    assert resumed.returncode == 0, resumed.stderr
    assert [r["path"] for r in oracle.rows("delete")] == ["x"]


def test_mcp_list_flags_tools_ungated_by_a_hint_and_trust_verify_gates_them(ws: Path, tmp_path: Path) -> None:
    done = tether(ws, "mcp", "list", home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    add = next(line for line in done.stdout.splitlines() if "t__add" in line)
    assert add.endswith("[ungated by the server's readOnlyHint]")
    whoami = next(line for line in done.stdout.splitlines() if "t__whoami" in line)
    assert "ungated" not in whoami  # the config's own rule gates it
    assert "1 tool(s) run without approval only because 't' says they are safe" in done.stdout
    config = ws / ".tether" / "config.toml"
    config.write_text(config.read_text().replace('include = ["add"', 'trust = "verify"\ninclude = ["add"'))
    done = tether(ws, "mcp", "list", home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines()[1:]]
    assert [line[:3] for line in lines] == [
        ["t__add", "effect=once", "asks"],
        ["t__delete", "effect=once", "asks"],
        ["t__whoami", "effect=once", "asks"],
    ]
    assert "ungated" not in done.stdout
