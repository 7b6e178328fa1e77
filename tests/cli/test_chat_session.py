"""``tether chat --session NAME``: the conversation is the store's, so it goes on after a restart."""

from __future__ import annotations

import pexpect
import pytest

pytestmark = pytest.mark.sandbox


def _prompt(child: pexpect.spawn, text: str) -> None:
    child.expect_exact("you> ")
    child.sendline(text)


def _leave(child: pexpect.spawn) -> None:
    _prompt(child, "exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_a_chat_session_resumes_after_a_restart_and_refuses_while_its_last_run_waits(spawn, script) -> None:
    # The scripted brain answers by how many replies the notebook already holds: only a
    # notebook carried over from the first process makes the second one answer reply #2.
    model = script(
        [
            "Noted: the code is 4711.",
            "You told me the code before the restart.",
            {"tool": "write_file", "args": {"path": "code.txt", "content": "4711"}},
            {"answer": "saved: {last_tool_result}"},
        ]
    )
    first = spawn("chat", "--model", model, "--session", "support-7")
    first.expect_exact("(a new session 'support-7')")
    _prompt(first, "remember the code 4711")
    first.expect_exact("agent: Noted: the code is 4711.")
    _leave(first)

    second = spawn("chat", "--model", model, "--session", "support-7")
    second.expect_exact("(continuing session 'support-7': 1 run(s)")
    _prompt(second, "what did I tell you?")
    second.expect_exact("agent: You told me the code before the restart.")
    _prompt(second, "clear")
    second.expect_exact("is kept in the store")
    _prompt(second, "save it to a file")
    second.expect_exact("allow? [y]es, [n]o, [e]dit: ")
    second.sendintr()  # left undecided: the run stays paused
    second.expect_exact("(left undecided)")
    _prompt(second, "are you there?")
    second.expect_exact("cannot start a new run: its last run")
    second.expect_exact("waits for a decision")
    _leave(second)
