"""MCP call overhead: one tool call through tether.mcp, over stdio and HTTP, against a direct tool.

Run: ``.venv/bin/python bench/bench_mcp.py [calls]`` (needs ``tether[mcp]``). For each
transport it times the same ``add(a, b)`` called four ways:

* a direct tether ``@tool`` (the floor: no MCP at all);
* the MCP SDK's own client in the caller's event loop (what any MCP client pays);
* a tether tool from ``McpClient.tools()`` (validation, the hop to the client's
  thread, the SDK call, the result made into a note);
* whole agent steps with ``ScriptedModel`` calling that tool (runs of 20 calls, per call).

Wall times suffer from the machine's load; the CPU this process spends per call
(all its threads, not the server's) is the steadier measure of tether's share.

The server is the test suite's ``MCPServer`` (``tests/mcp/fixture_server.py``). Timings
live here, never in tests.
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from tether import Action, Agent, Invocation, Tool, tool
from tether.mcp import McpClient, McpServer
from tether.testing import ScriptedModel

SERVER = Path(__file__).resolve().parents[1] / "tests" / "mcp" / "fixture_server.py"
INVOCATION = Invocation("bench", "c1", "add")


@tool(effect="none")
async def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    return a + b


async def interleaved(
    calls: dict[str, Callable[[], Awaitable[Any]]], n: int
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Time each call n times, taking turns, so that a change in the machine's load hits all alike.

    Returns the wall times of each call (µs) and this process's CPU per call (µs, all
    threads: the caller's loop, the MCP client's thread; not the server's process).
    """
    for call in calls.values():
        for _ in range(min(20, n)):
            await call()  # warm up: connections, caches
    times: dict[str, list[float]] = {name: [] for name in calls}
    cpu = dict.fromkeys(calls, 0.0)
    for _ in range(n):
        for name, call in calls.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            await call()
            cpu[name] += time.process_time() - start_cpu
            times[name].append((time.perf_counter() - start) * 1e6)
    return times, {name: total * 1e6 / n for name, total in cpu.items()}


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


async def agent_steps(mcp_tool: Tool, n: int, per_run: int = 20) -> list[float]:
    """Per call: runs of ``per_run`` calls (one per model turn), each run's time divided by its calls."""
    times = []
    for _ in range(max(1, n // per_run)):
        script = [*(Action(mcp_tool.name, {"a": 1, "b": 2}) for _ in range(per_run)), "done"]
        agent = Agent(ScriptedModel(script), [mcp_tool], max_steps=per_run + 1)
        start = time.perf_counter()
        await agent.run("go")
        times.append((time.perf_counter() - start) * 1e6 / per_run)
    return times


def serve_http() -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(SERVER), "http", str(port)], stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            return proc, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("the HTTP server did not start")


async def bench(label: str, server: McpServer, sdk_target: Any, n: int) -> None:
    from mcp import Client

    async with Client(sdk_target, cache=None) as sdk, McpClient([server]) as client:
        mcp_add = next(t for t in await client.tools() if t.name.endswith("__add"))
        results, cpu = await interleaved(
            {
                "direct @tool": lambda: add.invoke({"a": 1, "b": 2}, INVOCATION),
                "MCP SDK client alone": lambda: sdk.call_tool("add", {"a": 1, "b": 2}),
                "tether MCP tool": lambda: mcp_add.invoke(mcp_add.validate({"a": 1, "b": 2}), INVOCATION),
            },
            n,
        )
        results["agent step with it"] = await agent_steps(mcp_add, n)
    print(f"\n{label}: {n} calls each")
    for name, times in results.items():
        used = f"   CPU here {cpu[name]:6.0f} µs" if name in cpu else ""
        print(f"  {name:24s} p50 {pct(times, 50):9.0f} µs   p95 {pct(times, 95):9.0f} µs{used}")
    extra = pct(results["tether MCP tool"], 50) - pct(results["MCP SDK client alone"], 50)
    extra_cpu = cpu["tether MCP tool"] - cpu["MCP SDK client alone"]
    print(f"  tether over the SDK: {extra:+.0f} µs at p50, {extra_cpu:+.0f} µs of CPU per call")


async def main(n: int) -> None:
    from mcp import StdioServerParameters

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average {load} on {os.cpu_count()} cores")
    stdio = McpServer("b", command=sys.executable, args=(str(SERVER), "stdio"))
    await bench("stdio", stdio, StdioServerParameters(command=sys.executable, args=[str(SERVER), "stdio"]), n)
    proc, url = serve_http()
    try:
        await bench("streamable HTTP (loopback)", McpServer("b", url=url), url, n)
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300))
