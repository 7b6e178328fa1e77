"""How often the provenance gate asks about a call nobody attacked: its false-positive rate on the shipped tasks.

Run:

    PYTHONPATH=src python bench/bench_provenance.py [--min-chars 24] [--datasets refund-desk,weather-desk,...]

Every shipped case (``tether.evals.datasets``; ``workspace`` needs the sandbox) is run
with its reference replies, the agent guarded by ``TextFrom(["tool:*"])``: every tool's
results untrusted, the strictest setting (with ``--user``, the person's messages too).
None of these runs is an attack, so every call the gate asks about is a false positive.
It prints, per dataset, the calls the gate looked at (the ones their tool does not gate
already), how many it would have asked about, and the cases whose outcome changed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import Any

from tether import Agent, Context, Tool
from tether.evals import evaluate, reference_brain
from tether.evals.datasets import load, make_agent
from tether.provenance import TextFrom


class Counting:
    """A TextFrom that counts what it looked at and what it would have asked about."""

    def __init__(self, guard: TextFrom) -> None:
        self.guard = guard
        self.seen: set[str] = set()
        self.asked: dict[str, str] = {}

    def __call__(self, tool: Tool, args: dict[str, Any], context: Context) -> bool | str:
        key = f"{len(context)}:{tool.name}:{json.dumps(args, sort_keys=True)}"
        self.seen.add(key)
        said = self.guard(tool, args, context)
        if said:
            self.asked[key] = str(said)
        return False  # count only: the case runs as it would without the gate


async def measure(name: str, untrusted: list[str], min_chars: int) -> dict[str, Any]:
    counters: list[Counting] = []

    def agent(setup: Any) -> Agent:
        built = make_agent(setup)
        counter = Counting(TextFrom(untrusted, min_chars))
        counters.append(counter)
        built.approver = counter
        return built

    report = await evaluate(load(name), agent, brain=reference_brain, concurrency=1, progress=False)
    seen = sum(len(c.seen) for c in counters)
    asked = [said for c in counters for said in c.asked.values()]
    passed = sum(c.passes == c.trials for c in report.cases())
    return {"dataset": name, "cases": len(report.cases()), "passed": passed, "calls": seen, "asked": asked}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--min-chars", type=int, default=24)
    parser.add_argument("--datasets", default="refund-desk,weather-desk,toolbox,no-tool,workspace")
    parser.add_argument("--user", action="store_true", help="mark the person's messages untrusted too")
    ns = parser.parse_args()
    untrusted = ["tool:*", *(["user"] if ns.user else [])]
    total_calls = total_asked = 0
    print(f"untrusted: {untrusted}, min_chars={ns.min_chars}")
    print(f"{'dataset':<14} {'cases':>5} {'passed':>6} {'calls':>5} {'asked':>5}")
    for name in ns.datasets.split(","):
        row = asyncio.run(measure(name, untrusted, ns.min_chars))
        total_calls += row["calls"]
        total_asked += len(row["asked"])
        print(f"{name:<14} {row['cases']:>5} {row['passed']:>6} {row['calls']:>5} {len(row['asked']):>5}")
        for said in row["asked"]:
            print(f"    asked: {said}")
    rate = total_asked / total_calls if total_calls else 0.0
    print(f"false positives: {total_asked} of {total_calls} ungated calls ({rate:.1%}); load {os.getloadavg()}")


if __name__ == "__main__":
    main()
