"""Instructions per HTTP step, counted by callgrind: tether against the bare httpx loop.

Run: python bench/callgrind_http.py [C]  (needs valgrind; C concurrent runs, 1 by default)

It starts bench_http.py's loopback mock (outside valgrind) and runs one client
in a fresh interpreter under ``valgrind --tool=callgrind`` twice, with 2 and
with 6 rounds of C runs (K = 10 add() calls and a final answer each), and
divides the difference by the extra steps: start-up, imports and the warm-up
cancel out, and the figure does not move with the machine's load. The server's
work is not counted (it runs in its own process).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_http

PROGRAM = """
import asyncio, sys
sys.path.insert(0, {bench!r})
import bench_http
kind, concurrency, runs, url = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
asyncio.run(bench_http.round_of(kind, concurrency, runs, url))
"""


def instructions(kind: str, concurrency: int, runs: int, url: str) -> int:
    program = PROGRAM.format(bench=os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-c", program]
        done = subprocess.run([*argv, kind, str(concurrency), str(runs), url], capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"the measured program failed:\n{done.stderr[-3000:]}")
        found = re.search(r"Collected : (\d+)", done.stderr)
        assert found, done.stderr[-2000:]
        return int(found.group(1))


def main(concurrency: int) -> None:
    server, port = bench_http.start_server()
    url = f"http://127.0.0.1:{port}/v1"
    steps = 4 * concurrency * (bench_http.K + 1)  # 6 rounds minus 2 rounds
    try:
        per_step = {}
        for kind in ("tether", "bare"):
            low = instructions(kind, concurrency, 2 * concurrency, url)
            high = instructions(kind, concurrency, 6 * concurrency, url)
            per_step[kind] = (high - low) / steps
            print(f"{kind:<7} instructions per step at C={concurrency}: {per_step[kind]:>12,.0f}", flush=True)
        print(f"tether / bare: {per_step['tether'] / per_step['bare']:.2f}x")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
