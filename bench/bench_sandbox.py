"""Sandbox overhead: 200 sandboxed `true` calls against plain and unsandboxed ones.

Run: ``.venv/bin/python bench/bench_sandbox.py [calls]``. Prints p50/p95 per mode and
the sandbox's extra cost over a plain subprocess (the targets are
p50 <= 30 ms and p95 <= 60 ms extra), in an empty workspace. One more line shows a
workspace of 2,000 files with 5 nested repositories: before each command the sandbox
walks the workspace (to mount every ``.git`` read-only and check the disk budget),
which costs in proportion to its size. Timings live here, never in tests.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable

from tether.toolkits import Sandbox, UnsandboxedWarning, probe_sandbox


async def plain_true() -> None:
    proc = await asyncio.create_subprocess_exec("true")
    await proc.wait()


async def bare_bwrap() -> None:
    """The floor: bubblewrap with only the namespaces and a read-only /usr, none of our setup."""
    proc = await asyncio.create_subprocess_exec(
        "bwrap", "--unshare-all", "--unshare-user", "--uid", "65534", "--cap-drop", "ALL",
        "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
        "--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev", "--", "true",
    )  # fmt: skip
    await proc.wait()


def populate(ws: str) -> None:
    """2,000 small files in 100 folders, 5 of them nested git repositories."""
    for d in range(100):
        folder = os.path.join(ws, f"pkg{d}")
        os.makedirs(os.path.join(folder, ".git") if d % 20 == 0 else folder)
        for f in range(20):
            with open(os.path.join(folder, f"mod{f}.py"), "w") as out:
                out.write("x = 1\n")


async def measure(call: Callable[[], Awaitable[object]], n: int) -> list[float]:
    await call()  # warm up (the first sandboxed call also runs the probe)
    times = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        times.append((time.perf_counter() - start) * 1000)
    return times


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


async def main(n: int) -> None:
    if reason := probe_sandbox():
        sys.exit(f"no sandbox: {reason}")
    with tempfile.TemporaryDirectory() as ws, tempfile.TemporaryDirectory() as big:
        populate(big)
        sandbox, populated = Sandbox(ws), Sandbox(big)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnsandboxedWarning)
            unsafe = Sandbox(ws, unsafe_no_sandbox=True)
        modes = {
            "plain subprocess": plain_true,
            "limits only (unsafe_no_sandbox)": lambda: unsafe.run(["true"]),
            "bare bwrap (reference)": bare_bwrap,
            "sandboxed": lambda: sandbox.run(["true"]),
            "sandboxed, 2,000-file workspace": lambda: populated.run(["true"]),
        }
        results = {name: await measure(call, n) for name, call in modes.items()}
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    who = "root: unprivileged uid, idmapped workspace" if os.geteuid() == 0 else "non-root: the sandbox is you"
    print(f"{n} calls of `true` each; load average {load} on {os.cpu_count()} cores; {who}")
    for name, times in results.items():
        print(f"  {name:34s} p50 {percentile(times, 50):6.1f} ms   p95 {percentile(times, 95):6.1f} ms")
    base, boxed = results["plain subprocess"], results["sandboxed"]
    p50 = percentile(boxed, 50) - percentile(base, 50)
    p95 = percentile(boxed, 95) - percentile(base, 95)
    verdict = "OK" if p50 <= 30 and p95 <= 60 else "OVER TARGET"
    print(f"sandbox overhead: p50 +{p50:.1f} ms, p95 +{p95:.1f} ms (target +30 / +60 ms): {verdict}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200))
