"""A separate worker process for the limit tests: run one sandboxed command, report as JSON.

Usage: python sandbox_worker.py WORKSPACE TIMEOUT COMMAND
"""

from __future__ import annotations

import asyncio
import json
import sys

from tether.toolkits import Sandbox, SandboxLimits


def peak_rss_mib() -> float:
    """This process's own peak RSS (VmHWM).

    Not ``getrusage``: Linux carries ``ru_maxrss`` across ``execve``, so a worker
    forked from a large parent (pytest after loading a model) would report the
    parent's size.
    """
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


async def main(workspace: str, timeout: str, command: str) -> None:
    sandbox = Sandbox(workspace, limits=SandboxLimits(timeout=float(timeout)))
    print("started", flush=True)
    result = await sandbox.run(["bash", "-c", command])
    report = {
        "exit_code": result.exit_code,
        "stdout_bytes": len(result.stdout),
        "stdout_tail": result.stdout[-80:].decode(errors="replace"),
        "truncated": result.truncated,
        "max_rss_mib": peak_rss_mib(),
    }
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
