"""Telemetry benchmarks: what OpenTelemetry tracing adds to each step of the loop, and what the
observer hook costs when nobody observes.

Run: python bench/bench_telemetry.py [--against OTHER_SRC]   (prints a table; nothing here is a test)

* off / on: CPU time per step of the bench_core loop (a scripted policy, an
  async tool, 10 steps a run), without observers and with
  ``Tracing(tracer)`` on the real SDK (a ``TracerProvider`` with a
  ``SimpleSpanProcessor`` into an in-memory exporter, so exporting is part of
  the cost) or on the API's no-op tracer (the cost of building the spans
  only). The variants alternate run by run, so machine noise hits them alike.
* ``--against /work/main/src``: the same loop, no observers, on another
  source tree (e.g. main without the hook) against this one, in alternating
  fresh interpreters.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tether import Agent, Message, tool
from tether.messages import ToolCall
from tether.telemetry import Tracing
from tether.testing import ScriptedModel

STEPS = 10
HERE = Path(__file__).resolve().parents[1] / "src"


@tool(effect="none")
async def ping(n: int) -> int:
    """Return n."""
    return n


def replies() -> list[Any]:
    calls = [Message.assistant("", [ToolCall(f"c{i}", "ping", '{"n": 1}')]) for i in range(STEPS - 1)]
    return [*calls, "done"]


async def one_run(observers: list[Any]) -> float:
    """CPU µs per step of one run."""
    agent = Agent(ScriptedModel(replies()), [ping], observers=observers)
    t0 = time.process_time_ns()
    result = await agent.run("go")
    spent = (time.process_time_ns() - t0) / 1000 / STEPS
    assert result.status == "finished"
    return spent


def on_off(runs: int) -> list[tuple[str, str]]:
    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    variants: dict[str, list[Any]] = {
        "off": [],
        "on, SDK": [Tracing(provider.get_tracer("bench"))],
        "on, no-op tracer": [Tracing(trace.NoOpTracer())],
        "on, SDK, content": [Tracing(provider.get_tracer("bench"), capture_content=True)],
    }

    async def main() -> dict[str, float]:
        samples: dict[str, list[float]] = {name: [] for name in variants}
        for i in range(runs + 50):
            for name, observers in variants.items():
                spent = await one_run(observers)
                if i >= 50:  # warmed up
                    samples[name].append(spent)
            exporter.clear()
        return {name: statistics.median(s) for name, s in samples.items()}

    med = asyncio.run(main())
    off = med["off"]
    rows = [(f"loop CPU per step, telemetry off (µs, median of {runs} runs)", f"{off:.1f}")]
    for name in list(variants)[1:]:
        rows.append((f"loop CPU per step, telemetry {name} (µs)", f"{med[name]:.1f}"))
        extra = med[name] - off
        rows.append((f"  extra per step, {name} (µs / %)", f"{extra:+.1f} / {100 * extra / off:+.0f}%"))
    return rows


def unused_hook_ns() -> list[tuple[str, str]]:
    """What the hook does per commit when nobody observes: loop over an empty list of watchers."""
    import timeit

    n = 2_000_000
    empty = timeit.timeit("for w in watchers: w.event(ev)", setup="watchers = []; ev = None", number=n)
    bare = timeit.timeit("pass", number=n)
    return [("the unused hook, per commit (ns: an empty loop over no watchers)", f"{(empty - bare) / n * 1e9:.0f}")]


CHILD = """
import asyncio, statistics, sys, time
sys.path.insert(0, {src!r})
from tether import Agent, Message, tool
from tether.messages import ToolCall
from tether.testing import ScriptedModel

@tool(effect="none")
async def ping(n: int) -> int:
    return n

async def main():
    out = []
    for i in range({runs} + 50):
        calls = [Message.assistant("", [ToolCall(f"c{{j}}", "ping", '{{"n": 1}}')]) for j in range({steps} - 1)]
        agent = Agent(ScriptedModel([*calls, "done"]), [ping])
        t0 = time.process_time_ns()
        await agent.run("go")
        if i >= 50:
            out.append((time.process_time_ns() - t0) / 1000 / {steps})
    print(statistics.median(out))

asyncio.run(main())
"""


def against(other: Path, rounds: int, runs: int) -> list[tuple[str, str]]:
    def median_us(src: Path) -> float:
        code = CHILD.format(src=str(src), runs=runs, steps=STEPS)
        return float(subprocess.check_output([sys.executable, "-c", code], text=True))

    theirs, ours = [], []
    for i in range(rounds):  # alternate which goes first, so a drift in load hits both alike
        if i % 2 == 0:
            theirs.append(median_us(other))
            ours.append(median_us(HERE))
        else:
            ours.append(median_us(HERE))
            theirs.append(median_us(other))
    a, b = statistics.median(theirs), statistics.median(ours)
    diffs = sorted(o - t for o, t in zip(ours, theirs, strict=True))
    low, high = diffs[len(diffs) // 4], diffs[(3 * len(diffs)) // 4]
    return [
        (f"loop CPU per step, no observers, {other} (µs, {rounds} interpreters x {runs} runs)", f"{a:.1f}"),
        ("loop CPU per step, no observers, this tree (µs)", f"{b:.1f}"),
        ("  paired difference, this tree - other: median [quartiles] (µs)",
         f"{statistics.median(diffs):+.1f} [{low:+.1f}, {high:+.1f}]"),
    ]  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, help="another src/ tree to compare the untraced loop with")
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    rows = on_off(args.runs) + unused_hook_ns()
    if args.against:
        rows += against(args.against, args.rounds, args.runs)
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v:>14}")
