"""The command line on a store that a program of yours made in its own directory.

The program is the library used as the README shows it: an ``Agent`` named
``desk``, a real SQLite store in the working directory, a signing key of its
own. The command line reads that store, shows the run under the agent's name
and who decided, signs decisions only with a key the run's earlier decisions
verify with, and points back at the program to resume (its own agent has
other tools, so ``tether resume`` would only fail on the fingerprint).
"""

from __future__ import annotations

import getpass
import subprocess
import sys
from pathlib import Path

from tether.cli._keys import key_id

KEY = "cd" * 32
PROGRAM = f"""
import sys
from tether import Action, Agent, tool
from tether.stores.sqlite import SQLiteStore
from tether.testing import ScriptedModel

@tool(effect="once", approval="always")
def refund(order: str) -> str:
    \"\"\"Refund an order.\"\"\"
    return "refunded " + order

store = SQLiteStore("runs.db")
agent = Agent(ScriptedModel([Action("refund", {{"order": "A1"}}), Action("refund", {{"order": "B2"}}), "done"]),
              [refund], name="desk", store=store, signing_key=bytes.fromhex("{KEY}"))
result = agent.run_sync(run_id="r1") if sys.argv[1:] == ["resume"] else agent.run_sync("refund A1", run_id="r1")
print(result.status)
"""


def program(ws: Path, *args: str) -> str:
    (ws / "desk.py").write_text(PROGRAM)
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "desk.py", *args], cwd=ws, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_show_reads_a_library_store_in_the_working_directory_and_names_the_agent(tether, ws: Path) -> None:
    assert program(ws) == "paused"
    listed = tether("runs", "--store", "sqlite:///runs.db")
    assert listed.code == 0 and "r1" in listed.out, listed.err
    shown = tether("show", "r1", "--store", "sqlite:///runs.db")
    assert shown.code == 0, shown.err
    assert "agent: desk" in shown.lines()[0]
    assert "desk calls: refund" in shown.out and "agent calls" not in shown.out


def test_a_decision_on_a_library_run_says_its_key_and_points_back_at_the_program(tether, ws: Path) -> None:
    assert program(ws) == "paused"
    env = {"TETHER_SIGNING_KEY": KEY}
    approved = tether("approve", "r1", "--store", "sqlite:///runs.db", env=env)
    assert approved.code == 0, approved.err
    assert f"signed with key id {key_id(bytes.fromhex(KEY))}" in approved.err
    assert "continue it in the program that started it (agent 'desk'): agent.run(run_id='r1')" in approved.out
    assert "tether resume" not in approved.out
    (ws.parent / "elsewhere").mkdir()
    (ws.parent / "script.json").write_text('["done"]')
    model = f"scripted:{ws.parent / 'script.json'}"
    refused = tether(
        "resume", "r1", "--store", f"sqlite:///{ws}/runs.db", "-w", "../elsewhere", "--model", model, env=env
    )
    assert refused.code == 2 and "started by another program (agent 'desk')" in refused.err
    assert program(ws, "resume") == "paused"  # the program's agent took the decision: it waits on B2 now
    shown = tether("show", "r1", "--store", "sqlite:///runs.db").out
    assert f"!! cli:{getpass.getuser()} said approve to" in shown  # who decided


def test_a_random_key_is_refused_once_the_run_has_a_decision_signed_with_its_own(tether, ws: Path) -> None:
    assert program(ws) == "paused"
    assert tether("approve", "r1", "--store", "sqlite:///runs.db", env={"TETHER_SIGNING_KEY": KEY}).code == 0
    assert program(ws, "resume") == "paused"
    wrong = tether("approve", "r1", "--store", "sqlite:///runs.db", env={"TETHER_SIGNING_KEY": "ef" * 32})
    assert wrong.code == 2 and wrong.err.startswith("error: run 'r1' has decisions signed with another key")
    assert len(wrong.err.splitlines()) == 1
