"""Sessions in the browser, attacked (issue 25 item 4), against a real server and Chromium.

* a cookie copied before sign-out is worth nothing after it;
* over https (here: the trusted proxy says so) the cookie is ``__Host-`` and
  ``Secure``; a client that is not the proxy cannot claim https;
* a page served from another port of the same host plants cookies three ways
  (its own session for the run pages, the victim's cookie name on the run
  pages, the victim's cookie name everywhere): the inbox accepts none of them,
  never shows the attacker's name, and records nothing under it;
* wrong tokens and passwords from one client never lock the right token, or
  another person, out from the same address.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tether.serve._people import Accounts

from .conftest import Served, paused, wait_run
from .test_browser import browser  # noqa: F401  (the Chromium fixture)
from .test_people import PASSWORD

PROXY_RULES = '[identity]\nproxy_addresses = ["127.0.0.2"]\n'


def sign_in(served: Served, **form: str) -> tuple[httpx.Client, str]:
    c = httpx.Client(base_url=served.url, follow_redirects=False)
    response = c.post("/login", data=form)
    assert response.status_code == 303, response.text
    return c, response.headers["set-cookie"].split(";")[0]


def test_a_cookie_stops_working_the_moment_its_session_signs_out(sqlite_served: Served) -> None:
    c, cookie = sign_in(sqlite_served, name="ana", token=sqlite_served.token)
    with httpx.Client(base_url=sqlite_served.url, headers={"cookie": cookie}) as copy:
        assert copy.get("/runs").status_code == 200  # the copy works while the session lives
        csrf = c.get("/").text.split('name="csrf-token" content="')[1].split('"')[0]
        out = c.post("/logout", data={"csrf": csrf})
        assert out.status_code == 303 and "Max-Age=0" in out.headers["set-cookie"]
        after = copy.get("/runs", follow_redirects=False)
        assert after.status_code == 303 and "/login" in after.headers["location"]
        assert copy.get("/api/runs").status_code == 401
    c.close()


def test_over_https_behind_the_proxy_the_cookie_is_host_prefixed_and_secure(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text(PROXY_RULES)
    served = Served(tmp_path, "sqlite", extra=("--rules", str(rules)))
    served.start("tests.serve.apps:support")
    try:
        https = {"x-forwarded-proto": "https"}
        proxy = httpx.HTTPTransport(local_address="127.0.0.2")
        with httpx.Client(base_url=served.url, transport=proxy, headers=https, follow_redirects=False) as c:
            cookie = c.post("/login", data={"name": "ana", "token": served.token}).headers["set-cookie"]
            parts = {p.strip() for p in cookie.split(";")}
            assert cookie.startswith("__Host-tether_session_")
            assert {"Secure", "Path=/", "HttpOnly", "SameSite=Strict"} <= parts
            assert not any(p.lower().startswith("domain=") for p in parts)
            pair = cookie.split(";")[0]
            assert c.get("/runs", headers={"cookie": pair}).status_code == 200
            # The same cookie name sent over plain http is not read: an http page cannot stand in for it.
            plain = c.get("/runs", headers={"cookie": pair, "x-forwarded-proto": "http"})
            assert plain.status_code == 303
        # A client that is not the proxy cannot say the browser used https.
        with httpx.Client(base_url=served.url, headers=https, follow_redirects=False) as direct:
            cookie = direct.post("/login", data={"name": "ana", "token": served.token}).headers["set-cookie"]
            assert cookie.startswith("tether_session_") and "Secure" not in cookie
    finally:
        served.stop()


class Planter:
    """An attacker's web server on another port of the same host: each page plants cookies."""

    def __init__(self) -> None:
        self.plants: list[str] = []
        planter = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                for cookie in planter.plants:
                    self.send_header("set-cookie", cookie)
                self.send_header("content-type", "text/html")
                self.end_headers()
                self.wfile.write(b"<p>nothing to see</p>")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def people_served(tmp_path: Path) -> Iterator[Served]:
    accounts = Accounts(tmp_path / ".tether" / "users.json")
    for name in ("ana", "bo"):
        accounts.add(name, PASSWORD)
    served = Served(tmp_path, "sqlite", extra=("--max-auth-failures", "3"))
    served.start("tests.serve.apps:support")
    try:
        yield served
    finally:
        served.stop()


@pytest.mark.parametrize("plant", ["own-session-on-run-pages", "victims-name-on-run-pages", "victims-name-everywhere"])
def test_a_page_on_another_port_cannot_plant_a_session_the_inbox_accepts(
    people_served: Served,
    browser: Any,  # noqa: F811
    plant: str,
) -> None:
    served = people_served
    with served.client() as api:
        run_id = paused(api, "Refund A1234")["run_id"]
    bo, bo_cookie = sign_in(served, name="bo", password=PASSWORD)  # the attacker has an account of their own
    bo.close()
    bo_name, bo_sid = bo_cookie.split("=", 1)

    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{served.url}/")
    page.fill("input[name=name]", "ana")
    page.fill("input[name=password]", PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_selector(".item")
    ana_name = next(c["name"] for c in context.cookies() if c["name"].startswith("tether_session_"))

    planter = Planter()
    try:
        planter.plants = {
            "own-session-on-run-pages": [f"{bo_name}={bo_sid}; Path=/runs"],
            "victims-name-on-run-pages": [f"{ana_name}={bo_sid}; Path=/runs"],
            "victims-name-everywhere": [f"{ana_name}={bo_sid}; Path=/"],
        }[plant]
        page.goto(planter.url)
        assert any(c["value"] == bo_sid for c in context.cookies())  # the browser took the planted cookie
    finally:
        planter.close()

    page.goto(f"{served.url}/runs/{run_id}")
    assert "/login" in page.url  # two cookies, or one whose name is not its session's: nobody is signed in
    assert page.locator(".user").all_inner_texts() == []
    page.goto(f"{served.url}/")
    if plant == "victims-name-everywhere":
        assert "/login" in page.url  # the victim's own cookie was overwritten: signed out, not signed in as bo
    else:
        assert page.locator(".user").all_inner_texts() == ["ana"]  # at / only the victim's cookie is sent
        page.locator('.item form.decide:not(.edit) button[value="approve"]').first.click()
        page.locator(".item").first.wait_for(state="detached")
    with served.client() as api:
        events = api.get(f"/api/runs/{run_id}/events").json()["events"]
    deciders = [e["event"]["decision"]["by"] for e in events if e["kind"] == "approval-decided"]
    assert deciders == ([] if plant == "victims-name-everywhere" else ["user:ana"])  # never as the attacker
    context.close()


def test_wrong_tokens_from_one_client_do_not_lock_the_right_token_out(tmp_path: Path) -> None:
    served = Served(tmp_path, "sqlite", extra=("--max-auth-failures", "3"))
    served.start("tests.serve.apps:support")
    try:
        with httpx.Client(base_url=served.url, headers={"authorization": "Bearer wrong"}) as mallory:
            codes = [mallory.get("/api/runs").status_code for _ in range(6)]
        assert codes[:3] == [401, 401, 401] and set(codes[3:]) == {429}
        with served.client() as right:  # the same address, the right token
            assert right.get("/api/runs").status_code == 200
        with httpx.Client(base_url=served.url, follow_redirects=False) as form:
            assert form.post("/login", data={"name": "x", "token": "wrong"}).status_code == 429
            assert form.post("/login", data={"name": "ana", "token": served.token}).status_code == 303
    finally:
        served.stop()


def test_wrong_passwords_for_one_person_do_not_lock_out_another(people_served: Served) -> None:
    with httpx.Client(base_url=people_served.url, follow_redirects=False) as c:
        codes = [c.post("/login", data={"name": "bo", "password": "not it at all"}).status_code for _ in range(5)]
        assert codes[:3] == [401, 401, 401] and set(codes[3:]) == {429}
        assert c.post("/login", data={"name": "bo", "password": PASSWORD}).status_code == 429  # bo waits a minute
        assert c.post("/login", data={"name": "ana", "password": PASSWORD}).status_code == 303  # ana does not
    with people_served.client() as api:
        run = paused(api, "Refund C555")
        assert wait_run(api, run["run_id"], "paused")["status"] == "paused"
