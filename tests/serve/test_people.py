"""People and rules against a real ``tether serve`` on loopback (issue 22 item 2, issue 25 item 4).

Accounts are made in the server's home before it starts (the file ``tether
users`` writes); each person talks to the server with their own token, a
session cookie, or through the trusted proxy. The rules file gives refunds
over $200 to the lead, the rest to clerks and the lead. Every test reads the
audit log at the end and checks the steps it took are there.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from tether.exceptions import StateTampered
from tether.pending import Decision
from tether.serve._people import Accounts

from .conftest import ROOT, Served, wait_run
from .test_browser import browser  # noqa: F401  (the Chromium fixture)

PASSWORD = "correct horse battery"
RULES = """
[identity]
proxy_header = "X-Forwarded-User"
proxy_addresses = ["127.0.0.2"]

[roles]
lead = ["ana", "lee@example.org"]
clerk = ["bo", "cy"]
oncall = ["dee"]

[[rule]]
tool = "issue_refund"
when = "amount > 200"
who = ["lead"]
{extra}

[[rule]]
tool = "issue_refund"
who = ["clerk", "lead"]
{clerks}

[audit]
readers = ["lead"]
"""

LEAD_RULE = RULES.splitlines().index("[[rule]]") + 1  # the line of the lead's rule in the file


class Team:
    """A server with rules and accounts, and each person's own API client."""

    def __init__(self, served: Served, tokens: dict[str, str]) -> None:
        self.served, self.tokens = served, tokens

    def api(self, name: str, **kw: Any) -> httpx.Client:
        headers = {"authorization": f"Bearer {self.tokens[name]}"}
        return httpx.Client(base_url=self.served.url, headers=headers, timeout=30, **kw)

    def program(self) -> httpx.Client:
        return self.served.client()  # the server's own token: starts runs, reads everything, decides nothing

    def audit(self) -> list[dict[str, Any]]:
        with self.api("ana") as ana:
            response = ana.get("/api/audit")
        assert response.status_code == 200 and response.headers["content-type"].startswith("application/x-ndjson")
        import json

        return [json.loads(line) for line in response.text.splitlines()]


def make_team(tmp_path: Path, *, extra: str = "", clerks: str = "") -> Iterator[Team]:
    home = tmp_path / ".tether"
    home.mkdir(parents=True, exist_ok=True)
    accounts = Accounts(home / "users.json")
    tokens = {}
    for name in ("ana", "bo", "cy", "dee"):
        accounts.add(name, PASSWORD)
        tokens[name] = accounts.new_token(name)
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES.format(extra=extra, clerks=clerks))
    served = Served(tmp_path, "sqlite", extra=("--rules", str(rules)))
    try:
        served.start("tests.serve.apps:support")
        yield Team(served, tokens)
    finally:
        served.stop()


@pytest.fixture
def team(tmp_path: Path) -> Iterator[Team]:
    yield from make_team(tmp_path)


def paused_item(team: Team, task: str) -> dict[str, Any]:
    with team.program() as api:
        run = api.post("/api/runs", json={"agent": "support", "input": task}).json()
        run = wait_run(api, run["run_id"], "paused")
    return run["items"][0]  # type: ignore[no-any-return]


def approve(client: httpx.Client, item: dict[str, Any]) -> httpx.Response:
    where = f"/api/runs/{item['run_id']}/items/{item['call_id']}/approve"
    return client.post(where, json={"args_hash": item["args_hash"]})


def steps(team: Team, run_id: str) -> list[tuple[str, str]]:
    return [(e["step"], e["who"]) for e in team.audit() if e.get("run_id") == run_id]


def test_a_clerk_neither_sees_nor_decides_the_leads_item_and_the_lead_approves_it(team: Team) -> None:
    big = paused_item(team, "Refund B777, the espresso machine leaks")  # $249: the lead's
    small = paused_item(team, "Refund A1234, the headphones crackle")  # $79: a clerk's
    with team.api("bo") as bo, team.api("ana") as ana, team.program() as program:
        assert [i["run_id"] for i in bo.get("/api/items").json()["items"]] == [small["run_id"]]
        assert {i["run_id"] for i in ana.get("/api/items").json()["items"]} == {small["run_id"], big["run_id"]}
        refused = approve(bo, big)
        assert refused.status_code == 403, refused.text
        assert "needs lead" in refused.json()["error"]["message"]
        assert f"rule at line {LEAD_RULE}" in refused.json()["error"]["message"]  # where in the rules file
        assert program.get(f"/api/runs/{big['run_id']}").json()["status"] == "paused"
        # The server's own token is no person: it reads everything and decides nothing.
        assert approve(program, small).status_code == 403
        # A name in the body is not who decides: the token says who.
        said = bo.post(
            f"/api/runs/{small['run_id']}/items/{small['call_id']}/approve",
            json={"args_hash": small["args_hash"], "by": "ana"},
        )
        assert said.status_code == 200, said.text
        assert approve(ana, big).status_code == 200
        done = wait_run(program, big["run_id"], "finished")
        assert done["output"] == "Done: $249 refunded to the original card for B777."
        small_run = wait_run(program, small["run_id"], "finished")
    assert steps(team, big["run_id"]) == [
        ("saw", "user:ana"),
        ("refused", "user:bo"),
        ("decided", "user:ana"),
    ]
    assert ("decided", "user:bo") in steps(team, small_run["run_id"])
    assert team.served.oracle_lines() and len(team.served.oracle_lines()) == 2  # each refund ran once


def test_decisions_are_signed_with_the_deciders_identity(team: Team) -> None:
    item = paused_item(team, "Refund A1234")
    with team.api("cy") as cy, team.program() as program:
        assert approve(cy, item).status_code == 200
        wait_run(program, item["run_id"], "finished")
        events = program.get(f"/api/runs/{item['run_id']}/events").json()["events"]
    decided = [Decision.from_dict(e["event"]["decision"]) for e in events if e["kind"] == "approval-decided"]
    assert [d.by for d in decided] == ["user:cy"]
    key = bytes.fromhex((team.served.home / ".tether" / "signing.key").read_text().strip())
    decided[0].verify(key)  # signed by the server, over "user:cy"
    with pytest.raises(StateTampered):
        replace(decided[0], by="user:ana").verify(key)


def test_the_browser_shows_each_person_only_what_they_may_decide(team: Team, browser: Any) -> None:  # noqa: F811
    big = paused_item(team, "Refund B777, the espresso machine leaks")
    small = paused_item(team, "Refund A1234, the headphones crackle")
    url = team.served.url

    bo = sign_in(browser, url, "bo")
    assert bo.locator(".item").count() == 1
    assert bo.locator(f'.item[data-run="{big["run_id"]}"]').count() == 0
    assert bo.locator(f'.item[data-run="{small["run_id"]}"]').count() == 1
    # Under bo's session the API refuses the lead's item too (with the page's own CSRF token).
    status = bo.evaluate(
        """async ([item]) => {
            const csrf = document.querySelector('meta[name=csrf-token]').content;
            const r = await fetch(`/api/runs/${item.run_id}/items/${item.call_id}/approve`, {method: 'POST',
                headers: {'content-type': 'application/json', 'x-csrf-token': csrf},
                body: JSON.stringify({args_hash: item.args_hash})});
            return [r.status, (await r.json()).error.code];
        }""",
        [big],
    )
    assert status == [403, "not-yours"]
    bo.goto(f"{url}/runs/{big['run_id']}")
    assert bo.locator(".item").count() == 0  # the run's page shows its story, not a card bo cannot decide
    assert bo.goto(f"{url}/audit").status == 403  # the audit is for the lead

    ana = sign_in(browser, url, "ana")
    assert ana.locator(".item").count() == 2
    lead_card = ana.locator(f'.item[data-run="{big["run_id"]}"]')
    lead_card.locator('form.decide:not(.edit) button[value="approve"]').click()
    lead_card.wait_for(state="detached")
    with team.program() as program:
        assert wait_run(program, big["run_id"], "finished")["output"].startswith("Done: $249")
    ana.goto(f"{url}/audit")
    table = ana.locator("table.audit").inner_text()
    assert "user:ana" in table and "user:bo" in table and "refused" in table and "decided" in table


def test_two_approvers_the_run_resumes_only_after_the_second(tmp_path: Path) -> None:
    for team in make_team(tmp_path, clerks="approvers = 2"):
        item = paused_item(team, "Refund A1234")
        with team.api("bo") as bo, team.api("cy") as cy, team.api("ana") as ana, team.program() as program:
            first = approve(bo, item)
            assert first.status_code == 202 and first.json()["error"]["code"] == "needs-another-approver"
            assert "1 of 2" in first.json()["notice"]
            again = approve(bo, item)  # the same person twice is still one approver
            assert again.status_code == 202 and "1 of 2" in again.json()["notice"]
            assert bo.get("/api/items").json()["items"] == []  # nothing left for bo to do
            assert [i["run_id"] for i in cy.get("/api/items").json()["items"]] == [item["run_id"]]
            time.sleep(0.5)
            assert program.get(f"/api/runs/{item['run_id']}").json()["status"] == "paused"
            assert team.served.oracle_lines() == []
            edited = ana.post(
                f"/api/runs/{item['run_id']}/items/{item['call_id']}/approve",
                json={"args_hash": item["args_hash"], "args": {"order_id": "A1234", "amount": 5}},
            )
            assert edited.status_code == 422  # two people approve the same arguments, or nobody edits
            assert approve(cy, item).status_code == 200
            run = wait_run(program, item["run_id"], "finished")
        assert run["output"] == "Done: $79 refunded to the original card for A1234."
        assert len(team.served.oracle_lines()) == 1
        assert [s for s in steps(team, item["run_id"]) if s[0] != "saw"] == [
            ("approved", "user:bo"),
            ("decided", "user:bo+user:cy"),
        ]


def sign_in(chromium: Any, url: str, name: str) -> Any:
    page = chromium.new_context().new_page()
    page.goto(f"{url}/")
    page.fill("input[name=name]", name)
    page.fill("input[name=password]", PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_selector("#items")
    return page


def test_two_approvers_in_the_browser(tmp_path: Path, browser: Any) -> None:  # noqa: F811
    for team in make_team(tmp_path, clerks="approvers = 2"):
        item = paused_item(team, "Refund A1234")
        url = team.served.url
        bo, cy = sign_in(browser, url, "bo"), sign_in(browser, url, "cy")
        first = bo.locator(f'.item[data-run="{item["run_id"]}"]')
        first.locator('form.decide:not(.edit) button[value="approve"]').click()
        bo.wait_for_selector("text=1 of 2")  # the card says the approval waits for another
        with team.program() as program:
            time.sleep(0.5)
            assert program.get(f"/api/runs/{item['run_id']}").json()["status"] == "paused"
            cy.reload()
            second = cy.locator(f'.item[data-run="{item["run_id"]}"]')
            second.locator('form.decide:not(.edit) button[value="approve"]').click()
            second.wait_for(state="detached")
            run = wait_run(program, item["run_id"], "finished")
        assert run["output"] == "Done: $79 refunded to the original card for A1234."
        bo.reload()
        assert bo.locator(".item").count() == 0
        decided = [e for e in team.audit() if e["step"] == "decided" and e.get("run_id") == item["run_id"]]
        assert [e["who"] for e in decided] == ["user:bo+user:cy"]


def test_an_item_past_its_time_escalates_to_a_second_group(tmp_path: Path) -> None:
    extra = 'expire_after = "1s"\nthen = "escalate"\nescalate_to = ["oncall"]'
    for team in make_team(tmp_path, extra=extra):
        item = paused_item(team, "Refund B777")
        with team.api("dee") as dee, team.program() as program:
            before = approve(dee, item)
            assert before.status_code == 403  # not yet: on-call sees it only once it is late
            deadline = time.monotonic() + 30
            while not dee.get("/api/items").json()["items"]:
                assert time.monotonic() < deadline, "the item never escalated"
                time.sleep(0.2)
            assert approve(dee, item).status_code == 200
            wait_run(program, item["run_id"], "finished")
        kinds = [s for s in steps(team, item["run_id"]) if s[0] != "saw"]
        assert kinds[0] == ("refused", "user:dee")
        assert kinds[1][0] == "escalated" and kinds[1][1].startswith("rule:")
        assert kinds[-1] == ("decided", "user:dee")


def test_an_item_past_its_time_is_denied_with_a_message_the_model_reads(tmp_path: Path) -> None:
    extra = 'expire_after = "1s"\nthen = "deny"\nmessage = "No lead answered in time: a person will call you."'
    for team in make_team(tmp_path, extra=extra):
        item = paused_item(team, "Refund B777")
        with team.program() as program:
            run = wait_run(program, item["run_id"], "finished")
        assert "No lead answered in time: a person will call you." in run["output"]
        assert team.served.oracle_lines() == []
        assert ("expired", f"rule:rule at line {LEAD_RULE}") in steps(team, item["run_id"])


def test_a_rule_change_never_reopens_a_decided_item(tmp_path: Path) -> None:
    for team in make_team(tmp_path):
        item = paused_item(team, "Refund A1234")
        with team.api("bo") as bo:
            assert approve(bo, item).status_code == 200
        team.served.stop()
        rules = tmp_path / "rules.toml"
        rules.write_text(RULES.format(extra="", clerks="").replace('who = ["clerk", "lead"]', 'who = ["lead"]'))
        team.served.start("tests.serve.apps:support")
        with team.program() as program, team.api("ana") as ana:
            run = wait_run(program, item["run_id"], "finished")
            assert run["output"].endswith("A1234.")
            assert approve(ana, item).status_code == 409  # decided, not waiting again


def test_the_proxy_header_counts_only_from_the_proxy_address(team: Team) -> None:
    item = paused_item(team, "Refund B777")
    url = team.served.url
    proxy = httpx.HTTPTransport(local_address="127.0.0.2")
    headers = {"x-forwarded-user": "lee@example.org"}
    with httpx.Client(base_url=url, headers=headers, transport=proxy) as via_proxy:
        items = via_proxy.get("/api/items")
        assert items.status_code == 200 and [i["run_id"] for i in items.json()["items"]] == [item["run_id"]]
        assert approve(via_proxy, item).status_code == 403  # the proxy's header is ambient: it needs the CSRF token
        page = via_proxy.get("/")
        csrf = page.text.split('name="csrf-token" content="')[1].split('"')[0]
        done = via_proxy.post(
            f"/api/runs/{item['run_id']}/items/{item['call_id']}/approve",
            json={"args_hash": item["args_hash"]},
            headers={"x-csrf-token": csrf},
        )
        assert done.status_code == 200, done.text
    # The same header from anywhere else (here: the server's own address, not the proxy's) is refused.
    other = paused_item(team, "Refund D900")
    with httpx.Client(base_url=url, headers=headers) as spoof:
        refused = spoof.get("/api/items")
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "untrusted-proxy"
        assert approve(spoof, other).status_code == 403
        # Even with a person's valid token, a spoofed header is refused rather than ignored.
        with_token = spoof.get("/api/items", headers={"authorization": f"Bearer {team.tokens['bo']}"})
        assert with_token.status_code == 403
    with team.program() as program:
        assert wait_run(program, item["run_id"], "finished")["output"].startswith("Done: $249")
        assert program.get(f"/api/runs/{other['run_id']}").json()["status"] == "paused"
    assert ("decided", "proxy:lee@example.org") in steps(team, item["run_id"])


def test_tether_users_adds_lists_makes_tokens_resets_and_removes(tmp_path: Path) -> None:
    def users(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
        return subprocess.run(
            [sys.executable, "-m", "tether", "users", *args], input=stdin, cwd=tmp_path, env=env,
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    assert users("add", "ana", "--password-stdin", stdin=PASSWORD + "\n").returncode == 0
    short = users("add", "bo", "--password-stdin", stdin="short\n")
    assert short.returncode == 2 and short.stderr.count("\n") == 1 and "at least 10" in short.stderr
    twice = users("add", "ana", "--password-stdin", stdin=PASSWORD + "\n")
    assert twice.returncode == 2 and "exists already" in twice.stderr
    token = users("token", "ana", "--label", "laptop").stdout.strip()
    assert token.startswith("tt_") and len(token) > 40
    listed = users("list").stdout
    assert "ana" in listed and "laptop" in listed
    stored = (tmp_path / ".tether" / "users.json").read_text()
    assert PASSWORD not in stored and token not in stored and "$argon2id$" in stored
    assert oct((tmp_path / ".tether" / "users.json").stat().st_mode & 0o777) == "0o600"
    accounts = Accounts(tmp_path / ".tether" / "users.json")
    assert accounts.owner_of(token) == "ana" and accounts.check("ana", PASSWORD)
    assert users("reset", "ana", "--password-stdin", stdin="another long one\n").returncode == 0
    assert accounts.owner_of(token) is None and accounts.check("ana", "another long one")  # a reset ends tokens
    assert users("remove", "ana").returncode == 0
    assert not accounts.check("ana", "another long one")
    gone = users("remove", "ana")
    assert gone.returncode == 2 and "no user 'ana'" in gone.stderr
    export = subprocess.run(
        [sys.executable, "-m", "tether", "audit", "export"], cwd=tmp_path, capture_output=True, text=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}, timeout=60,
    )  # fmt: skip
    assert export.returncode == 0 and export.stdout == ""  # no server ran: nothing was seen or decided


def test_tether_audit_export_prints_the_servers_log_as_json_lines(team: Team) -> None:
    import json

    item = paused_item(team, "Refund A1234")
    with team.api("bo") as bo:
        assert approve(bo, item).status_code == 200
    export = subprocess.run(
        [sys.executable, "-m", "tether", "audit", "export"], cwd=team.served.home, capture_output=True, text=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}, timeout=60,
    )  # fmt: skip
    lines = [json.loads(line) for line in export.stdout.splitlines()]
    assert lines == team.audit()
    assert any(e["step"] == "decided" and e["who"] == "user:bo" and e["run_id"] == item["run_id"] for e in lines)
