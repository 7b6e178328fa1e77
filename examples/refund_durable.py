"""Pause in one process, approve in a second, finish in a third: the run lives in SQLite.

python examples/refund_durable.py start   --db runs.db        # prints the run id, pauses
python examples/refund_durable.py approve --db runs.db RUN_ID # a human approves (no agent here)
python examples/refund_durable.py finish  --db runs.db RUN_ID # resumes and finishes
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from refund_agent import make_agent

from tether import RunState, record_decisions
from tether.trace import render


def open_store(db: str):
    from tether.stores.sqlite import SQLiteStore

    return SQLiteStore(db)


async def start(db: str) -> int:
    agent = make_agent(store=open_store(db))
    result = await agent.run("Can I get a refund for order A1234? It arrived broken.")
    print(result.run_id)
    for p in result.items:
        print(f"waiting: {p.call.id} {p.call.name}({p.call.arguments})", file=sys.stderr)
    return 0 if result.status == "paused" else 1


async def approve(db: str, run_id: str) -> int:
    def approve_all(state: RunState) -> RunState:
        for p in state.open_calls:
            state = state.approve(p.call.id, by="supervisor")
        return state

    state = await record_decisions(open_store(db), run_id, approve_all)
    print(f"approved {len(state.decisions)} call(s) of run {run_id}")
    return 0


async def finish(db: str, run_id: str) -> int:
    store = open_store(db)
    result = await make_agent(store=store).run(run_id=run_id)
    print(render(await store.load(run_id), name="support"))
    return 0 if result.status == "finished" else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["start", "approve", "finish"])
    parser.add_argument("run_id", nargs="?")
    parser.add_argument("--db", default="runs.db")
    a = parser.parse_intermixed_args()
    if a.step == "start":
        return asyncio.run(start(a.db))
    if not a.run_id:
        parser.error("approve and finish need the run id")
    return asyncio.run(approve(a.db, a.run_id) if a.step == "approve" else finish(a.db, a.run_id))


if __name__ == "__main__":
    sys.exit(main())
