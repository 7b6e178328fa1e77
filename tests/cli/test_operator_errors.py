"""What an operator meets: a missing database, a wrong URL, a port in use, a missing extra.

Each documented command (``tether serve``, ``tether worker`` and the commands
that open a store) is run as the real ``tether`` process against the real
failure: a PostgreSQL database that does not exist, a server that does not
answer, a port another process listens on, an extra whose module cannot be
imported. Each prints one line saying what to do, and exits with status 2.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

PG = os.environ.get("TETHER_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
NO_DATABASE = PG.rsplit("/", 1)[0] + "/tether_no_such_database"
KEY = {"TETHER_SIGNING_KEY": "ab" * 32}
APP = (
    "from tether import Agent, FunctionPolicy\ndesk = Agent(FunctionPolicy(lambda context, tools: 'hi'), name='desk')\n"
)


def one_line(done, *, code: int = 2) -> str:  # type: ignore[no-untyped-def]
    assert done.code == code, done
    assert "Traceback" not in done.err, done.err
    lines = done.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.err
    return lines[0]


@pytest.fixture
def app(ws: Path) -> str:
    (ws / "deskapp.py").write_text(APP)
    return "deskapp:desk"


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield int(other.getsockname()[1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.postgres
def test_serve_on_a_missing_database_is_one_line(tether, app: str) -> None:
    done = tether("serve", app, "--store", NO_DATABASE, "--port", str(free_port()), env=KEY)
    line = one_line(done)
    assert line.startswith("error: the server could not start: cannot connect to PostgreSQL")
    assert "tether_no_such_database" in line and line.endswith("(check --store)")
    assert "inbox:" not in done.out  # nothing advertised for a server that never served


@pytest.mark.postgres
def test_serve_with_workers_0_on_a_missing_database_is_one_line(tether, app: str) -> None:
    done = tether("serve", app, "--store", NO_DATABASE, "--workers", "0", "--port", str(free_port()), env=KEY)
    assert "tether_no_such_database" in one_line(done)


@pytest.mark.postgres
def test_worker_on_a_missing_database_is_one_line(tether, app: str) -> None:
    done = tether("worker", app, "--store", NO_DATABASE, env=KEY)
    line = one_line(done)
    assert line.startswith("error: the worker could not start: cannot connect to the queue's PostgreSQL")
    assert "tether_no_such_database" in line and done.out == ""


def test_serve_and_worker_on_a_server_that_does_not_answer_are_one_line(tether, app: str) -> None:
    nobody = f"postgresql://postgres@127.0.0.1:{free_port()}/x"
    assert "Connection refused" in one_line(
        tether("serve", app, "--store", nobody, "--port", str(free_port()), env=KEY)
    )
    assert "Connection refused" in one_line(tether("worker", app, "--store", nobody, env=KEY))


def test_serve_on_a_port_in_use_says_so_before_advertising_anything(tether, app: str, taken_port: int) -> None:
    done = tether("serve", app, "--port", str(taken_port))
    line = one_line(done)
    assert line == (
        f"error: port {taken_port} on 127.0.0.1 is in use (another tether serve?): stop the other server, "
        "or pick another port with --port"
    )
    assert done.out == ""  # neither the URL nor the token file of the server that holds the port


@pytest.mark.parametrize(
    "args",
    [
        ("serve", "deskapp:desk", "--store", "postgres:/nowhere"),
        ("worker", "deskapp:desk", "--store", "sqlite:///runs.db"),
        ("runs", "--store", "sqlite:/runs.db"),
        ("show", "r1", "--store", "mysql://db/x"),
        ("approve", "r1", "--store", "redis://localhost"),
        ("resume", "r1", "--store", "http://localhost"),
        ("serve", "deskapp:desk", "--notify", "ftp://hooks.example"),
    ],
)
def test_a_wrong_url_is_one_line(tether, app: str, args: tuple[str, ...]) -> None:
    line = one_line(tether(*args))
    assert "URL" in line or "url" in line or "postgresql://" in line


@pytest.mark.parametrize(
    ("args", "module", "extra"),
    [
        (("serve", "deskapp:desk"), "uvicorn", "serve"),
        (("serve", "deskapp:desk"), "starlette", "serve"),
        (("worker", "deskapp:desk", "--store", PG), "procrastinate", "workers"),
        (("serve", "deskapp:desk", "--store", PG, "--workers", "0"), "procrastinate", "workers"),
        (("runs", "--store", PG), "psycopg", "postgres"),
    ],
)
def test_a_missing_extra_is_one_line_naming_it(
    tether, app: str, args: tuple[str, ...], module: str, extra: str
) -> None:
    port = ("--port", str(free_port())) if args[0] == "serve" else ()
    done = tether(*args, *port, python_prelude=f"import sys; sys.modules[{module!r}] = None", env=KEY)
    assert f"pip install 'tether[{extra}]'" in one_line(done)
