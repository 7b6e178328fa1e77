"""The README's Python examples and every example script run, so they never rot."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_python_blocks_run_in_order() -> None:
    # ```python blocks run; ```py blocks are shown only (they need a key, a server or a path).
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 5
    namespace: dict[str, object] = {"__name__": "readme"}
    for i, block in enumerate(blocks):
        try:
            # dont_inherit: the blocks run as a user runs them, without this file's `from __future__` flags
            exec(compile(block, f"README.md block {i + 1}", "exec", dont_inherit=True), namespace)
        except Exception as exc:  # pragma: no cover - the message says which block
            pytest.fail(f"README block {i + 1} failed: {type(exc).__name__}: {exc}\n{block}")


def _run(*args: str, cwd: Path = ROOT, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=cwd, input=stdin, capture_output=True, text=True, timeout=60)


def test_refund_example_approved_and_denied() -> None:
    yes = _run("examples/refund_agent.py", "--yes")
    assert yes.returncode == 0, yes.stderr
    assert "-> issue_refund returned: $79 refunded" in yes.stdout
    assert "final answer: Good news, A1234 qualifies" in yes.stdout
    no = _run("examples/refund_agent.py", stdin="n\n")
    assert no.returncode == 0, no.stderr
    assert "issue_refund failed: a human denied this call" in no.stdout


def test_agent_as_tool_example() -> None:
    out = _run("examples/agent_as_tool.py")
    assert out.returncode == 0, out.stderr
    assert "-> researcher returned: Order B77 left the warehouse" in out.stdout


def test_refund_across_three_processes(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    start = _run(str(ROOT / "examples/refund_durable.py"), "start", "--db", db)
    assert start.returncode == 0, start.stderr
    run_id = start.stdout.strip()
    approve = _run(str(ROOT / "examples/refund_durable.py"), "approve", run_id, "--db", db)
    assert approve.returncode == 0 and "approved 1 call" in approve.stdout
    finish = _run(str(ROOT / "examples/refund_durable.py"), "finish", run_id, "--db", db, cwd=tmp_path)
    assert finish.returncode == 0, finish.stderr
    assert finish.stdout.count("-> issue_refund returned") == 1
    assert "final answer: Good news" in finish.stdout
