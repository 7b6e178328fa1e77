"""``tether chat`` (and ``tether run`` at a terminal), driven through a pseudo-terminal.

pexpect gives the process a real terminal, so the command shows its live view
(spinner, streamed words) and asks inline before a gated tool.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pexpect
import pytest

pytestmark = pytest.mark.sandbox


def _prompt(child: pexpect.spawn, text: str) -> None:
    child.expect_exact("you> ")
    child.sendline(text)


def test_a_conversation_with_approvals_denials_edits_and_clear(spawn, script, ws: Path) -> None:
    model = script(
        [
            "Hi! I can read and change files here.",
            {"tool": "write_file", "args": {"path": "note.txt", "content": "hello"}, "reasoning": "writing it"},
            {"answer": "wrote it: {last_tool_result}"},
            {"tool": "shell", "args": {"command": "rm note.txt"}},
            {"answer": "not deleted: {last_tool_result}"},
            {"tool": "write_file", "args": {"path": "other.txt", "content": "draft"}},
            {"answer": "{last_tool_result}"},
        ]
    )
    chat = spawn("chat", "--model", model)
    _prompt(chat, "hello")
    chat.expect_exact("agent: Hi! I can read and change files here.")

    _prompt(chat, "write a note")
    chat.expect_exact('"content": "hello"')
    chat.expect_exact("allow? [y]es, [n]o, [e]dit: ")
    chat.sendline("y")
    chat.expect_exact("agent: wrote it: created 'note.txt' (5 bytes)")
    assert (ws / "note.txt").read_text() == "hello"

    _prompt(chat, "now delete it")
    chat.expect_exact("allow? [y]es, [n]o, [e]dit: ")
    chat.sendline("n")
    chat.expect_exact("tell the model why (optional): ")
    chat.sendline("keep it, please")
    chat.expect_exact("agent: not deleted: a human denied this call: keep it, please")
    assert (ws / "note.txt").exists()

    _prompt(chat, "write another")
    chat.expect_exact("allow? [y]es, [n]o, [e]dit: ")
    chat.sendline("e")
    chat.expect_exact("new arguments as JSON (empty line: back): ")
    chat.sendline('{"path": "other.txt", "content": "final"}')
    chat.expect_exact("created 'other.txt' (5 bytes)")
    assert (ws / "other.txt").read_text() == "final"

    _prompt(chat, "clear")
    chat.expect_exact("(conversation cleared)")
    _prompt(chat, "hello again")  # a fresh conversation: the script starts over
    chat.expect_exact("agent: Hi! I can read and change files here.")
    _prompt(chat, "exit")
    chat.expect(pexpect.EOF)
    chat.close()
    assert chat.exitstatus == 0


def test_ctrl_c_cancels_a_slow_tool_and_the_chat_goes_on(spawn, script, ws: Path) -> None:
    marker = "29.123"  # a sleep nobody else runs, to look for it afterwards
    model = script(
        [
            {"tool": "shell", "args": {"command": f"echo started > started.txt; sleep {marker}"}},
            {"answer": "the call said: {last_tool_result}"},
        ]
    )
    chat = spawn("chat", "--model", model)
    _prompt(chat, "take your time")
    chat.expect_exact("allow? [y]es, [n]o, [e]dit: ")
    chat.sendline("y")
    _wait_for(lambda: (ws / "started.txt").exists())
    chat.sendintr()
    chat.expect_exact("(turn cancelled)")
    _wait_for(lambda: not _processes_with(f"sleep {marker}"))

    _prompt(chat, "are you there?")  # the model is told the call never reported back
    chat.expect_exact("agent: the call said: the user cancelled this call before it reported back")
    chat.expect_exact("you> ")
    chat.sendintr()  # at the prompt: a fresh line, not an exit
    _prompt(chat, "")
    chat.sendeof()
    chat.expect(pexpect.EOF)
    chat.close()
    assert chat.exitstatus == 0


def test_run_at_a_terminal_asks_inline(spawn, script, ws: Path) -> None:
    model = script(
        [
            {"tool": "shell", "args": {"command": "echo hi > hi.txt && cat hi.txt"}},
            {"answer": "it printed {last_tool_result}"},
        ]
    )
    run = spawn("run", "say hi", "--model", model)
    run.expect_exact('"command": "echo hi > hi.txt && cat hi.txt"')
    run.expect_exact("allow? [y]es, [n]o, [e]dit: ")
    run.sendline("y")
    run.expect_exact("final answer: it printed hi")
    run.expect(pexpect.EOF)
    run.close()
    assert run.exitstatus == 0
    assert (ws / "hi.txt").read_text() == "hi\n"


def _wait_for(check: Callable[[], Any], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {check}")
        time.sleep(0.05)


def _processes_with(text: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if text.encode() in cmdline:
                found.append(int(pid))
    return found


def test_ctrl_c_while_the_model_streams_cancels_the_turn(spawn) -> None:
    from providers.fakeserver import FakeServer, Reply, openai_events, turn

    with FakeServer() as server:
        story = "Once upon a time " + "and then " * 40  # ~50 events, 0.3 s apart
        slow = Reply.sse(openai_events(turn(story)), event_delay=0.3)
        server.push(slow, turn("The end."))
        chat = spawn("chat", "--model", "fake-model", "--base-url", server.openai_url)
        _prompt(chat, "tell me a story")
        chat.expect_exact("Once upo")  # the first words are on screen: the model is mid-stream
        chat.sendintr()
        chat.expect_exact("(turn cancelled)")
        _prompt(chat, "a short one, please")
        chat.expect_exact("agent: The end.")
        _prompt(chat, "exit")
        chat.expect(pexpect.EOF)
        server.assert_consumed()
    asked = [m["content"] for m in server.requests[1].json()["messages"] if m["role"] == "user"]
    assert asked == ["tell me a story", "a short one, please"]  # the conversation went on


APPEND = {"tool": "shell", "args": {"command": "echo ran >> count.txt && wc -l < count.txt"}}


def _runs(tether) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    return [json.loads(line) for line in tether("runs", "--json").lines()]


def test_the_approval_question_takes_whole_words_only(spawn, script, ws: Path) -> None:
    run = spawn("run", "count", "--model", script([APPEND, {"answer": "{last_tool_result}"}]))
    for answer in ("yikes, no!", "exit", "Yeah", "edit it"):
        run.expect_exact("allow? [y]es, [n]o, [e]dit: ")
        run.sendline(answer)
        run.expect_exact("please answer yes, no or edit (or y, n or e)")
    run.expect_exact("allow? [y]es, [n]o, [e]dit: ")
    run.sendline("edit")
    run.expect_exact("new arguments as JSON (empty line: back): ")
    run.sendline("")  # changed my mind: back to the question
    run.expect_exact("allow? [y]es, [n]o, [e]dit: ")
    run.sendline("NO")
    run.expect_exact("tell the model why (optional): ")
    run.sendline("not today")
    run.expect_exact("final answer: a human denied this call: not today")
    run.expect(pexpect.EOF)
    run.close()
    assert run.exitstatus == 0
    assert not (ws / "count.txt").exists()


def test_piped_input_that_is_no_answer_leaves_the_chat_run_paused(tether, script, ws: Path) -> None:
    model = script([APPEND, {"answer": "lines now: {last_tool_result}"}])
    done = tether("chat", "--model", model, stdin="count, please\nexit\n")
    assert done.code == 0, done.err
    assert "please answer yes, no or edit" in done.out  # `exit` is not an answer
    assert not (ws / "count.txt").exists()
    [paused] = _runs(tether)
    assert (paused["status"], paused["decided"]) == ("paused", False)
    assert f"  then:     tether resume {paused['run_id']}" in done.out.splitlines()
    assert tether("approve", paused["run_id"]).code == 0
    resumed = tether("resume", paused["run_id"])
    assert resumed.code == 0, resumed.err
    assert resumed.lines()[-1] == "  final answer: lines now: 1"


def test_ctrl_c_at_the_approval_question_pauses_the_chat_run_and_the_chat_goes_on(
    spawn, tether, script, ws: Path
) -> None:
    model = script([APPEND, {"answer": "lines now: {last_tool_result}"}])
    chat = spawn("chat", "--model", model)
    _prompt(chat, "count, please")
    chat.expect_exact("allow? [y]es, [n]o, [e]dit: ")
    chat.sendintr()
    chat.expect_exact("(left undecided)")
    chat.expect_exact("then:     tether resume ")
    _prompt(chat, "are you there?")  # the model is told the call has not run
    chat.expect_exact("agent: lines now: the user has not decided on this call yet (its run is paused); it has not run")
    _prompt(chat, "exit")
    chat.expect(pexpect.EOF)
    assert not (ws / "count.txt").exists()
    paused = [r for r in _runs(tether) if r["task"] == "count, please"]
    assert [r["status"] for r in paused] == ["paused"]
    assert tether("approve", paused[0]["run_id"]).code == 0
    assert tether("resume", paused[0]["run_id"]).lines()[-1] == "  final answer: lines now: 1"
