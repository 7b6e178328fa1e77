"""Every Python example of the README and docs/, each on its own, and every example script run, so none rots."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python\n(.*?)^```", flags=re.S | re.M)


def python_blocks() -> list[tuple[str, str]]:
    """Every ```python block of the README and docs/ as ``(page:line, code)``; ```py blocks are shown
    only (they need a key, a server, the model's weights or a path of yours)."""
    blocks = []
    for page in PAGES:
        text = page.read_text()
        for match in FENCE.finditer(text):
            before = text.count("\n", 0, match.start()) + 1  # the fence's line: the code starts after it
            blocks.append((f"{page.relative_to(ROOT)}:{before + 1}", "\n" * before + match.group(1)))
    return blocks


BLOCKS = python_blocks()


def test_no_python_block_was_lost() -> None:
    count = len(BLOCKS)  # every block the pages had when the collector was written; a page may only add
    assert count >= 32


@pytest.mark.parametrize(("where", "code"), BLOCKS, ids=[where for where, _ in BLOCKS])
def test_each_python_block_runs_on_its_own(
    where: str, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh namespace per block, in an empty working directory: no block leans on another.
    The code keeps its place in the page, so a traceback names the page's own line."""
    monkeypatch.chdir(tmp_path)
    page = where.rpartition(":")[0]
    # dont_inherit: the block runs as a user runs it, without this file's `from __future__` flags
    exec(compile(code, page, "exec", dont_inherit=True), {"__name__": "__docs__"})


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


def test_support_memory_example_remembers_across_sessions(tmp_path: Path) -> None:
    out = _run(str(ROOT / "examples/support_memory.py"), "--db", str(tmp_path / "memory.db"))
    assert out.returncode == 0, out.stderr
    assert "run paused: paused, waiting for ['remember']" in out.stdout
    assert "approved by supervisor" in out.stdout
    ann, bob = out.stdout.split("Thursday, Ann (a new session):")[1].split("Thursday, Bob:")
    assert "Following your preferences: Ann asked: Please always email me rather than call." in ann
    assert "email" not in bob  # Bob's session never sees Ann's memory


OUTSIDE = re.compile(r"\b(DESIGN|RELIABILITY|STYLE)(\.md\b| §| [A-E]\.\d)|\.\./shared\b")
"""A reference to a document that is not in this repository: every page, test and comment stands alone."""
OWN_FILES = ("README.md", "pyproject.toml", "mkdocs.yml", ".ci/run", "docs", "src", "tests", "bench", "examples")


def test_no_file_refers_to_a_document_outside_the_repository() -> None:
    found = []
    for top in OWN_FILES:
        paths = [ROOT / top] if (ROOT / top).is_file() else sorted((ROOT / top).rglob("*"))
        for path in paths:
            if path.suffix not in {".md", ".py", ".toml", ".yml", ".jsonl", ""} or not path.is_file():
                continue
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if OUTSIDE.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == []


@pytest.mark.sandbox
def test_code_actions_example() -> None:
    out = _run("examples/code_actions.py")
    assert out.returncode == 0, out.stderr
    assert "paused on issue_refund" in out.stdout and "answer: refunded 17 EUR on A3" in out.stdout
    assert "ran: ['read_report', 'save_summary', 'issue_refund']" in out.stdout
