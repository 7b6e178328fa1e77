"""``tether chat`` (and ``tether run`` at a terminal), driven through a pseudo-terminal.

pexpect gives the process a real terminal, so the command shows its live view
(spinner, streamed words) and asks inline before a gated tool.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

pytestmark = pytest.mark.sandbox


@pytest.fixture
def spawn(cli_env, ws: Path) -> Iterator[Callable[..., pexpect.spawn]]:
    children: list[pexpect.spawn] = []

    def start(*args: str) -> pexpect.spawn:
        env = cli_env(TERM="xterm", COLUMNS="200", LINES="40")
        child = pexpect.spawn(
            sys.executable,
            ["-m", "tether", *args],
            cwd=str(ws),
            env=env,
            encoding="utf-8",
            dimensions=(40, 200),
            timeout=30,
        )
        children.append(child)
        return child

    yield start
    for child in children:
        child.close(force=True)


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
    chat.expect_exact("new arguments as JSON: ")
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
