"""Skills through the command line, as real processes: the workspace's and the user's skill folders,
a skill's script run by the sandboxed shell, a bad front matter named, and ``tether show``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tether import RunStarted
from tether.events import from_dict

pytestmark = pytest.mark.sandbox

SCRIPT = "import os, socket\nprint(f'report ready on {socket.gethostname()} as uid {os.getuid()}')\n"


def _skill(root: Path, name: str, description: str) -> Path:
    folder = root / name
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\nRun scripts/report.py with python3.\n"
    )
    (folder / "scripts" / "report.py").write_text(SCRIPT)
    return folder


def _run_id(text: str) -> str:
    return next(w for w in text.split() if len(w) == 32 and all(c in "0123456789abcdef" for c in w))


def test_a_user_skill_is_loaded_and_its_script_runs_in_the_sandbox(tether, script, ws: Path, home: Path) -> None:
    user_skill = _skill(home / ".config" / "tether" / "skills", "weekly-report", "Write the weekly report.")
    _skill(ws / ".agents" / "skills", "tidy-notes", "Tidy the notes file.")
    command = f"python3 {user_skill}/scripts/report.py"
    model = script(
        [
            {"tool": "load_skill", "args": {"name": "weekly-report"}},
            {"tool": "shell", "args": {"command": command}},
            {"answer": "{last_tool_result}"},
        ]
    )
    paused = tether("run", "the weekly report please", "--model", model)
    assert "skills: weekly-report, tidy-notes" in paused.err
    rid = _run_id(paused.err)
    assert tether("approve", rid).code == 0  # the shell call, like any other, waits for a person
    done = tether("resume", rid, "--model", model)
    assert done.code == 0, done.err
    answer = done.lines()[-1]
    assert answer.startswith("  final answer: report ready on sandbox as uid ")  # bubblewrap's host name
    assert answer.split()[-1] != str(os.getuid())  # and not as tether's own user
    assert not (user_skill / "scripts" / "__pycache__").exists()  # the sandbox could not write there

    shown = tether("show", rid).out
    assert (
        "  | - weekly-report: Write the weekly report." in shown and "  | - tidy-notes: Tidy the notes file." in shown
    )
    assert '  agent calls: load_skill({"name": "weekly-report"})' in shown
    events = [from_dict(json.loads(line)) for line in tether("show", rid, "--json").lines()]
    first = events[0]
    assert isinstance(first, RunStarted) and "Run scripts/report.py" not in first.messages[0].text


def test_a_bad_skill_front_matter_stops_the_command_naming_the_file(tether, script, ws: Path) -> None:
    folder = ws / ".agents" / "skills" / "broken"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: broken\n---\nno description\n")
    done = tether("run", "hi", "--model", script(["hi"]))
    assert done.code == 2 and f"{folder / 'SKILL.md'}: description must be text" in done.err
