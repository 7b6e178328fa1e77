"""A worker whose one ``once`` call is slow, with its effect at the end: the stalled-worker attack.

    python tests/durability/slow_send.py --store URL --oracle FILE --run-id ID [--resume] [--slow S] [--lease-ttl S]

The run's model asks for one ``send`` (effect ``once``), then answers ``done``.
``send`` writes a ``began`` row to the oracle, waits ``--slow`` seconds (a slow
upload, say) in steps of 0.1 s, then writes its ``effect`` row: the side effect.
The process prints ``began`` when its call is under way (so a test can
SIGSTOP it inside the call), then one JSON line with how its run ended.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]  # tests/, for durability.*

from durability.worker import Oracle  # noqa: E402
from tether import Agent, Context, FunctionPolicy, Invocation, LeaseConflict, Tool, ToolCall, tool  # noqa: E402
from tether.policy import Move  # noqa: E402
from tether.stores import open_store  # noqa: E402


def build(store: object, oracle: Oracle, slow: float, ttl: float) -> Agent:
    @tool(effect="once")
    async def send(to: str, call: Invocation) -> str:
        """Send a message (must not happen twice)."""
        await oracle.awrite(ev="began", call=call.call_id)
        print("began", flush=True)
        end = time.monotonic() + slow
        while time.monotonic() < end:  # a slow call: many short waits, as a stream of I/O would be
            await asyncio.sleep(0.1)
        await oracle.awrite(ev="effect", call=call.call_id, to=to)
        return f"sent to {to}"

    async def brain(context: Context, tools: Sequence[Tool]) -> Move:
        if any(m.role == "tool" for m in context):
            return "done"
        return [ToolCall.of("send", {"to": "ana"}, id="call_1")]

    return Agent(FunctionPolicy(brain), [send], store=store, name="sender", lease_ttl=ttl)  # type: ignore[arg-type]


async def main(args: argparse.Namespace) -> None:
    store = open_store(args.store)
    agent = build(store, Oracle(args.oracle), args.slow, args.lease_ttl)
    try:
        if args.resume:
            result = await agent.run(run_id=args.run_id)
        else:
            result = await agent.run("send ana a note", run_id=args.run_id)
        print(json.dumps({"status": result.status}), flush=True)
    except LeaseConflict as exc:
        print(json.dumps({"status": "lease-conflict", "error": str(exc)}), flush=True)
    finally:
        await store.aclose()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--store", required=True)
    p.add_argument("--oracle", required=True)
    p.add_argument("--run-id", required=True)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--slow", type=float, default=0.0)
    p.add_argument("--lease-ttl", type=float, default=30.0)
    asyncio.run(main(p.parse_args()))
