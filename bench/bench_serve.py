"""tether serve benchmarks: what the server adds per step, how fast a decision resumes a run, SSE fan-out.

Run: python bench/bench_serve.py  (prints tables; nothing here is a test)

* **Server-added CPU per step.** The same 20-step run (one model reply and one
  tool call per step, SQLite store) run 20 times: by the library in a process
  of its own, then by a real ``tether serve`` (started over the API, advanced by
  its workers). CPU is read from ``/proc/<pid>/stat`` of each process; the
  server's idle CPU over the same wall time (its change watcher) is shown apart.
* **Decision to resume.** A run pauses for approval; the time from the moment a
  decision is sent until the server's worker commits the resumed
  ``run-started`` (its ``at``, same machine clock). Through the API, and
  through ``record_decisions`` from another process (noticed by the store's
  change notifications: SQLite polling, PostgreSQL LISTEN/NOTIFY).
* **One run to 100 SSE subscribers.** 100 clients stream one run of 30 steps;
  the delay from each event's commit to its arrival at each subscriber, and
  the server's CPU meanwhile.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from tether import Action, Agent, FunctionPolicy, record_decisions, tool

ROOT = Path(__file__).resolve().parents[1]
PG_DSN = os.environ.get("TETHER_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
STEPS = 20
RUNS = 20
REPEATS = 5


@tool(effect="none")
async def look_up(n: int) -> str:
    """Look something up."""
    return f"record {n}: status shipped, 2 items, carrier DHL"


@tool(effect="none")
async def tick(n: int) -> str:
    """Wait a little (a tool that does some I/O)."""
    await asyncio.sleep(0.02)
    return f"tick {n}"


@tool(approval=True)
async def send(text: str) -> str:
    """Send a message (needs approval)."""
    return "sent"


def _steps_brain(tool_name: str, steps: int) -> Any:
    def brain(context: Any, tools: Any) -> Any:
        done = sum(m.role == "tool" for m in context)
        return Action(tool_name, {"n": done}, "looking it up") if done < steps - 1 else "done"

    return brain


def steps() -> Agent:
    return Agent(FunctionPolicy(_steps_brain("look_up", STEPS)), [look_up], name="steps")


def ticks() -> Agent:
    return Agent(FunctionPolicy(_steps_brain("tick", 30)), [tick], name="ticks", max_steps=100)


def gated() -> Agent:
    def brain(context: Any, tools: Any) -> Any:
        return "sent it" if any(m.role == "tool" for m in context) else Action("send", {"text": "hi"})

    return Agent(FunctionPolicy(brain), [send], name="gated")


# -- helpers ------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, home: Path, store: str, env: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}", **env}
        args = [
            sys.executable,
            "-m",
            "tether",
            "serve",
            "bench.bench_serve:steps",
            "bench.bench_serve:ticks",
            "bench.bench_serve:gated",
            "--store",
            store,
            "--port",
            str(self.port),
            "--workers",
            "8",
        ]
        self.log = open(home / "server.log", "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(args, cwd=home, env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        self.token = env.get("TETHER_SERVE_TOKEN") or ""
        self.db = home / ".tether" / "runs.db"
        for _ in range(600):
            try:
                if httpx.get(f"{self.url}/login", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)
        if not self.token:
            self.token = (home / ".tether" / "serve.token").read_text().strip()
        self.headers = {"authorization": f"Bearer {self.token}"}

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)
        self.log.close()


async def wait_status(c: httpx.AsyncClient, run_id: str, *statuses: str) -> dict[str, Any]:
    while True:
        run = (await c.get(f"/api/runs/{run_id}")).json()
        if run["status"] in statuses:
            return run  # type: ignore[no-any-return]
        await asyncio.sleep(0.02)


# -- 1. server-added CPU per step ---------------------------------------------------------


def library_cpu(home: Path) -> float:
    """CPU seconds of a process that runs the same runs with the library alone (imports excluded)."""
    code = (
        "import asyncio, time, sys\n"
        "from bench.bench_serve import steps, RUNS\n"
        "from tether.stores.sqlite import SQLiteStore\n"
        "async def main():\n"
        f"    store = SQLiteStore({str(home / 'lib.db')!r})\n"
        "    agent = steps(); agent.store = store\n"
        "    c0 = time.process_time()\n"
        "    for n in range(RUNS):\n"
        "        assert (await agent.run('go')).status == 'finished'\n"
        "    print(time.process_time() - c0)\n"
        "asyncio.run(main())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"},
    )
    return float(out.stdout.strip())


async def served_cpu(server: Server) -> tuple[float, float, float]:
    """(CPU seconds for RUNS runs, wall seconds, idle CPU seconds over the same wall time)."""
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers, timeout=30) as c:
        await asyncio.sleep(1.0)
        c0, t0 = cpu_seconds(server.proc.pid), time.perf_counter()
        ids = {
            (await c.post("/api/runs", json={"agent": "steps", "input": "go"})).json()["run_id"] for _ in range(RUNS)
        }
        while not ids <= await _finished(server.db):  # read from the file: no request adds to the server's CPU
            await asyncio.sleep(0.1)
        busy, wall = cpu_seconds(server.proc.pid) - c0, time.perf_counter() - t0
        c1 = cpu_seconds(server.proc.pid)
        await asyncio.sleep(wall)
        return busy, wall, cpu_seconds(server.proc.pid) - c1


async def _finished(db: Path) -> set[str]:
    from tether.stores.sqlite import SQLiteStore

    store = SQLiteStore(db)
    try:
        return {i.run_id for i in await store.list_runs("finished", limit=100_000)}
    finally:
        store.close()


# -- 2. decision to resume ----------------------------------------------------------------


async def resume_latency(server: Server, store_url: str, key: bytes, via: str, n: int = 15) -> list[float]:
    out = []
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers, timeout=30) as c:
        for _ in range(n):
            run_id = (await c.post("/api/runs", json={"agent": "gated", "input": "go"})).json()["run_id"]
            run = await wait_status(c, run_id, "paused")
            item = run["items"][0]
            t0 = time.time()
            if via == "api":
                url = f"/api/runs/{run_id}/items/{item['call_id']}/approve"
                assert (await c.post(url, json={"args_hash": item["args_hash"]})).status_code == 200
            else:
                await _record_elsewhere(store_url, run_id, item["call_id"], key)
            await wait_status(c, run_id, "finished")
            events = (await c.get(f"/api/runs/{run_id}/events")).json()["events"]
            resumed = [e["at"] for e in events if e["kind"] == "run-started" and e["event"]["resumed"]]
            out.append((resumed[-1] - t0) * 1000)
    return out


async def _record_elsewhere(store_url: str, run_id: str, call_id: str, key: bytes) -> None:
    from tether.stores import open_store

    store = open_store(store_url)
    try:
        await record_decisions(store, run_id, lambda s: s.approve(call_id, by="cli:bench", key=key))
    finally:
        await store.aclose()


# -- 3. one run, 100 subscribers ----------------------------------------------------------


async def fan_out(server: Server, subscribers: int = 100) -> tuple[list[float], int, int, float]:
    """(delays in ms, events each subscriber got (min), expected, server CPU seconds)."""
    async with httpx.AsyncClient(
        base_url=server.url, headers=server.headers, timeout=60, limits=httpx.Limits(max_connections=subscribers + 10)
    ) as c:
        run_id = f"fan-{uuid.uuid4().hex[:8]}"
        delays: list[float] = []
        counts: list[int] = []
        ready = asyncio.Event()
        connected = 0

        async def subscribe() -> None:
            nonlocal connected
            got = 0
            async with c.stream("GET", f"/api/runs/{run_id}/stream") as response:
                connected += 1
                if connected == subscribers:
                    ready.set()
                async for line in response.aiter_lines():
                    if line.startswith("data: ") and '"at": ' in line:
                        at = float(line.split('"at": ')[-1].rstrip("}").split(",")[0])
                        delays.append((time.time() - at) * 1000)
                        got += 1
            counts.append(got)

        await c.post("/api/runs", json={"agent": "ticks", "input": "go", "run_id": run_id})
        c0 = cpu_seconds(server.proc.pid)
        tasks = [asyncio.create_task(subscribe()) for _ in range(subscribers)]
        await asyncio.wait_for(ready.wait(), 60)
        await asyncio.gather(*tasks)
        cpu = cpu_seconds(server.proc.pid) - c0
        total = len((await c.get(f"/api/runs/{run_id}/events")).json()["events"])
    return delays, min(counts), total, cpu


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        home = Path(d)
        server = Server(home, "sqlite:///.tether/runs.db", {})
        try:
            libs, served = [], []
            for _ in range(REPEATS):  # alternated, medians: the machine is shared
                libs.append(library_cpu(home))
                served.append(await served_cpu(server))
            lib = statistics.median(libs)
            busy = statistics.median(b for b, _, _ in served)
            wall = statistics.median(w for _, w, _ in served)
            idle = statistics.median(i for _, _, i in served)
            n = RUNS * STEPS
            print(f"## Server-added CPU per step ({RUNS} runs x {STEPS} steps, SQLite, median of {REPEATS})\n")
            print("| | CPU per step |\n|---|---|")
            print(f"| library alone | {lib / n * 1e6:.0f} µs |")
            print(f"| tether serve (API start, workers) | {busy / n * 1e6:.0f} µs |")
            added = (busy - lib) / n * 1e6
            print(f"| added by the server | {added:+.0f} µs (its idle watcher: {idle / wall * 100:.1f}% of a core) |\n")
            key = (home / ".tether" / "signing.key").read_text().strip()
            api = await resume_latency(server, "", b"", "api")
            other = await resume_latency(server, str(home / ".tether" / "runs.db"), bytes.fromhex(key), "elsewhere")
            delays, got, total, cpu = await fan_out(server)
        finally:
            server.stop()
        pg = await _postgres_latency(home)
    print("## Decision to resume (ms, p50 / p95 / max)\n")
    print("| decision recorded by | store | p50 | p95 | max |\n|---|---|---|---|---|")
    for label, store, values in (
        ("the API", "SQLite", api),
        ("another process (record_decisions)", "SQLite", other),
        *pg,
    ):
        print(f"| {label} | {store} | {pct(values, 0.5):.1f} | {pct(values, 0.95):.1f} | {max(values):.1f} |")
    print(f"\n## One run streamed to 100 SSE subscribers ({total} events)\n")
    print(
        f"every subscriber got {got} of {total} events; commit-to-arrival delay p50 {pct(delays, 0.5):.1f} ms, "
        f"p99 {pct(delays, 0.99):.1f} ms, max {max(delays):.1f} ms; server CPU {cpu * 1000:.0f} ms "
        f"({cpu / (total * 100) * 1e6:.0f} µs per event delivered)"
    )


async def _postgres_latency(home: Path) -> list[tuple[str, str, list[float]]]:
    try:
        import psycopg

        with psycopg.connect(PG_DSN, connect_timeout=3):
            pass
    except Exception:
        return []
    schema = f"bench_serve_{uuid.uuid4().hex[:8]}"
    url = f"{PG_DSN}?schema={schema}"
    key = uuid.uuid4().hex * 2
    pg_home = home / "pg"
    pg_home.mkdir()
    server = Server(pg_home, url, {"TETHER_SERVE_TOKEN": "b" * 64, "TETHER_SIGNING_KEY": key})
    try:
        api = await resume_latency(server, url, bytes.fromhex(key), "api")
        other = await resume_latency(server, url, bytes.fromhex(key), "elsewhere")
    finally:
        server.stop()
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return [("the API", "PostgreSQL", api), ("another process (record_decisions)", "PostgreSQL", other)]


if __name__ == "__main__":
    asyncio.run(main())
