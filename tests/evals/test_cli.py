"""``tether eval`` as a user runs it: a real process, a real SQLite store, report files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")


def tether(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TETHER_", "OPENAI", "ANTHROPIC"))}
    env.update(PYTHONPATH=SRC, HOME=str(cwd), NO_COLOR="1")
    return subprocess.run(
        [sys.executable, "-m", "tether", "eval", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_list_shows_the_shipped_datasets(tmp_path: Path) -> None:
    out = tether("list", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "refund-desk" in out.stdout and "tether-tasks" in out.stdout


def test_run_writes_reports_and_a_second_run_reads_the_store(tmp_path: Path) -> None:
    first = tether("run", "refund-desk", "--model", "reference", "--json", "r.json", "--html", "r.html", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "accuracy 100%" in first.stdout and "wrote r.json" in first.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["name"] == "refund-desk-reference" and report["summary"]["trials"] == 6
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert (tmp_path / ".tether" / "evals.db").exists()
    again = tether("run", "refund-desk", "--model", "reference", cwd=tmp_path)
    assert "read back from the store 6" in again.stdout
    assert first.stderr == ""  # no progress bar when stderr is not a terminal


def test_tags_cases_trials_and_a_minimum_accuracy(tmp_path: Path) -> None:
    out = tether("run", "toolbox", "--model", "reference", "--tag", "several-calls", "--trials", "2", cwd=tmp_path)
    assert out.returncode == 0 and "4 cases x 2 trials" in out.stdout and "pass@2 1.00" in out.stdout
    script = tmp_path / "wrong.json"
    script.write_text(json.dumps(["I don't know."]))
    low = tether(
        "run",
        "no-tool",
        "--case",
        "no-tool-history",
        "--model",
        f"scripted:{script}",
        "--min-accuracy",
        "0.5",
        cwd=tmp_path,
    )
    assert low.returncode == 1 and "accuracy 0%" in low.stdout


def test_compare_exits_1_on_a_regression(tmp_path: Path) -> None:
    script = tmp_path / "wrong.json"
    script.write_text(json.dumps(["I don't know."]))
    tether("run", "no-tool", "--case", "no-tool-history", "--model", "reference", "--json", "a.json", cwd=tmp_path)
    tether(
        "run", "no-tool", "--case", "no-tool-history", "--model", f"scripted:{script}", "--json", "b.json", cwd=tmp_path
    )
    worse = tether("compare", "a.json", "b.json", cwd=tmp_path)
    assert worse.returncode == 1 and "REGRESSED  no-tool-history: 100% -> 0%" in worse.stdout
    same = tether("compare", "a.json", "a.json", cwd=tmp_path)
    assert same.returncode == 0 and "no case changed" in same.stdout


def test_compare_refuses_reports_of_two_different_datasets(tmp_path: Path) -> None:
    tether("run", "no-tool", "--case", "no-tool-history", "--model", "reference", "--json", "a.json", cwd=tmp_path)
    tether("run", "refund-desk", "--model", "reference", "--json", "b.json", cwd=tmp_path)
    out = tether("compare", "a.json", "b.json", cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == "" and "Traceback" not in out.stderr
    assert out.stderr == (
        "error: the reports are of different datasets ('no-tool' and 'refund-desk'): compare two runs of one dataset\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "nope", "--model", "reference"], "unknown dataset 'nope'"),
        (["run", "toolbox", "--model", "reference", "--tag", "zzz"], "no case of 'toolbox' matches"),
        (["run", "toolbox", "--model", "reference", "--price", "cheap"], "--price must be two numbers"),
        (["run", "toolbox", "--model", "trained:missing.npz"], "is not a saved tether brain"),
    ],
)
def test_mistakes_are_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    out = tether(*args, cwd=tmp_path)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr
