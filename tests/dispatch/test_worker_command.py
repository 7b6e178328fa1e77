"""``tether worker``: a real process on the shared PostgreSQL, fed by the queue, stopped by SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from durability.conftest import pg_url
from durability.harness import PG_DSN
from tether import Message, RunStarted
from tether.dispatch.procrastinate import ProcrastinateDispatcher
from tether.stores.postgres import PostgresStore

pytestmark = pytest.mark.postgres
APP = '''
from tether import Action, Agent, FunctionPolicy, tool

@tool(effect="none")
async def step(n: int) -> int:
    """A step."""
    return n

desk = Agent(FunctionPolicy(lambda c, t: "done" if any(m.role == "tool" for m in c) else Action("step", {"n": 1})),
             [step], name="desk")
'''


def tether(*args: str, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen([sys.executable, "-m", "tether", *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def test_a_worker_needs_a_postgresql_store(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)
    out = tether("worker", "app:desk", "--store", "sqlite:///runs.db", cwd=tmp_path)
    _, err = out.communicate(timeout=60)
    assert out.returncode == 2 and "postgresql://" in err


async def test_the_worker_command_advances_queued_runs_and_stops_on_sigterm(
    tmp_path: Path, store_schema: str, queue_schema: str
) -> None:
    (tmp_path / "app.py").write_text(APP)
    proc = tether("worker", "app:desk", "--store", pg_url(store_schema), "--queue-schema", queue_schema,
                  "--concurrency", "4", "--sweep-every", "1", cwd=tmp_path)  # fmt: skip
    store = await PostgresStore.connect(PG_DSN, schema=store_schema)
    try:
        from app import desk  # type: ignore[import-not-found]
    except ImportError:
        sys.path.insert(0, str(tmp_path))
        from app import desk  # type: ignore[import-not-found]
    try:
        async with ProcrastinateDispatcher(PG_DSN, schema=queue_schema) as queue:
            for i in range(20):
                first = RunStarted(f"r{i}", (Message.user("go"),), False, desk.fingerprint, "desk")
                await store.append(f"r{i}", [first], expected_seq=0)
                await queue.submit(f"r{i}", "desk")
        for _ in range(1500):
            if len(await store.list_runs("finished")) == 20:
                break
            await asyncio.sleep(0.02)
        assert len(await store.list_runs("finished")) == 20
    finally:
        await store.aclose()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    assert "tether worker: desk over postgresql://" in out and "stopped" in err
