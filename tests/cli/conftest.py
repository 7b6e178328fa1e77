"""Fixtures for the command-line tests: real ``tether`` processes, scripted brains.

Every test runs the ``tether`` command users run (the console script installed
beside this Python) as a subprocess, or under a pseudo-terminal with pexpect,
with a clean environment: no model or key variables, ``HOME`` pointing at an
empty directory so no user config leaks in, and this worktree's sources first
on ``PYTHONPATH``. Brains come from ``--model scripted:FILE``; tools are the
real workspace toolkit, whose shell and python tools run in the real
bubblewrap sandbox.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pexpect
import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")
TETHER = str(Path(sys.executable).parent / "tether")  # what `pip install -e '.[cli]'` put on PATH


@pytest.fixture(scope="session")
def tether_script() -> str:
    """The path of the ``tether`` command."""
    assert os.access(TETHER, os.X_OK), f"the tether console script is missing: {TETHER} (pip install -e '.[cli]')"
    return TETHER


@dataclass(frozen=True)
class Done:
    """A finished ``tether`` process."""

    code: int
    out: str
    err: str

    def lines(self) -> list[str]:
        return self.out.splitlines()


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TETHER_", "OPENAI", "ANTHROPIC", "PYTEST", "VISUAL", "EDITOR"))
    }
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), PYTHONPATH=SRC, NO_COLOR="1")
    env.update(extra)
    return env


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def cli_env(home: Path) -> Callable[..., dict[str, str]]:
    """``cli_env(**extra)``: the clean environment the tests run ``tether`` in."""
    return lambda **extra: clean_env(home, **extra)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """The workspace the agent works in."""
    w = tmp_path / "ws"
    w.mkdir()
    (w / "notes.txt").write_text("buy milk\n")
    return w


@pytest.fixture
def tether(home: Path, ws: Path, tether_script: str) -> Callable[..., Done]:
    """``tether(*args, cwd=ws, env={...}, stdin="")``: run the command line to its end."""

    def run(
        *args: str,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        stdin: str = "",
        python_prelude: str | None = None,
    ) -> Done:
        argv = [tether_script, *args]
        if python_prelude is not None:
            code = f"{python_prelude}\nimport sys\nfrom tether.cli import main\nmain(sys.argv[1:])"
            argv = [sys.executable, "-c", code, *args]
        done = subprocess.run(
            argv,
            cwd=cwd or ws,
            env=clean_env(home, **(env or {})),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return Done(done.returncode, done.stdout, done.stderr)

    return run


@pytest.fixture
def script(tmp_path: Path) -> Callable[[list[Any]], str]:
    """``script([...replies])`` -> the ``--model`` value of a scripted brain."""
    count = iter(range(1000))

    def write(replies: list[Any]) -> str:
        path = tmp_path / f"script{next(count)}.json"
        path.write_text(json.dumps(replies))
        return f"scripted:{path}"

    return write


@pytest.fixture
def spawn(cli_env, ws: Path, tether_script: str) -> Iterator[Callable[..., pexpect.spawn]]:
    """``spawn(*args, cwd=ws)``: ``tether`` under a pseudo-terminal (pexpect), closed at the end."""
    children: list[pexpect.spawn] = []

    def start(*args: str, cwd: Path | None = None) -> pexpect.spawn:
        env = cli_env(TERM="xterm", COLUMNS="200", LINES="40")
        child = pexpect.spawn(
            tether_script,
            list(args),
            cwd=str(cwd or ws),
            env=env,
            encoding="utf-8",
            dimensions=(40, 200),
            timeout=30,
        )
        children.append(child)
        return child

    yield start
    for child in children:
        child.close(force=True)
