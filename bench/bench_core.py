"""Core benchmarks: loop overhead per step, `import tether` time, Context append cost.

Run: python bench/bench_core.py  (prints a table; nothing here is a test)
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time

from tether import Action, Agent, Context, Message, tool
from tether.messages import ToolCall
from tether.testing import ScriptedModel

STEPS = 10


@tool(effect="none")
async def ping(n: int) -> int:
    """Return n."""
    return n


@tool(effect="none")
def ping_sync(n: int) -> int:
    """Return n (a sync tool: runs in a worker thread)."""
    return n


def _replies(name: str) -> list:
    calls = [Message.assistant("", [ToolCall(f"c{i}", name, '{"n": 1}')]) for i in range(STEPS - 1)]
    return [*calls, "done"]


async def _loop_us(name: str, tools: list, runs: int) -> float:
    samples = []
    for _ in range(runs):
        agent = Agent(ScriptedModel(_replies(name)), tools)
        t0 = time.process_time_ns()
        result = await agent.run("go")
        samples.append((time.process_time_ns() - t0) / 1000 / STEPS)
        assert result.status == "finished"
    return statistics.median(samples)


async def _nested_us(runs: int) -> float:
    """CPU per step of a child run (10 steps) inside a parent that delegates to it once."""
    samples = []
    for _ in range(runs):
        child = Agent(ScriptedModel(_replies("ping")), [ping], name="child")
        parent = Agent(ScriptedModel([Action("child", {"task": "go"}), "done"]), [child.as_tool()])
        t0 = time.process_time_ns()
        result = await parent.run("go")
        samples.append((time.process_time_ns() - t0) / 1000 / (STEPS + 2))
        assert result.status == "finished"
    return statistics.median(samples)


def loop_overhead() -> list[tuple[str, str]]:
    async def main() -> list[tuple[str, str]]:
        await _loop_us("ping", [ping], 50)  # warm up
        a = await _loop_us("ping", [ping], 500)
        s = await _loop_us("ping_sync", [ping_sync], 300)
        n = await _nested_us(300)
        return [
            ("loop CPU per step, async tool (µs, median of 500 runs)", f"{a:.1f}"),
            ("loop CPU per step, sync tool in a thread (µs)", f"{s:.1f}"),
            ("loop CPU per step, nested: a child run of 10 steps in a parent (µs)", f"{n:.1f}"),
        ]

    return asyncio.run(main())


def _import_ms(stmt: str, n: int = 15) -> float:
    code = f"import time; t=time.perf_counter(); {stmt}; print(time.perf_counter()-t)"
    times = [float(subprocess.check_output([sys.executable, "-c", code])) for _ in range(n)]
    return statistics.median(times) * 1000


def import_time() -> list[tuple[str, str]]:
    t = _import_ms("import tether")
    h = _import_ms("import httpx")
    return [
        ("import tether (ms, fresh interpreter, startup excluded)", f"{t:.1f}"),
        ("import httpx (ms)", f"{h:.1f}"),
        ("ratio tether / httpx (target <= 1.5)", f"{t / h:.2f}"),
    ]


def context_append() -> list[tuple[str, str]]:
    rows = []
    m = Message.user("x")
    for size in (10, 1_000, 100_000):
        ctx = Context([m] * size)
        ctx = ctx.add(m)  # now the tip of its own list
        n = 20_000
        t0 = time.perf_counter_ns()
        for _ in range(n):
            ctx = ctx.add(m)
        rows.append((f"Context.add at {size:,} messages (ns per add)", f"{(time.perf_counter_ns() - t0) / n:.0f}"))
    return rows


if __name__ == "__main__":
    rows = loop_overhead() + import_time() + context_append()
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v:>8}")
