"""Approvals across processes: pause in one, decide in another, resume in a third.

The gated tool is the real sandboxed ``shell`` tool appending a line to a file
in the workspace, so the file's line count is the number of times the side
effect really happened.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import sqlite3
import stat
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether import state_of
from tether.events import ApprovalDecided
from tether.stores.sqlite import SQLiteStore

pytestmark = pytest.mark.sandbox

ME = f"cli:{getpass.getuser()}"  # who the command line says decided
APPEND = {"tool": "shell", "args": {"command": "echo ran >> count.txt && wc -l < count.txt"}}


def _run_id(text: str) -> str:
    for word in text.split():
        if len(word) == 32 and all(c in "0123456789abcdef" for c in word):
            return word
    raise AssertionError(f"no run id in {text!r}")


def _count(ws: Path) -> int:
    path = ws / "count.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_pause_approve_resume_in_three_processes_runs_the_tool_once(tether, script, ws, tmp_path) -> None:
    model = script([APPEND, {"answer": "lines now: {last_tool_result}"}])
    paused = tether("run", "count", "--model", model)
    assert paused.code == 3, paused.err
    rid = _run_id(paused.err)
    assert _count(ws) == 0

    listed = tether("runs", "--status", "paused")
    assert rid in listed.out and "count" in listed.out

    approved = tether("approve", rid[:8])  # a unique prefix is enough
    assert approved.code == 0, approved.err
    assert approved.out.splitlines()[0].startswith("approved call_1_0: shell ")
    assert _count(ws) == 0  # deciding runs nothing

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    store = f"sqlite:///{ws / '.tether' / 'runs.db'}"
    resumed = tether("resume", rid, "--model", model, "--workspace", str(ws), "--store", store, cwd=elsewhere)
    assert resumed.code == 0, resumed.err
    assert resumed.lines()[-1] == "  final answer: lines now: 1"
    assert _count(ws) == 1

    again = tether("resume", rid, "--model", model, "--workspace", str(ws), cwd=elsewhere)
    assert again.code == 2
    assert again.err == f"error: run {rid!r} is 'finished' and cannot be resumed\n"
    assert _count(ws) == 1


def test_a_denial_message_is_what_the_model_reads(tether, script, ws) -> None:
    model = script([APPEND, {"answer": "the tool said: {last_tool_result}"}])
    rid = _run_id(tether("run", "count", "--model", model).err)
    denied = tether("deny", rid, "call_1_0", "-m", "not on a Friday")
    assert denied.code == 0, denied.err
    done = tether("resume", rid, "--model", model)
    assert done.code == 0, done.err
    assert done.lines()[-2:] == [
        "    -> shell failed: a human denied this call: not on a Friday",
        "  final answer: the tool said: a human denied this call: not on a Friday",
    ]
    assert _count(ws) == 0
    shown = tether("show", rid).out
    assert f"!! cli:{getpass.getuser()} said deny to call_1_0" in shown  # who decided, not "a human"


def test_approve_with_edited_arguments_runs_the_edited_call(tether, script, ws) -> None:
    model = script([APPEND, {"answer": "{last_tool_result}"}])
    rid = _run_id(tether("run", "count", "--model", model).err)
    edited = json.dumps({"command": "echo edited >> count.txt && cat count.txt"})
    assert tether("approve", rid, "call_1_0", "--args", edited).code == 0
    shown = tether("show", rid).out
    assert 'decided: approve with {"command": "echo edited >> count.txt && cat count.txt"}' in shown
    done = tether("resume", rid, "--model", model)
    assert done.code == 0, done.err
    assert done.lines()[-2:] == [f"  final answer: (a human edited the arguments to {edited})", "edited"]
    assert (ws / "count.txt").read_text() == "edited\n"


def test_show_lists_waiting_calls_with_full_arguments_and_hash(tether, script) -> None:
    long = "x" * 500
    model = script([{"tool": "write_file", "args": {"path": "big.txt", "content": long}}])
    rid = _run_id(tether("run", "write", "--model", model).err)
    shown = tether("show", rid)
    assert shown.code == 0
    lines = shown.out.splitlines()
    assert lines[0].startswith(f"run {rid}  status: paused")
    at = lines.index("calls waiting:")
    assert lines[at + 1].startswith("  call_1_0  write_file  (awaiting-approval)  args_hash ")
    assert f'      "content": "{long}"' in lines  # never shortened: what you see is what you sign


def test_a_decision_signed_with_another_key_is_refused_when_it_is_made(tether, script, ws) -> None:
    model = script([APPEND, "done"])
    rid = _run_id(tether("run", "count", "--model", model).err)
    other = tether("approve", rid, env={"TETHER_SIGNING_KEY": "00" * 32})
    assert other.code == 2
    assert other.err.startswith(f"error: run {rid!r} was started with another signing key (id ")
    assert other.err.endswith(
        "from TETHER_SIGNING_KEY); decisions signed with it would be refused: use the key the run was "
        "started with (TETHER_SIGNING_KEY, or the signing.key beside the store)\n"
    )
    assert "bad or missing signature" not in tether("show", rid).out  # nothing was recorded
    assert tether("approve", rid).code == 0  # with the store's own key
    assert tether("resume", rid, env={"TETHER_SIGNING_KEY": "00" * 32}).code == 2  # nor resumed with another
    assert _count(ws) == 0
    assert tether("resume", rid).code == 0
    assert _count(ws) == 1


def test_an_unsigned_decision_written_into_the_store_is_refused(tether, script, ws) -> None:
    model = script([APPEND, "done"])
    rid = _run_id(tether("run", "count", "--model", model).err)

    async def forge() -> None:
        store = SQLiteStore(ws / ".tether" / "runs.db")
        events = await store.load(rid)
        state = state_of(events).approve("call_1_0")  # no key: no signature
        decision = state.decision("call_1_0")
        assert decision is not None
        await store.append(rid, [ApprovalDecided(decision)], expected_seq=len(events))
        await store.aclose()

    asyncio.run(forge())
    refused = tether("resume", rid, "--model", model)
    assert refused.code == 2
    assert "bad or missing signature" in refused.err
    assert _count(ws) == 0


def test_the_signing_key_file_is_private(tether, script, ws) -> None:
    tether("run", "hi", "--model", script(["hello"]))
    key = ws / ".tether" / "signing.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert len(bytes.fromhex(key.read_text().strip())) == 32
    os.chmod(key, 0o644)
    done = tether("run", "hi", "--model", script(["hello"]))
    assert done.code == 2 and "readable by others" in done.err


def test_a_crash_mid_call_needs_a_human_to_retry_or_skip(tether, script, ws) -> None:
    model = script([APPEND, {"answer": "{last_tool_result}"}])
    rid = _run_id(tether("run", "count", "--model", model).err)
    tether("approve", rid)
    crashed = tether("resume", rid, "--model", model, env={"TETHER_CRASH_AT": "after_started_commit"})
    assert crashed.code == -9  # SIGKILL after `tool-started` was committed, before the tool ran
    assert _count(ws) == 0

    unknown = tether("resume", rid, "--model", model)
    assert unknown.code == 3
    assert f"  run again:  tether retry {rid} call_1_0" in unknown.err.splitlines()
    assert tether("runs", "--status", "needs-decision").out.count(rid) == 1

    assert tether("approve", rid).code == 2  # an interrupted call is retried or skipped, not approved
    assert tether("retry", rid, "call_1_0").code == 0
    done = tether("resume", rid, "--model", model)
    assert done.code == 0, done.err
    assert done.lines()[-1] == "  final answer: 1"
    assert _count(ws) == 1


def test_skip_tells_the_model_and_runs_nothing(tether, script, ws) -> None:
    model = script([APPEND, {"answer": "{last_tool_result}"}])
    rid = _run_id(tether("run", "count", "--model", model).err)
    tether("approve", rid)
    tether("resume", rid, "--model", model, env={"TETHER_CRASH_AT": "after_started_commit"})
    tether("resume", rid, "--model", model)
    assert tether("skip", rid, "call_1_0", "-m", "I ran it by hand").code == 0
    done = tether("resume", rid, "--model", model)
    assert done.code == 0, done.err
    assert done.lines()[-1].endswith("a human chose not to run it again: I ran it by hand")
    assert _count(ws) == 0


def test_resume_all_continues_decided_runs_only(tether, script, ws) -> None:
    model = script([APPEND, "done"])
    first = _run_id(tether("run", "one", "--model", model).err)
    second = _run_id(tether("run", "two", "--model", model).err)
    tether("approve", first)
    done = tether("resume", "--all", "--model", model)
    assert done.code == 0, done.err
    assert done.err.splitlines() == [f"== resuming run {first}", f"{first}  finished"]
    assert _count(ws) == 1
    listed = [json.loads(line) for line in tether("runs", "--json").lines()]
    assert [(r["run_id"], r["status"], r["task"]) for r in listed] == [
        (first, "finished", "one"),
        (second, "paused", "two"),
    ]


def test_cancel_ends_a_paused_run_for_good(tether, script, ws) -> None:
    model = script([APPEND, "done"])
    rid = _run_id(tether("run", "count", "--model", model).err)
    assert tether("cancel", rid).out == f"cancelled {rid}\n"
    assert tether("approve", rid).err == f"error: run {rid!r} is 'cancelled', not waiting for a decision\n"
    assert tether("resume", rid, "--model", model).code == 2
    assert _count(ws) == 0


@pytest.fixture
def pg_url() -> Iterator[str]:
    import psycopg
    from psycopg import sql

    dsn = os.environ.get("TETHER_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
    schema = f"tether_cli_{uuid.uuid4().hex[:12]}"
    yield f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.mark.postgres
def test_the_approval_flow_on_a_postgresql_store(tether, script, ws, tmp_path, pg_url: str) -> None:
    model = script([APPEND, {"answer": "lines now: {last_tool_result}"}])
    without = tether("run", "count", "--model", model, "--store", pg_url)
    assert without.code == 2 and without.err.startswith("error: a postgresql store needs TETHER_SIGNING_KEY")
    key = {"TETHER_SIGNING_KEY": "5e" * 32}
    rid = _run_id(tether("run", "count", "--model", model, "--store", pg_url, env=key).err)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert tether("approve", rid, "--store", pg_url, env=key, cwd=elsewhere).code == 0
    done = tether("resume", rid, "--store", pg_url, env=key, cwd=elsewhere)  # the run knows its workspace
    assert done.code == 0, done.err
    assert done.lines()[-1] == "  final answer: lines now: 1"
    assert _count(ws) == 1
    assert not (ws / ".tether" / "runs.db").exists()  # nothing went to the default store
    assert not (elsewhere / ".tether").exists()


def test_resume_continues_with_the_recorded_brain_and_workspace_from_anywhere(tether, script, ws, tmp_path) -> None:
    model = script([APPEND, {"answer": "lines now: {last_tool_result}"}])
    rid = _run_id(tether("run", "count", "--model", model).err)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    store = f"sqlite:///{ws / '.tether' / 'runs.db'}"
    approved = tether("approve", rid, "--store", store, cwd=elsewhere)
    assert approved.code == 0, approved.err
    hint = approved.lines()[-1]
    assert hint == f"continue with: tether resume {rid} --store {store}"

    other = script(["a different brain"])
    for flag, value, was in [
        ("--model", other, model),
        ("--workspace", str(elsewhere), str(ws)),
        ("--base-url", "http://127.0.0.1:9/v1", "(none)"),
    ]:
        refused = tether(*hint.split()[3:], flag, value, cwd=elsewhere)
        assert refused.code == 2
        assert refused.err == (
            f"error: run {rid!r} was started with {flag} {was}, not {value.rstrip('/')}: resume it without "
            f"{flag} to continue as it started\n"
        )
    assert _count(ws) == 0

    done = tether(*hint.split()[3:], cwd=elsewhere)  # exactly the hint: no --model, no --workspace
    assert done.code == 0, done.err
    assert done.lines()[-1] == "  final answer: lines now: 1"
    assert _count(ws) == 1 and _count(elsewhere) == 0  # it ran where the run started


def test_deciding_from_another_directory_uses_the_key_kept_with_the_store(tether, script, ws, tmp_path) -> None:
    model = script([APPEND, "done"])
    rid = _run_id(tether("run", "count", "--model", model).err)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    store = f"sqlite:///{ws / '.tether' / 'runs.db'}"
    assert tether("approve", rid, "--store", store, cwd=elsewhere).code == 0
    assert list(elsewhere.iterdir()) == []  # no second key (nor anything else) made here
    assert sorted(p.name for p in (ws / ".tether").iterdir() if "runs.db" not in p.name) == ["signing.key"]
    done = tether("resume", rid, "--store", store, cwd=elsewhere)
    assert done.code == 0, done.err
    assert _count(ws) == 1


def test_a_recorded_decision_stands_until_it_is_replaced_explicitly(tether, script, ws) -> None:
    model = script([APPEND, {"answer": "the tool said: {last_tool_result}"}])
    rid = _run_id(tether("run", "count", "--model", model).err)
    assert tether("approve", rid).code == 0
    denied = tether("deny", rid, "call_1_0", "-m", "changed my mind")
    assert denied.code == 2
    assert denied.err == (
        f"error: call 'call_1_0' is already approved by {ME}; that decision stands until the run resumes "
        "(pass --replace to change it)\n"
    )
    again = tether("approve", rid, "call_1_0")
    assert again.code == 0
    assert again.lines()[0] == f"call_1_0 is already approved by {ME}: nothing changed"
    assert f"call_1_0 is already approved by {ME}" in tether("approve", rid).err  # nothing left to approve

    replaced = tether("deny", rid, "call_1_0", "-m", "changed my mind", "--replace")
    assert replaced.code == 0, replaced.err
    assert replaced.lines()[0] == (
        "denied call_1_0: shell "
        '{"command": "echo ran >> count.txt && wc -l < count.txt"}'
        f" (replaces: approved by {ME})"
    )
    done = tether("resume", rid)
    assert done.code == 0, done.err
    assert done.lines()[-1] == "  final answer: the tool said: a human denied this call: changed my mind"
    assert _count(ws) == 0


def test_runs_tells_a_decided_run_from_one_still_waiting(tether, script, ws) -> None:
    model = script([APPEND, "done"])
    decided = _run_id(tether("run", "one", "--model", model).err)
    undecided = _run_id(tether("run", "two", "--model", model).err)
    tether("approve", decided)
    rows = {line.split()[0]: line for line in tether("runs").lines()[1:]}
    assert rows[decided].split("  ")[1].strip() == "paused (decided, resume it)"
    assert rows[undecided].split("  ")[1].strip() == "paused"
    listed = {r["run_id"]: r for r in map(json.loads, tether("runs", "--json").lines())}
    assert (listed[decided]["status"], listed[decided]["decided"]) == ("paused", True)
    assert (listed[undecided]["status"], listed[undecided]["decided"]) == ("paused", False)


def test_runs_shows_a_run_whose_worker_died_as_interrupted_once_its_lease_expired(tether, script, ws) -> None:
    model = script([APPEND, {"answer": "{last_tool_result}"}])
    rid = _run_id(tether("run", "count", "--model", model).err)
    tether("approve", rid)
    crashed = tether("resume", rid, env={"TETHER_CRASH_AT": "after_started_commit"})
    assert crashed.code == -9  # killed holding the run's lease

    def row() -> tuple[str, bool]:
        [listed] = [r for r in map(json.loads, tether("runs", "--json").lines()) if r["run_id"] == rid]
        [line] = [line for line in tether("runs").lines() if line.startswith(rid)]
        assert listed["status"] == "running"
        return line.split("  ")[1].strip(), listed["interrupted"]

    assert row() == ("running", False)  # its lease is still live: it may be running elsewhere
    with sqlite3.connect(ws / ".tether" / "runs.db") as db:  # the lease runs out (no need to wait for it)
        db.execute("UPDATE leases SET expires_at = ? WHERE run_id = ?", (time.time() - 1, rid))
    assert row() == ("interrupted (resume it)", True)
    resumed = tether("resume", "--all")
    assert resumed.err.splitlines()[0] == f"== resuming run {rid}"
    assert tether("runs", "--status", "needs-decision").out.count(rid) == 1
    assert _count(ws) == 0


def test_a_question_is_answered_from_another_terminal_and_the_answer_is_the_result(tether, script) -> None:
    model = script(
        [{"tool": "ask_human", "args": {"question": "Which size?"}}, {"answer": "ordering {last_tool_result}"}]
    )
    paused = tether("run", "order a shirt", "--model", model)
    assert paused.code == 3, paused.err
    rid = _run_id(paused.err)
    assert "tether answer" in paused.err and "Which size?" in paused.err
    shown = tether("show", rid)
    assert "ask_human  (awaiting-answer)" in shown.out
    answered = tether("answer", rid, "call_1_0", "large")
    assert answered.code == 0, answered.err
    assert answered.out.splitlines()[0].startswith(
        'answered call_1_0: ask_human {"question": "Which size?"} with "large"'
    )
    again = tether("answer", rid, "call_1_0", "small")
    assert again.code == 2 and "--replace" in again.err  # a recorded answer stands
    resumed = tether("resume", rid)
    assert resumed.code == 0, resumed.err
    assert resumed.lines()[-1] == "  final answer: ordering large"
