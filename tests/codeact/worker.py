"""One process of a code-action run: start it or resume it by id, print how it stopped.

``python worker.py STORE ORACLE WORKSPACE PROGRAM RUN_ID start|resume``; with
``TETHER_CRASH_AT`` set, the process kills itself at that commit.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from codeact.desk import PROGRAMS, desk
from tether.stores._open import open_store


async def main(store_url: str, oracle: str, workspace: str, program: str, run_id: str, mode: str) -> None:
    store = open_store(store_url)
    try:
        agent = desk(PROGRAMS[program], Path(oracle), Path(workspace), store=store)
        if mode == "start":
            result = await agent.run("refund order A1", run_id=run_id)
        else:
            result = await agent.run(run_id=run_id)
        print(json.dumps({"status": result.status, "output": result.output, "error": result.error}))
    finally:
        await store.aclose()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
