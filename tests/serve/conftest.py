"""A real ``tether serve`` in a child process, on loopback, over SQLite or PostgreSQL.

:class:`Served` starts ``python -m tether serve tests.serve.apps:...`` in a
temporary directory (its home: the store, the token and the key live there),
waits until it answers, and hands out ``httpx`` clients with the token. It can
be stopped gently (SIGTERM), killed (SIGKILL) and started again on the same
store. PostgreSQL servers get a schema of their own, dropped afterwards, and
the token and key by environment (a PostgreSQL store has no directory).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
PG_DSN = os.environ.get("TETHER_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
APPS = ("tests.serve.apps:support", "tests.serve.apps:echo", "tests.serve.apps:slow", "tests.serve.apps:desk")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """One server process (and the ones that replace it on the same store)."""

    def __init__(self, home: Path, backend: str, *, extra: tuple[str, ...] = ()) -> None:
        self.home, self.backend, self.extra = home, backend, extra
        self.port = free_port()
        self.schema = f"tether_serve_{uuid.uuid4().hex[:12]}"
        self.oracle = home / "oracle.jsonl"
        self.gates = home / "gates"
        self.gates.mkdir(parents=True, exist_ok=True)
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
            "TETHER_TEST_ORACLE": str(self.oracle),
            "TETHER_TEST_GATES": str(self.gates),
        }
        if backend == "postgres":
            self.store = f"{PG_DSN}?schema={self.schema}"
            self.env["TETHER_SERVE_TOKEN"] = "t" * 8 + uuid.uuid4().hex * 2
            self.env["TETHER_SIGNING_KEY"] = uuid.uuid4().hex * 2
        else:
            self.store = "sqlite:///.tether/runs.db"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = home / "server.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token(self) -> str:
        if "TETHER_SERVE_TOKEN" in self.env:
            return self.env["TETHER_SERVE_TOKEN"]
        return (self.home / ".tether" / "serve.token").read_text().strip()

    def start(self, *apps: str) -> Served:
        args = [sys.executable, "-m", "tether", "serve", *(apps or APPS), "--store", self.store]
        args += ["--port", str(self.port), "--max-auth-failures", "1000", *self.extra]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(args, cwd=self.home, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"the server exited ({self.proc.returncode}):\n{self.log.read_text()}")
            try:
                if httpx.get(f"{self.url}/login", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.05)
        raise AssertionError(f"the server never answered:\n{self.log.read_text()}")

    def client(self, **kw: Any) -> httpx.Client:
        headers = {"authorization": f"Bearer {self.token}", **kw.pop("headers", {})}
        return httpx.Client(base_url=self.url, headers=headers, timeout=kw.pop("timeout", 30), **kw)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc = None

    def oracle_lines(self) -> list[list[Any]]:
        if not self.oracle.exists():
            return []
        return [json.loads(line) for line in self.oracle.read_text().splitlines() if line.strip()]

    def drop(self) -> None:
        if self.backend == "postgres":
            import psycopg
            from psycopg import sql

            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema)))


def check_postgres() -> None:
    import psycopg

    try:
        with psycopg.connect(PG_DSN, connect_timeout=10):
            pass
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL at TETHER_PG_DSN={PG_DSN!r} does not answer: {exc}", pytrace=False)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    """A running server over SQLite, then over PostgreSQL."""
    if request.param == "postgres":
        check_postgres()
    s = Served(tmp_path, request.param)
    try:
        yield s.start()
    finally:
        s.stop()
        s.drop()


@pytest.fixture
def sqlite_served(tmp_path: Path) -> Iterator[Served]:
    s = Served(tmp_path, "sqlite")
    try:
        yield s.start()
    finally:
        s.stop()


# -- waiting for a run -------------------------------------------------------------------


def wait_run(client: httpx.Client, run_id: str, *statuses: str, timeout: float = 30.0) -> dict[str, Any]:
    """The run once its status is one of ``statuses`` (a liveness bound, not a speed claim)."""
    deadline = time.monotonic() + timeout
    while True:
        run = client.get(f"/api/runs/{run_id}").json()
        if run.get("status") in statuses:
            return run  # type: ignore[no-any-return]
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} is {run.get('status')!r}, never {statuses}: {run}")
        time.sleep(0.05)


def start(client: httpx.Client, task: str, agent: str = "support", **body: Any) -> dict[str, Any]:
    response = client.post("/api/runs", json={"agent": agent, "input": task, **body})
    assert response.status_code in (200, 201), response.text
    return response.json()  # type: ignore[no-any-return]


def paused(client: httpx.Client, task: str, agent: str = "support") -> dict[str, Any]:
    run = start(client, task, agent)
    return wait_run(client, run["run_id"], "paused", "needs-decision")
