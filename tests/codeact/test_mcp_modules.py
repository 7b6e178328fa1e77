"""MCP servers as modules from code: discovered on demand, results kept in variables, annotations still gate.

Real servers: one written here (``notes_server.py``, stdio) and ``mcp-server-time`` from PyPI.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tether.codeact import code_agent
from tether.mcp import McpClient, McpServer
from tether.testing import ScriptedModel
from tether.toolkits import Sandbox

from .desk import count

sys.path.insert(0, str(Path(__file__).parents[1] / "mcp"))
from mcp_support import third_party

pytest.importorskip("mcp", reason="needs tether[mcp]")
pytestmark = pytest.mark.sandbox
NOTES = Path(__file__).with_name("notes_server.py")

DISCOVER = """\
```python
print(servers.list())
print(servers.describe("notes"))
```"""

CLEAN_UP = """\
```python
ids = servers.notes.search_notes("overdue")["ids"]
texts = [servers.notes.read_note(i) for i in ids]   # kept in variables, never printed
print(len(texts), "overdue notes")
print(servers.notes.delete_note(ids[0]))
now = servers.time.get_current_time(timezone="UTC")
final_answer({"deleted": ids[0], "checked": len(texts), "tz": now["timezone"]})
```"""


def test_a_program_discovers_the_servers_and_a_destructive_call_pauses(oracle: Path, workspace: Path) -> None:
    time_server = third_party("mcp-server-time")
    servers = [
        McpServer("notes", command=sys.executable, args=(str(NOTES),), env={"ORACLE": str(oracle)}),
        McpServer("time", command=time_server),
    ]
    with McpClient(servers) as client:
        model = ScriptedModel([DISCOVER, CLEAN_UP])
        modules = {"notes": client.tools_sync("notes"), "time": client.tools_sync("time")}
        agent = code_agent(model, sandbox=Sandbox(str(workspace)), servers=modules)
        assert "search_notes" not in str(agent.instructions)  # no catalogue up front, only how to look
        paused = agent.run_sync("Delete the first overdue note.")
        assert paused.status == "paused"
        listed = paused.context[3].text
        assert "['notes', 'time']" in listed and "def servers.notes.delete_note(note_id: str)" in listed
        [item] = paused.items
        assert item.call.name == "notes__delete_note" and count(oracle, "delete_note") == 0
        done = agent.run_sync(paused.state.approve(item.id))
    assert done.status == "finished", done.error
    assert done.output is not None and '"deleted": "n0"' in done.output and '"tz": "UTC"' in done.output
    assert count(oracle, "delete_note") == 1
    # The notes' texts stayed in the program: the model's notebook holds the count, not the notes.
    assert "invoice overdue" not in "".join(m.text for m in done.context)
