"""The cost of growth: CPU per step as the history gets longer and as more tools are offered.

Run: python bench/bench_growth.py   (prints two small tables; nothing here is a test)

Over HTTP against bench_http.py's loopback mock, with the same agent (one
``OpenAICompatible`` provider, an async ``add(a, b)`` tool): one run at a time,
each configuration in a fresh process, tether then the bare httpx loop.

* history: a run of 10, 100 and 1,000 tool calls (the request body carries the
  whole history, so its cost per step grows with the run for both clients);
* tools: 1, 10 and 100 tools offered (add and never-called look-alikes), 10 calls a run.

A regression in how tether builds the request body shows as a ratio that grows
down a column. Read the ratios, not the µs: the machine may be shared.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_http


def row(label: str, base: str, runs: int, extra_tools: int = 0) -> None:
    cpu = {kind: bench_http.measure(kind, 1, runs, base, extra_tools)["cpu_us_per_step"] for kind in ("tether", "bare")}
    print(f"{label:>22}{cpu['bare']:>14.0f}{cpu['tether']:>16.0f}{cpu['tether'] / cpu['bare']:>10.2f}x", flush=True)


def main() -> None:
    server, port = bench_http.start_server()
    head = f"{'':>22}{'bare µs/step':>14}{'tether µs/step':>16}{'ratio':>11}"
    try:
        print(f"bench_growth: one run at a time, load average {os.getloadavg()[0]:.1f} at start\n{head}")
        for k, runs in ((10, 20), (100, 3), (1000, 1)):
            row(f"{k:,} steps, 1 tool", f"http://127.0.0.1:{port}/v1/k{k}", runs)
        for tools in (1, 10, 100):
            row(f"10 steps, {tools} tools", f"http://127.0.0.1:{port}/v1/k10", 10, tools - 1)
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
