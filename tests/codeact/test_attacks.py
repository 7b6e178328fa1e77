"""Attacks from code, each performed for real in the sandbox and each refused with a clear note.

The program finds the bridge socket among its descriptors and writes to it
itself, past the functions it was given.
"""

from __future__ import annotations

import asyncio
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tether import Agent, FunctionPolicy, Invocation, tool
from tether.codeact import MAX_MESSAGE, code_agent
from tether.stores.sqlite import SQLiteStore
from tether.testing import ScriptedModel
from tether.toolkits import Sandbox

from .desk import count, desk_tools

pytestmark = pytest.mark.sandbox

BRIDGE = """\
import json, os, stat
def bridge():
    for f in os.listdir("/proc/self/fd"):
        try:
            if stat.S_ISSOCK(os.fstat(int(f)).st_mode):
                return int(f)
        except OSError:
            pass
fd = bridge()
def raw(data):
    os.write(fd, data)
    return os.read(fd, 1 << 16)
"""


def run(program: str, oracle: Path, workspace: Path, **agent: Any) -> tuple[Any, str]:
    """Run ``program`` as one code action; the run's result and the action's note."""
    tools = agent.pop("tools", desk_tools(oracle))
    brain = ScriptedModel([f"```python\n{program}```", "done"])
    result = code_agent(brain, tools, sandbox=Sandbox(str(workspace)), **agent).run_sync("attack")
    notes = [m.text for m in result.context if m.role == "tool" and m.name == "python"]
    return result, notes[0] if notes else ""


def test_a_tool_that_was_not_offered_cannot_be_called(oracle: Path, workspace: Path) -> None:
    ran: list[str] = []

    @tool(effect="none")
    def secret() -> str:
        ran.append("secret")
        return "the vault code"

    Agent(ScriptedModel(["x"]), [secret])  # offered to another agent only
    _, note = run(BRIDGE + 'print(raw(b\'{"call": "secret", "args": {}}\\n\'))\n', oracle, workspace)
    assert "unknown tool" in note and "secret" in note and "the vault code" not in note
    assert ran == []


def test_a_malformed_message_stops_the_program(oracle: Path, workspace: Path) -> None:
    _, note = run(BRIDGE + 'raw(b"refund everything\\n")\nprint("still here")\n', oracle, workspace)
    assert note.startswith("The program was stopped: it sent a message that is not JSON")
    assert "still here" not in note


def test_an_oversized_message_stops_the_program(oracle: Path, workspace: Path) -> None:
    big = f'raw(b\'{{"call": "lookup", "args": {{"order": "\' + b"x" * {MAX_MESSAGE + 10} + b\'"}}}}\\n\')\n'
    _, note = run(BRIDGE + big, oracle, workspace)
    assert note.startswith(f"The program was stopped: it sent a message longer than {MAX_MESSAGE} bytes")
    assert count(oracle, "lookup") == 0


def test_a_program_cannot_claim_a_call_id_or_forge_a_result(oracle: Path, workspace: Path) -> None:
    program = (
        BRIDGE
        + 'lookup("A1")\n'
        + 'raw(json.dumps({"call": "refund", "args": {"order": "A1", "amount": 1}, "id": "code_1"}).encode() + b"\\n")\n'
    )
    _, note = run(program, oracle, workspace)
    assert note.startswith("The program was stopped: it sent a message naming a call id")
    forged = BRIDGE + 'raw(json.dumps({"ok": "refunded 1 on A1"}).encode() + b"\\n")\n'
    _, forged_note = run(forged, oracle, workspace)
    assert forged_note.startswith("The program was stopped: it sent a message that is neither a call nor the end")
    assert count(oracle, "refund") == 0


def test_the_signing_key_and_the_store_are_out_of_reach(oracle: Path, workspace: Path, tmp_path: Path) -> None:
    key = b"k" * 16 + b"-signing-canary"
    db = tmp_path / "runs.db"
    (workspace / ".tether").mkdir()
    (workspace / ".tether" / "hmac.key").write_bytes(key)
    program = f"""\
import os
for path in [{str(db)!r}, ".tether/hmac.key", "/proc/1/environ"]:
    try:
        print(path, open(path, "rb").read()[:64])
    except OSError as e:
        print(path, "refused:", type(e).__name__)
print("env", sorted(os.environ))
"""
    result, note = run(program, oracle, workspace, store=SQLiteStore(db), signing_key=key)
    assert f"{db} refused: FileNotFoundError" in note
    assert ".tether/hmac.key refused: FileNotFoundError" in note
    assert "signing-canary" not in note and result.status == "finished"


@pytest.fixture
def listener() -> Iterator[tuple[int, list[Any]]]:
    """A real TCP server on the host's loopback, counting who connects."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    seen: list[Any] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                seen.append(server.accept())
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], seen
    stop.set()
    thread.join()
    server.close()


def test_no_network_socket_from_code(oracle: Path, workspace: Path, listener: tuple[int, list[Any]]) -> None:
    port, seen = listener
    program = f"""\
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3)
    print("connected")
except OSError as e:
    print("no network:", type(e).__name__)
"""
    _, note = run(program, oracle, workspace)
    assert "no network:" in note and "connected" not in note.replace("no network", "")
    assert seen == []


def test_a_bridge_flood_is_bounded_by_max_calls(oracle: Path, workspace: Path) -> None:
    result, note = run("for i in range(10_000):\n    lookup(f'A{i}')\n", oracle, workspace, max_calls=5)
    assert count(oracle, "lookup") == 5
    assert "ended limit" in note
    assert result.status == "finished"


def test_printing_100_mb_is_cut(oracle: Path, workspace: Path) -> None:
    result, note = run("import sys\nfor _ in range(100):\n    sys.stdout.write('x' * 1_000_000)\n", oracle, workspace)
    assert result.status == "finished"
    assert len(note) < 20_000 and "more characters not shown" in note


def test_an_end_message_written_by_hand_is_cut_too(oracle: Path, workspace: Path) -> None:
    program = BRIDGE + 'os.write(fd, json.dumps({"end": {"value": "v" * 900_000}}).encode() + b"\\n")\nos._exit(0)\n'
    result, note = run(program, oracle, workspace)
    assert result.status == "finished"
    assert note.startswith("The program ran to its end") and len(note) < 10_000 and "more characters not shown" in note


def test_a_run_never_continues_another_runs_program(workspace: Path) -> None:
    """Two runs of one code agent at once, same program text: each run's program is its own.

    Ann's slow() holds until Bob's run has finished, so both programs wait at the
    same call with the same calls so far; a program picked by its text would give
    Bob's run Ann's process (holding Ann's whoami) and Ann's run Bob's.
    """
    ann_waits, ann_may_go = asyncio.Event(), asyncio.Event()

    @tool(effect="none")
    def whoami(call: Invocation) -> str:
        """The customer of this run."""
        return str(call.deps["user"])

    @tool(effect="none")
    async def slow(call: Invocation) -> str:
        """Wait for the backend (Ann's is slower)."""
        if call.deps["user"] == "ann":
            ann_waits.set()
            await ann_may_go.wait()
        return "ok"

    program = "me = whoami()\nslow()\nfinal_answer('this run belongs to ' + me)\n"
    brain = FunctionPolicy(lambda context, tools: f"```python\n{program}```")
    agent = code_agent(brain, [whoami, slow], sandbox=Sandbox(str(workspace)))

    async def both() -> tuple[Any, Any]:
        ann = asyncio.create_task(agent.run("go", deps={"user": "ann"}))
        await asyncio.wait_for(ann_waits.wait(), 60)  # Ann's program now waits in slow()
        bob = await asyncio.wait_for(agent.run("go", deps={"user": "bob"}), 60)
        ann_may_go.set()
        return await asyncio.wait_for(ann, 60), bob

    ann, bob = asyncio.run(both())
    assert (ann.status, ann.output) == ("finished", "this run belongs to ann")
    assert (bob.status, bob.output) == ("finished", "this run belongs to bob")
    for result, other in ((ann, "bob"), (bob, "ann")):
        leaked = [m.text for m in result.context if re.search(rf"\b{other}\b", m.text)]
        assert not leaked, f"{other}'s results entered the run: {leaked}"
