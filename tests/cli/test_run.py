"""``tether run`` end to end, as a real process: the trace, JSON lines, exit statuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tether.events import Finished, ModelReplied, RunStarted, Token, ToolFinished, from_dict

pytestmark = pytest.mark.sandbox  # the workspace toolkit probes bubblewrap at start


def test_run_prints_the_trace_and_the_whole_final_answer(tether, script) -> None:
    model = script(
        [
            {"tool": "read_file", "args": {"path": "notes.txt"}, "reasoning": "let me read the notes"},
            "The notes say:\nbuy milk",
        ]
    )
    done = tether("run", "What do my notes say?", "--model", model)
    assert done.code == 0, done.err
    assert done.lines() == [
        'you asked: "What do my notes say?"',
        "  agent thought: let me read the notes",
        '  agent calls: read_file({"path": "notes.txt"})',
        "    -> read_file returned: buy milk",
        "  final answer: The notes say:",
        "buy milk",
    ]
    assert done.err == ""


def test_run_json_prints_every_event_including_streamed_tokens(tether, script) -> None:
    model = script([{"tool": "list_dir", "args": {}}, "two files and a workspace"])
    done = tether("run", "list", "--model", model, "--json")
    assert done.code == 0, done.err
    events = [from_dict(json.loads(line)) for line in done.lines()]
    kinds = [ev.kind for ev in events if not isinstance(ev, Token)]
    assert kinds == [
        "run-started",
        "model-replied",
        "tool-started",
        "tool-finished",
        "model-replied",
        "finished",
    ]
    tokens = "".join(ev.text for ev in events if isinstance(ev, Token))
    assert tokens == "two files and a workspace"
    started = events[0]
    assert isinstance(started, RunStarted) and started.messages[-1].content == "list"
    result = next(ev for ev in events if isinstance(ev, ToolFinished))
    assert "notes.txt" in result.result.content
    assert isinstance(events[-1], Finished) and events[-1].output == tokens


def test_task_can_come_from_stdin(tether, script) -> None:
    done = tether("run", "-", "--model", script(["ok"]), stdin="a task\nover two lines\n")
    assert done.code == 0, done.err
    assert done.lines()[0] == 'you asked: "a task over two lines"'


def test_a_limit_ends_the_run_with_status_1_and_one_line(tether, script) -> None:
    model = script([{"tool": "list_dir", "args": {}}, {"tool": "list_dir", "args": {}}, "done"])
    done = tether("run", "loop", "--model", model, "--max-steps", "1")
    assert done.code == 1
    assert done.err.splitlines() == [f"run {_run_id(done)} stopped (limit-reached): the steps limit of 1 was reached"]


def test_a_script_that_runs_out_is_a_one_line_error(tether, script) -> None:
    done = tether("run", "hi", "--model", script([{"tool": "list_dir", "args": {}}]))
    assert done.code == 2
    assert done.err.startswith("error: script ") and "needs reply #2" in done.err
    assert "Traceback" not in done.err


def test_a_paused_run_says_how_to_decide_and_exits_3(tether, script, ws: Path) -> None:
    model = script([{"tool": "write_file", "args": {"path": "out.txt", "content": "x"}}, "ok"])
    done = tether("run", "write it", "--model", model)  # stdin is not a terminal: no questions
    assert done.code == 3
    rid = _run_id(done)
    assert done.lines()[-2:] == ["    ?? write_file waits for a human decision", "  (paused: approval)"]
    assert done.err.splitlines() == [
        f"paused: run {rid} waits for a decision on 1 call(s):",
        '  call_1_0  write_file {"path": "out.txt", "content": "x"}',
        f"  approve:  tether approve {rid} call_1_0",
        f"  deny:     tether deny {rid} call_1_0 [-m MESSAGE]",
        f"  then:     tether resume {rid}",  # the run recorded its brain: no need to repeat it
    ]
    assert not (ws / "out.txt").exists()


def test_json_mode_pauses_instead_of_asking(tether, script) -> None:
    model = script([{"tool": "write_file", "args": {"path": "a.txt", "content": "x"}}])
    done = tether("run", "write", "--model", model, "--json")
    assert done.code == 3
    last = from_dict(json.loads(done.lines()[-1]))
    assert last.kind == "paused" and last.call_ids == ("call_1_0",)
    assert isinstance(from_dict(json.loads(done.lines()[-3])), ModelReplied)


def _run_id(done) -> str:  # type: ignore[no-untyped-def]
    for word in (done.err + done.out).split():
        if len(word) == 32 and all(c in "0123456789abcdef" for c in word):
            return word
    raise AssertionError(f"no run id in {done!r}")
