"""Attacks on people and rules, performed against a real ``tether serve`` on loopback.

Each test is a way one person tried to get past the rules file of
:mod:`tests.serve.test_people` (refunds over $200 are the lead's, the rest the
clerks' and the lead's): by editing the arguments, by approving twice through
two doors, by cancelling a run that waits on someone else's item, by retrying
alone what two people must approve. Each ends with what the audit log says.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from tether.serve._people import Accounts

from .conftest import Served, start, wait_run
from .test_people import PASSWORD, Team, approve, make_team, paused_item, steps
from .test_recovery import wait_for_oracle


def approve_edited(client: httpx.Client, item: dict[str, Any], amount: int) -> httpx.Response:
    where = f"/api/runs/{item['run_id']}/items/{item['call_id']}/approve"
    return client.post(where, json={"args_hash": item["args_hash"], "args": {"order_id": "A1234", "amount": amount}})


def test_a_clerk_cannot_edit_an_item_into_the_leads_rule(tmp_path: Path) -> None:
    for team in make_team(tmp_path):
        item = paused_item(team, "Refund A1234")  # $79: clerks may decide it
        with team.api("bo") as bo, team.api("ana") as ana, team.program() as program:
            refused = approve_edited(bo, item, 5000)  # over $200: the lead's rule
            assert refused.status_code == 403 and refused.json()["error"]["code"] == "not-yours"
            message = refused.json()["error"]["message"]
            assert "edited arguments needs lead" in message and "rule at line" in message
            time.sleep(0.3)
            assert program.get(f"/api/runs/{item['run_id']}").json()["status"] == "paused"
            assert team.served.oracle_lines() == []  # the tool never ran
            assert approve_edited(ana, item, 150).status_code == 200  # the lead may edit it either way
            run = wait_run(program, item["run_id"], "finished")
        assert "$150" in run["output"]
        assert [s for s in steps(team, item["run_id"]) if s[0] != "saw"] == [
            ("refused", "user:bo"),
            ("decided", "user:ana"),
        ]


def test_a_clerk_may_still_edit_within_the_clerks_rule(tmp_path: Path) -> None:
    for team in make_team(tmp_path):
        item = paused_item(team, "Refund A1234")
        with team.api("bo") as bo, team.program() as program:
            assert approve_edited(bo, item, 50).status_code == 200  # $50 stays under the clerks' rule
            run = wait_run(program, item["run_id"], "finished")
        assert "$50" in run["output"]


def test_an_edit_into_a_two_approver_rule_needs_two_people(tmp_path: Path) -> None:
    for team in make_team(tmp_path, extra="approvers = 2"):  # the lead's rule asks two people
        item = paused_item(team, "Refund A1234")
        with team.api("ana") as ana:
            edited = approve_edited(ana, item, 5000)
        assert edited.status_code == 422 and edited.json()["error"]["code"] == "edit-needs-one-approver"
        assert team.served.oracle_lines() == []


def test_one_person_through_two_doors_is_one_approver(tmp_path: Path) -> None:
    for team in make_team(tmp_path, clerks="approvers = 2"):
        item = paused_item(team, "Refund A1234")
        proxy = httpx.HTTPTransport(local_address="127.0.0.2")  # the trusted proxy's address
        door = httpx.Client(base_url=team.served.url, headers={"x-forwarded-user": "ana"}, transport=proxy, timeout=30)
        with team.api("ana") as ana, door as via, team.api("bo") as bo, team.program() as program:
            assert approve(ana, item).status_code == 202  # ana with her personal token
            csrf = via.get("/").text.split('name="csrf-token" content="')[1].split('"')[0]
            where = f"/api/runs/{item['run_id']}/items/{item['call_id']}/approve"
            second = via.post(where, json={"args_hash": item["args_hash"]}, headers={"x-csrf-token": csrf})
            assert second.status_code == 202 and "1 of 2" in second.json()["notice"]  # ana again, through the proxy
            assert via.get("/api/items").json()["items"] == []  # nothing left for ana through either door
            time.sleep(0.3)
            assert program.get(f"/api/runs/{item['run_id']}").json()["status"] == "paused"
            assert team.served.oracle_lines() == []
            assert approve(bo, item).status_code == 200  # a second person
            wait_run(program, item["run_id"], "finished")
        assert len(team.served.oracle_lines()) == 1
        assert [s for s in steps(team, item["run_id"]) if s[0] != "saw"] == [
            ("approved", "user:ana"),
            ("decided", "user:ana+user:bo"),
        ]


def test_a_clerk_cannot_cancel_a_run_waiting_on_the_leads_item(tmp_path: Path) -> None:
    for team in make_team(tmp_path):
        item = paused_item(team, "Refund B777")  # $249: the lead's
        rid = item["run_id"]
        with team.api("bo") as bo, team.api("ana") as ana, team.program() as program:
            refused = bo.post(f"/api/runs/{rid}/cancel", json={"reason": "nope"})
            assert refused.status_code == 403 and refused.json()["error"]["code"] == "not-yours"
            assert (
                "not yours" in refused.json()["error"]["message"] and "needs lead" in refused.json()["error"]["message"]
            )
            assert program.get(f"/api/runs/{rid}").json()["status"] == "paused"
            done = ana.post(f"/api/runs/{rid}/cancel", json={"reason": "duplicate request"})
            assert done.status_code == 200 and done.json()["status"] == "cancelled"
        audit = [e for e in team.audit() if e.get("run_id") == rid and e["step"] != "saw"]
        assert [(e["step"], e["who"]) for e in audit] == [("refused", "user:bo"), ("cancelled", "user:ana")]
        assert audit[0]["verdict"] == "cancel" and audit[1]["reason"] == "duplicate request"
        assert audit[1]["waiting"] == [item["call_id"]]


def test_every_cancel_is_audited_also_the_operators(tmp_path: Path) -> None:
    for team in make_team(tmp_path):
        item = paused_item(team, "Refund B777")
        with team.program() as program:
            assert program.post(f"/api/runs/{item['run_id']}/cancel", json={"reason": "ops"}).status_code == 200
        assert ("cancelled", "api") in steps(team, item["run_id"])


TWO_FOR_CHARGES = """
[roles]
clerk = ["bo", "cy"]

[[rule]]
tool = "charge_slowly"
who = ["clerk"]
approvers = 2
"""


def test_a_retry_under_a_two_person_rule_needs_two_people(tmp_path: Path) -> None:
    home = tmp_path / ".tether"
    home.mkdir(parents=True)
    accounts = Accounts(home / "users.json")
    tokens = {name: (accounts.add(name, PASSWORD), accounts.new_token(name))[1] for name in ("ana", "bo", "cy")}
    (tmp_path / "rules.toml").write_text(TWO_FOR_CHARGES)
    served = Served(tmp_path, "sqlite", extra=("--rules", str(tmp_path / "rules.toml")))
    try:
        served.start("tests.serve.apps:slow")
        with served.client() as program:
            run_id = start(program, "inside-1", "slow")["run_id"]
        wait_for_oracle(served, "inside-1")  # inside the charge: killed now, its outcome is unknown
        served.kill()
        served.start("tests.serve.apps:slow")
        (served.gates / "inside-1").touch()  # a charge run again finishes at once
        team = Team(served, tokens)
        with team.api("bo") as bo, team.api("cy") as cy, team.program() as program:
            (item,) = wait_run(program, run_id, "needs-decision")["items"]
            where = f"/api/runs/{run_id}/items/{item['call_id']}/retry"
            first = bo.post(where, json={"args_hash": item["args_hash"]})
            assert first.status_code == 202 and "1 of 2" in first.json()["notice"]
            time.sleep(0.3)
            assert program.get(f"/api/runs/{run_id}").json()["status"] == "needs-decision"
            assert len([line for line in served.oracle_lines() if line[0] == "charge"]) == 1  # not run again yet
            assert cy.post(where, json={"args_hash": item["args_hash"]}).status_code == 200
            wait_run(program, run_id, "finished")
        assert len([line for line in served.oracle_lines() if line[0] == "charge"]) == 2  # run again, once
        audit = [e for e in team.audit() if e.get("run_id") == run_id and e["step"] != "saw"]
        assert [(e["step"], e["who"], e["verdict"]) for e in audit] == [
            ("approved", "user:bo", "retry"),
            ("decided", "user:bo+user:cy", "retry"),
        ]
    finally:
        served.stop()


def test_reading_someone_elses_waiting_item_through_the_run_is_logged_as_seen(tmp_path: Path) -> None:
    for team in make_team(tmp_path):
        item = paused_item(team, "Refund B777")  # $249: the lead's, hidden from bo's inbox
        with team.api("bo") as bo:
            assert bo.get("/api/items").json()["items"] == []
            assert bo.get(f"/api/runs/{item['run_id']}").json()["items"][0]["call_id"] == item["call_id"]
            assert bo.get(f"/api/runs/{item['run_id']}/events").status_code == 200
        assert steps(team, item["run_id"]) == [("saw", "user:bo")]  # once per person and item
