"""The ``charge.py`` walk-through in docs/durability.md does what the page says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).parents[2] / "docs" / "durability.md"


def script() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    return next(b for b in blocks if b.startswith('"""charge.py'))


def step(cwd: Path, arg: str, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TETHER_CRASH_AT"}
    if crash_at:
        env["TETHER_CRASH_AT"] = crash_at
    return subprocess.run(
        [sys.executable, "charge.py", arg], cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip


def test_charge_walkthrough_skip_after_the_charge_and_retry_before_it(tmp_path: Path) -> None:
    for case in ("skip", "retry"):
        cwd = tmp_path / case
        cwd.mkdir()
        (cwd / "charge.py").write_text(script())
        point = "after_tool_return" if case == "skip" else "after_started_commit"
        killed = step(cwd, "start", point)
        assert killed.returncode == -9
        assert killed.stdout == ("(charging $42)\n" if case == "skip" else "")
        assert step(cwd, "resume").stdout == "needs-decision ['charge']\n"
        done = step(cwd, case).stdout
        if case == "skip":
            assert done == (
                "finished done: this call was interrupted and its outcome is unknown; "
                "a human chose not to run it again: not charged again\n"
            )
        else:
            assert done == "(charging $42)\nfinished done: charged $42\n"
