"""Escape sequences in a workspace file, a command's output or the model's words never reach the terminal raw.

The payload sets the terminal's colours (OSC 10/11), its clipboard (OSC 52)
and title (OSC 0), clears the screen (CSI 2J, also as the 8-bit C1 CSI) and
reverses the text direction (U+202E). It reaches the operator through
``read_file``, a sandboxed ``shell`` command, ``python`` and the model's own
reasoning, right before an approval prompt.
"""

from __future__ import annotations

import json
from pathlib import Path

import pexpect
import pytest

pytestmark = pytest.mark.sandbox

PAYLOAD = "\x1b]10;#ff0000\x07\x1b]11;#00ff00\x07\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x1b]0;pwned\x07\u009b2J\u202eevil"
RAW = ("\x1b]", "\x1b[2J", "\x07", "\u009b", "\u202e")  # none of these may be printed
SHOWN = "^[]10;#ff0000^G^[]11;#00ff00^G^[]52;c;cm0gLXJmIH4=^G^[[2J^[]0;pwned^GM-^[2J<U+202E>evil"


def _script(script) -> str:  # type: ignore[no-untyped-def]
    return script(
        [
            {"tool": "read_file", "args": {"path": "evil.txt"}, "reasoning": "reading " + PAYLOAD},
            {"tool": "shell", "args": {"command": "cat evil.txt; echo '" + PAYLOAD + "'"}},
            {"tool": "python", "args": {"code": "print(open('evil.txt').read())"}},
            {"answer": "the file says {last_tool_result}"},
        ]
    )


def _assert_clean(text: str) -> None:
    for raw in RAW:
        assert raw not in text, f"{raw!r} reached the terminal"


def test_plain_output_shows_control_characters_like_cat_v(tether, script, ws: Path) -> None:
    (ws / "evil.txt").write_text("notes " + PAYLOAD)
    model = _script(script)
    paused = tether("run", "read evil.txt", "--model", model)
    assert paused.code == 3, paused.err
    _assert_clean(paused.out + paused.err)
    assert f"    -> read_file returned: notes {SHOWN}" in paused.lines()
    assert f"  agent thought: reading {SHOWN}" in paused.lines()
    rid = paused.err.split()[2]
    tether("approve", rid)
    again = tether("resume", rid)
    tether("approve", rid)
    done = tether("resume", rid)
    assert done.code == 0, done.err
    shown = tether("show", rid)
    for out in (again, done, shown):
        _assert_clean(out.out + out.err)
    assert f"    -> shell returned: notes {SHOWN}" in again.out
    assert f"    -> python returned: notes {SHOWN}" in done.out
    assert f"  final answer: the file says notes {SHOWN}" in done.lines()


def test_json_output_escapes_them_and_keeps_them(tether, script, ws: Path) -> None:
    (ws / "evil.txt").write_text("notes " + PAYLOAD)
    done = tether("run", "read evil.txt", "--model", _script(script), "--json")
    assert done.code == 3, done.err
    _assert_clean(done.out + done.err)
    results = [e for e in map(json.loads, done.lines()) if e["kind"] == "tool-finished"]
    assert results[0]["result"]["content"] == "notes " + PAYLOAD  # lossless
    shown = tether("show", done.err.split()[2], "--json")
    _assert_clean(shown.out)
    assert "notes " + PAYLOAD in [e.get("result", {}).get("content") for e in map(json.loads, shown.lines())]


def test_the_terminal_view_and_the_approval_prompt_cannot_be_repainted(spawn, script, ws: Path) -> None:
    (ws / "evil.txt").write_text("notes " + PAYLOAD)
    run = spawn("run", "read evil.txt", "--model", _script(script))
    run.expect_exact("allow? [y]es, [n]o, [e]dit: ")
    before = run.before
    _assert_clean(before)
    assert f"-> read_file returned: notes {SHOWN}" in before
    assert "cat evil.txt; echo '\\u001b]10;#ff0000\\u0007" in before  # the arguments, as JSON escapes them
    assert "M-^[2J<U+202E>evil'" in before
    run.sendline("yes")
    run.expect_exact("allow? [y]es, [n]o, [e]dit: ")
    _assert_clean(run.before)
    assert f"-> shell returned: notes {SHOWN}" in run.before
    run.sendline("yes")
    run.expect(pexpect.EOF)
    _assert_clean(run.before)
    assert f"final answer: the file says notes {SHOWN}" in run.before


def test_show_and_runs_never_print_a_model_chosen_tool_name_raw(tether, script, ws: Path) -> None:
    name = "x\x1b]0;OWNED-TITLE\x07\x1b]52;c;cm0gLXJmIH4K\x07\x1b[2J\ud800"
    model = script([{"tool": name, "args": {}}, {"answer": "done"}])
    tether("run", "hi", "--model", model)
    rid = tether("runs", "--json").out.splitlines()[0]
    rid = json.loads(rid)["run_id"]
    shown = tether("show", rid)
    assert shown.code == 0, shown.err
    assert "\x1b" not in shown.out and "\x07" not in shown.out
    assert "^[]0;OWNED-TITLE^G" in shown.out
