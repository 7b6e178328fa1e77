"""A long tool result in a command-line run goes to a workspace file (``offload_over`` in the config)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.sandbox


def _run_id(text: str) -> str:
    return next(w for w in text.split() if len(w) == 32 and all(c in "0123456789abcdef" for c in w))


def test_a_long_shell_output_is_saved_to_a_file_and_read_back_by_offset(tether, script, ws: Path) -> None:
    (ws / ".tether").mkdir(exist_ok=True)
    (ws / ".tether" / "config.toml").write_text("offload_over = 5000\n")
    model = script(
        [
            {"tool": "shell", "args": {"command": "seq 1 20000"}},
            {"answer": "{last_tool_result}"},
        ]
    )
    rid = _run_id(tether("run", "count to 20000", "--model", model).err)
    assert tether("approve", rid).code == 0
    done = tether("resume", rid, "--model", model)
    assert done.code == 0, done.err
    saved = next((ws / ".tool-results" / rid).iterdir())
    full = saved.read_text()
    assert full.splitlines()[-1] == "20000" or "20000\n" in full  # the whole output is in the file
    answer = done.out[done.out.index("final answer: ") :]
    assert answer.startswith(f"final answer: [saved to .tool-results/{rid}/{saved.name}: the {len(full):,}-character")
    assert len(answer) < 1000  # a preview of 500 characters, not the 108 kB

    reader = script(
        [
            {"tool": "read_file", "args": {"path": f".tool-results/{rid}/{saved.name}", "offset": 100_000}},
            {"answer": "{last_tool_result}"},
        ]
    )
    shown = tether("run", "read the end", "--model", reader)
    assert shown.code == 0, shown.err
    assert shown.out.endswith(f"of {len(full.encode())}; the end of the file]\n")
    assert "\n19999\n20000\n" in shown.out  # the window from byte 100,000 holds the end of the output
