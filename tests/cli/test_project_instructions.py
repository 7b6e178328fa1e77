"""AGENTS.md through the command line, as real processes: found at every level in order, journaled
in the run's first event, printed by ``tether show``, and never re-read into the run that wrote one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tether import RunStarted, replay
from tether.events import from_dict

pytestmark = pytest.mark.sandbox  # the workspace toolkit probes bubblewrap at start


def _levels(tmp_path: Path, home: Path) -> tuple[Path, list[Path]]:
    """A repository with AGENTS.md at its root, in a folder, and in the workspace below; and the user's."""
    repo = tmp_path / "repo"
    ws = repo / "pkg" / "app"
    ws.mkdir(parents=True)
    (repo / ".git").mkdir()
    user = home / ".config" / "tether"
    user.mkdir(parents=True)
    files = [user / "AGENTS.md", repo / "AGENTS.md", repo / "pkg" / "AGENTS.md", ws / "AGENTS.md"]
    for i, f in enumerate(files):
        f.write_text(f"rule {i}: from {f.parent.name}\n")
    return ws, files


def _run_id(text: str) -> str:
    return next(w for w in text.split() if len(w) == 32 and all(c in "0123456789abcdef" for c in w))


def test_agents_md_files_reach_the_model_nearest_last_and_tether_show_prints_them(
    tether, script, tmp_path: Path, home: Path
) -> None:
    ws, files = _levels(tmp_path, home)
    done = tether("run", "hello", "--model", script(["hi"]), "--json", cwd=ws)
    assert done.code == 0, done.err
    assert f"instructions from {', '.join(map(str, files))}" in done.err
    started = from_dict(json.loads(done.lines()[0]))
    assert isinstance(started, RunStarted)
    system = started.messages[0]
    assert system.role == "system"
    where = [system.text.index(f"--- {f} ---\nrule {i}: from {f.parent.name}") for i, f in enumerate(files)]
    assert where == sorted(where)  # the user's first, the workspace's last: nearer files win
    assert system.text.startswith("You are a careful assistant")  # the CLI's own instructions come first

    shown = tether("show", started.run_id, cwd=ws)
    assert shown.code == 0, shown.err
    lines = shown.lines()
    assert lines[1] == "instructions the model was given:"
    body = [line.removeprefix("  | ") for line in lines[2:] if line.startswith("  | ")]
    assert "\n".join(body) == system.text  # exactly the journaled text, line for line


def test_an_agents_md_the_agent_writes_is_not_read_into_its_own_run(tether, script, tmp_path: Path, home: Path) -> None:
    ws, _ = _levels(tmp_path, home)
    write = {"tool": "write_file", "args": {"path": "AGENTS.md", "content": "rule 9: obey the file the agent wrote\n"}}
    model = script([write, {"answer": "{last_tool_result}"}])
    paused = tether("run", "rewrite your rules", "--model", model, cwd=ws)
    rid = _run_id(paused.err)
    assert tether("approve", rid, cwd=ws).code == 0
    done = tether("resume", rid, "--model", model, cwd=ws)
    assert done.code == 0, done.err
    assert (ws / "AGENTS.md").read_text().startswith("rule 9")  # the write happened ...
    events = [from_dict(json.loads(line)) for line in tether("show", rid, "--json", cwd=ws).lines()]
    notebook = replay(events)
    assert "rule 3: from app" in notebook[0].text and "rule 9" not in notebook[0].text  # ... and was not read in
    assert sum(bool(ev.messages) for ev in events if isinstance(ev, RunStarted)) == 1  # journaled once

    again = tether("run", "and now?", "--model", script(["ok"]), "--json", cwd=ws)  # the next run reads it
    started = from_dict(json.loads(again.lines()[0]))
    assert isinstance(started, RunStarted) and "rule 9" in started.messages[0].text


def test_a_run_without_agents_md_says_nothing_about_it(tether, script, ws: Path) -> None:
    done = tether("run", "hello", "--model", script(["hi"]))
    assert done.code == 0 and "instructions from" not in done.err
