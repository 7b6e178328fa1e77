"""A ``tether worker`` process for the scale-out tests: the durability suite's agent, fed by the queue.

    python tests/dispatch/scale_worker.py --store URL --queue-schema S --oracle FILE
        [--concurrency N] [--lease-ttl S] [--model-delay S] [--tool-delay S] [--stall S]

The agent, tools and side-effect oracle are those of ``tests/durability/worker.py``
(``lookup`` none, ``put`` idempotent, ``send`` once, ``refund`` once and gated),
so the durability harness judges what these workers did. It runs what ``tether
worker`` runs (:meth:`ProcrastinateDispatcher.work`: the queue and the
sweeper), and it writes one more oracle row per accepted append: the run, the
positions, and the lease (owner and fencing token) it was made under, so a test
can prove from the journal that no run was advanced by two workers at once.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]  # tests/, for durability.*

from durability.worker import Ledger, Oracle, TrackedStore, build_agent  # noqa: E402
from tether import Event  # noqa: E402
from tether.dispatch.procrastinate import ProcrastinateDispatcher  # noqa: E402
from tether.store import Lease  # noqa: E402
from tether.stores import open_store  # noqa: E402


class Journaled(TrackedStore):
    """Notes each accepted append, with the lease it was made under, in the oracle."""

    def __init__(self, inner: Any, ledger: Ledger, oracle: Oracle) -> None:
        super().__init__(inner, ledger)
        self.oracle = oracle

    async def append(
        self, run_id: str, events: Sequence[Event], *, expected_seq: int, lease: Lease | None = None
    ) -> int:
        seq = await super().append(run_id, events, expected_seq=expected_seq, lease=lease)
        await self.oracle.awrite(
            ev="append", run=run_id, first=expected_seq + 1, n=len(events),
            owner=lease.owner if lease else None, token=lease.token if lease else None,
        )  # fmt: skip
        return seq


async def main(args: argparse.Namespace) -> None:
    logging.basicConfig(stream=sys.stderr, format="%(process)d %(name)s %(levelname)s %(message)s")
    logging.getLogger("tether.dispatch").setLevel(logging.DEBUG)  # a run lost to another worker says so
    oracle, ledger = Oracle(args.oracle), Ledger()
    inner = open_store(args.store)
    store = Journaled(inner, ledger, oracle)
    agent = build_agent(store, oracle, ledger, model_delay=args.model_delay, tool_delay=args.tool_delay,
                        stall=args.stall, lease_ttl=args.lease_ttl)  # fmt: skip
    dispatcher = ProcrastinateDispatcher(inner.dsn, {agent.name: agent}, schema=args.queue_schema)  # type: ignore[attr-defined]
    await dispatcher.open()
    await store.list_runs(limit=1)
    print("ready", flush=True)
    await dispatcher.work(concurrency=args.concurrency, sweep_every=args.sweep_every, poll_every=0.5)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--store", required=True)
    p.add_argument("--queue-schema", required=True)
    p.add_argument("--oracle", required=True)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--lease-ttl", type=float, default=3.0)
    p.add_argument("--sweep-every", type=float, default=1.0)
    p.add_argument("--model-delay", type=float, default=0.0)
    p.add_argument("--tool-delay", type=float, default=0.0)
    p.add_argument("--stall", type=float, default=0.0)
    asyncio.run(main(p.parse_args()))
