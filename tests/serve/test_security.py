"""The server's security list, held against a real server on loopback."""

from __future__ import annotations

import contextlib
import html
import os
import re
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .conftest import Served, paused, wait_run


def operations(served: Served) -> list[tuple[str, str]]:
    with served.client() as c:
        doc = c.get("/openapi.json").json()
    out = []
    for path, methods in doc["paths"].items():
        for method in methods:
            out.append((method.upper(), re.sub(r"\{[^}]+\}", "x", path)))
    return out


def test_every_route_of_the_openapi_document_refuses_a_missing_or_wrong_token(sqlite_served: Served) -> None:
    ops = operations(sqlite_served)
    assert len(ops) >= 14
    with httpx.Client(base_url=sqlite_served.url) as anonymous:
        assert anonymous.get("/openapi.json").status_code == 401
        for method, path in ops:
            none = anonymous.request(method, path, json={})
            wrong = anonymous.request(method, path, json={}, headers={"authorization": "Bearer " + "0" * 64})
            assert (method, path, none.status_code, wrong.status_code) == (method, path, 401, 401)
            assert none.json()["error"]["code"] == "unauthorized"
            assert none.headers["www-authenticate"].startswith("Bearer")


def test_the_token_is_256_random_bits_in_a_file_only_its_owner_reads(sqlite_served: Served) -> None:
    path = sqlite_served.home / ".tether" / "serve.token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert re.fullmatch(r"[0-9a-f]{64}", path.read_text().strip())
    key = sqlite_served.home / ".tether" / "signing.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_a_client_sending_wrong_tokens_is_throttled(tmp_path: Path) -> None:
    served = Served(tmp_path, "sqlite", extra=("--max-auth-failures", "3")).start()
    try:
        with httpx.Client(base_url=served.url) as c:
            codes = [c.get("/api/runs", headers={"authorization": "Bearer nope"}).status_code for _ in range(5)]
            assert codes == [401, 401, 401, 429, 429]
            assert int(c.get("/api/runs", headers={"authorization": "Bearer nope"}).headers["retry-after"]) > 0
            assert c.get("/api/runs").status_code == 401  # no token: nothing to throttle
    finally:
        served.stop()


def test_a_wrong_host_and_a_cross_origin_post_are_refused_and_a_plain_client_is_not(sqlite_served: Served) -> None:
    with sqlite_served.client() as c:
        rebound = c.get("/api/runs", headers={"host": "evil.example"})
        assert rebound.status_code == 403 and rebound.json()["error"]["code"] == "host-not-allowed"
        assert c.get("/", headers={"host": f"evil.example:{sqlite_served.port}"}).status_code == 403
        body = {"agent": "echo", "input": "hi"}
        cross = c.post("/api/runs", json=body, headers={"origin": "http://evil.example"})
        assert cross.status_code == 403 and cross.json()["error"]["code"] == "cross-origin"
        assert c.post("/api/runs", json=body, headers={"origin": "null"}).status_code == 403
        assert c.post("/api/runs", json=body, headers={"sec-fetch-site": "cross-site"}).status_code == 403
        same = c.post("/api/runs", json=body, headers={"origin": sqlite_served.url})
        assert same.status_code == 201
        assert c.post("/api/runs", json=body).status_code == 201  # a program: no Origin, a token
        assert c.get("/api/runs", headers={"host": f"localhost:{sqlite_served.port}"}).status_code == 200


@contextlib.contextmanager
def login(served: Served, name: str = "ana") -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.url, follow_redirects=False) as c:
        assert c.get("/login").status_code == 200
        response = c.post("/login", data={"name": name, "token": served.token, "next": "/"})
        assert response.status_code == 303, response.text
        yield c


def test_the_login_form_hands_out_an_httponly_samesite_strict_cookie(sqlite_served: Served) -> None:
    with httpx.Client(base_url=sqlite_served.url) as c:
        wrong = c.post("/login", data={"name": "ana", "token": "guess"})
        assert wrong.status_code == 401 and "tether_session" not in wrong.headers.get("set-cookie", "")
        right = c.post("/login", data={"name": "ana", "token": sqlite_served.token})
        cookie = right.headers["set-cookie"]
        assert cookie.startswith("tether_session_")  # named after the session's id
        assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= {part.strip() for part in cookie.split(";")}
        assert c.get("/").status_code == 200
        assert c.get("/api/runs").status_code == 200  # the page's script reads the API with the cookie
        name, value = next(iter(right.cookies.items()))
    tampered = value[:-2] + ("00" if not value.endswith("00") else "11")
    with httpx.Client(base_url=sqlite_served.url, headers={"cookie": f"{name}={tampered}"}) as c:
        assert c.get("/api/runs").status_code == 401  # a tampered cookie is nobody's


def test_state_changing_requests_with_the_cookie_need_the_csrf_token(sqlite_served: Served) -> None:
    with sqlite_served.client() as api:
        item = paused(api, "Refund A1234")["items"][0]
    with login(sqlite_served) as c:
        _decide_with_the_cookie(sqlite_served, c, item)


def _decide_with_the_cookie(sqlite_served: Served, c: httpx.Client, item: dict) -> None:  # type: ignore[type-arg]
    page = c.get("/").text
    csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page).group(1)  # type: ignore[union-attr]
    assert c.post("/api/runs", json={"agent": "echo", "input": "x"}).status_code == 403
    assert (
        c.post("/api/runs", json={"agent": "echo", "input": "x"}, headers={"x-csrf-token": "0" * 32}).status_code == 403
    )
    assert c.post("/api/runs", json={"agent": "echo", "input": "x"}, headers={"x-csrf-token": csrf}).status_code == 201
    form = {"run_id": item["run_id"], "call_id": item["call_id"], "args_hash": item["args_hash"], "verdict": "approve"}
    assert c.post("/decide", data=form).status_code == 403  # no CSRF field
    assert c.post("/decide", data={**form, "csrf": "f" * 32}).status_code == 403
    assert c.post("/logout", data={}).status_code == 403
    with sqlite_served.client() as api:
        assert api.get(f"/api/runs/{item['run_id']}").json()["status"] == "paused"  # nothing was decided
    done = c.post("/decide", data={**form, "csrf": csrf})
    assert done.status_code == 303
    with sqlite_served.client() as api:
        run = wait_run(api, item["run_id"], "finished")
    assert "refunded" in run["output"]


def test_every_response_carries_a_strict_csp_and_refuses_framing(sqlite_served: Served) -> None:
    with login(sqlite_served) as c, sqlite_served.client() as api:
        for response in (c.get("/"), c.get("/runs"), c.get("/login"), api.get("/api/runs"), c.get("/static/inbox.js")):
            csp = response.headers["content-security-policy"]
            assert "default-src 'none'" in csp and "script-src 'self'" in csp and "'unsafe-inline'" not in csp
            assert "frame-ancestors 'none'" in csp
            assert response.headers["x-frame-options"] == "DENY"
            assert response.headers["x-content-type-options"] == "nosniff"
        assert "<script>" not in c.get("/").text and " style=" not in c.get("/").text  # nothing inline


def test_get_routes_change_nothing(sqlite_served: Served) -> None:
    with sqlite_served.client() as api:
        run = paused(api, "Refund A1234")
        before = api.get("/api/runs", params={"limit": 500}).json()
        run_id, call_id = run["run_id"], run["items"][0]["call_id"]
        with login(sqlite_served) as c:
            _get_everything(c, run_id, call_id)
        after = api.get("/api/runs", params={"limit": 500}).json()
    assert after == before


def _get_everything(c: httpx.Client, run_id: str, call_id: str) -> None:
    paths = [
        "/",
        "/runs",
        f"/runs/{run_id}",
        f"/fragments/items/{run_id}",
        f"/fragments/runs/{run_id}",
        "/api/runs",
        f"/api/runs/{run_id}",
        f"/api/runs/{run_id}/events",
        "/api/items",
        "/api/agents",
        "/openapi.json",
        f"/api/runs/{run_id}/items/{call_id}/approve",
        f"/decide?run_id={run_id}&call_id={call_id}&verdict=approve",
        f"/runs/{run_id}/cancel",
        "/logout",
        f"/api/runs/{run_id}/cancel",
    ]
    for path in paths:
        assert c.get(path).status_code in (200, 401, 404, 405), path


def race(served: Served, item: dict) -> dict[str, httpx.Response]:  # type: ignore[type-arg]
    """Ana approves and Bob denies ``item`` at the same moment, each with a client of their own."""
    url = f"/api/runs/{item['run_id']}/items/{item['call_id']}"
    results: dict[str, httpx.Response] = {}
    go = threading.Barrier(2)

    def decide(verdict: str, who: str) -> None:
        with served.client() as c:
            go.wait()
            results[who] = c.post(f"{url}/{verdict}", json={"args_hash": item["args_hash"], "by": who})

    threads = [threading.Thread(target=decide, args=a) for a in (("approve", "ana"), ("deny", "bob"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_two_reviewers_deciding_one_item_at_once_one_wins_and_the_other_sees_who(served: Served) -> None:
    for trial in range(8):
        with served.client() as api:
            item = paused(api, f"Refund A1234 (trial {trial})")["items"][0]
        results = race(served, item)
        codes = sorted(r.status_code for r in results.values())
        assert codes == [200, 409], {k: r.text for k, r in results.items()}
        winner = next(k for k, r in results.items() if r.status_code == 200)
        loser = results["bob" if winner == "ana" else "ana"].json()
        assert f"by api:{winner}" in loser["error"]["message"]
    with served.client() as api:
        runs = api.get("/api/runs", params={"limit": 500}).json()["runs"]
        for r in runs:
            wait_run(api, r["run_id"], "finished")
    assert len(served.oracle_lines()) <= 8  # each refund ran at most once (only the approved ones)


def test_serving_beyond_loopback_without_a_token_refuses_to_start(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tether", "serve", "tests.serve.apps:echo", "--host", "0.0.0.0", "--port", "1"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": f"{Path(__file__).parents[2] / 'src'}:{Path(__file__).parents[2]}"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "needs a token made beforehand" in out.stderr and "TETHER_SERVE_TOKEN" in out.stderr
    assert not (tmp_path / ".tether" / "serve.token").exists()


def test_the_server_listens_on_loopback_only(sqlite_served: Served) -> None:
    port = f"{sqlite_served.port:04X}"
    listening = [
        line.split()[1]
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
        if line.split()[1].endswith(f":{port}") and line.split()[3] == "0A"
    ]
    assert listening == [f"0100007F:{port}"]  # 127.0.0.1, nothing else
    assert not [
        line for line in Path("/proc/net/tcp6").read_text().splitlines()[1:] if line.split()[1].endswith(f":{port}")
    ]


@pytest.mark.parametrize(
    "payload", ["<script>alert(1)</script>", '<img src=x onerror="alert(1)">', "javascript:alert(1)"]
)
def test_arguments_are_rendered_as_escaped_text_in_every_page(sqlite_served: Served, payload: str) -> None:
    with sqlite_served.client() as api:
        run = paused(api, f"Refund A1234 {payload}")
    escaped = html.escape(payload, quote=True)
    with login(sqlite_served) as c:
        pages = [c.get("/").text, c.get(f"/runs/{run['run_id']}").text, c.get(f"/fragments/items/{run['run_id']}").text]
    for page in pages:
        assert escaped in page
        if escaped != payload:
            assert payload not in page
        assert not [href for href in re.findall(r'(?:href|src|action)="([^"]*)"', page) if "javascript" in href]
