"""The seed's demo, end to end: an agent explores a project through the sandboxed tools.

A scripted policy lists the directory, counts lines of code with ``shell`` (in the
real sandbox), writes a summary file and reads it back. The two tools that change
things pause the run for a human approval; the reads do not.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tether import Agent
from tether.testing import Action, ScriptedModel
from tether.toolkits import workspace_tools

pytestmark = pytest.mark.sandbox


async def test_agent_lists_counts_writes_and_reads_back(workspace: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("import os\n\nprint(os.getcwd())\n")
    (workspace / "src" / "util.py").write_text("def add(a, b):\n    return a + b\n")
    summary = "# Summary\n\n2 Python files, 5 lines of code.\n"
    model = ScriptedModel(
        [
            Action("list_dir", {"path": "src"}, reasoning="see what is there"),
            Action("shell", {"command": "cat src/*.py | wc -l"}, reasoning="count lines"),
            Action("write_file", {"path": "SUMMARY.md", "content": summary}),
            Action("read_file", {"path": "SUMMARY.md"}),
            "The project has 2 Python files with 5 lines; see SUMMARY.md.",
        ]
    )
    agent = Agent(model, workspace_tools(str(workspace)))
    approved: list[str] = []
    result = await agent.run("Count the lines of code in this project and write a summary.")
    while result.status == "paused":  # a human approves each gated call, then the run resumes
        state = result.state
        for pending in result.items:
            approved.append(pending.call.name)
            state = state.approve(pending.call.id, by="test")
        result = await agent.run(state)

    assert result.status == "finished", result.error
    model.assert_consumed()
    replies = [m.content for m in result.context if m.role == "tool"]
    assert replies == [
        "app.py  (30 bytes)\nutil.py  (32 bytes)",
        "5",
        "created 'SUMMARY.md' (44 bytes)",
        summary,
    ]
    assert approved == ["shell", "write_file"]
    assert (workspace / "SUMMARY.md").read_text() == summary
    assert result.output == "The project has 2 Python files with 5 lines; see SUMMARY.md."
