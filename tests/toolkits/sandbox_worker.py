"""A separate worker process for the limit tests: run one sandboxed command, report as JSON.

Usage: python sandbox_worker.py WORKSPACE TIMEOUT COMMAND
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys

from tether.toolkits import Sandbox, SandboxLimits


async def main(workspace: str, timeout: str, command: str) -> None:
    sandbox = Sandbox(workspace, limits=SandboxLimits(timeout=float(timeout)))
    print("started", flush=True)
    result = await sandbox.run(["bash", "-c", command])
    report = {
        "exit_code": result.exit_code,
        "stdout_bytes": len(result.stdout),
        "stdout_tail": result.stdout[-80:].decode(errors="replace"),
        "truncated": result.truncated,
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
