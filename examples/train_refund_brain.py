"""Train a small neural brain on the refund desk's recorded runs, then evaluate it against its teacher.

1. A rule-based brain (the teacher) handles 240 generated requests, phrased
   many ways, for known and unknown orders; a scripted human approves or
   denies each refund. Every run is journaled in a SQLite store.
2. ``tether.brains.train`` reads the decisions back from that store and fits
   two tiny networks (a few seconds on a CPU); the brain is saved to one
   ``.npz`` file and loaded again.
3. The harness runs the shipped ``refund-desk`` cases (worded differently
   from the training requests) with the teacher, the trained brain and, when
   it is installed (``.[local-small]``), the offline 0.5B local model; then
   compares them.

Run it (needs ``pip install -e '.[brains]'``):

    python examples/train_refund_brain.py [--out DIR] [--no-local]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tether.brains import TrainedPolicy, examples_from_store, train
from tether.evals import Case, Dataset, compare, evaluate
from tether.evals.datasets import load, make_agent
from tether.evals.datasets.brains import refund_desk_brain
from tether.stores.sqlite import SQLiteStore

ASKS = [
    "Can I get a refund for order {id}? It arrived broken.",
    "Please refund order {id}.",
    "I want my money back for order {id}.",
    "Order {id} does not work, I'd like a refund.",
    "Refund {id} please, it's broken.",
    "Hi, could you reimburse me for {id}?",
    "Where is my order {id}?",
    "What's the status of order {id}?",
    "Has {id} shipped yet?",
]
KNOWN = ["A1234", "B5678", "C9012", "D3456"]


def training_cases(n: int, seed: int = 7) -> list[Case]:
    """Generated requests: known and made-up orders, each refund approved or denied by the scripted human."""
    rng = random.Random(seed)
    cases = []
    for i in range(n):
        oid = rng.choice(KNOWN) if rng.random() < 0.8 else f"{rng.choice('EFGHJKQ')}{rng.randrange(1000, 9999)}"
        human = (rng.choice(["approve", "deny: the supervisor said no"]),)
        ask = rng.choice(ASKS).format(id=oid)
        cases.append(Case(f"train-{i}", ask, status="finished", human=human, data={"body": "refund"}))
    return cases


def local_model() -> object | None:
    """The offline 0.5B model when its runtime and weights are installed, else None."""
    try:
        import xllamacpp  # noqa: F401

        from tether.providers import LocalModel
        from tether.providers._weights import gguf_path

        gguf_path("qwen2.5-coder-0.5b")
    except Exception:  # not installed: the comparison leaves it out
        return None
    return LocalModel("qwen2.5-coder-0.5b")


async def main(out: Path, local: object | None) -> int:
    store = SQLiteStore(out / "runs.db")
    started = time.monotonic()
    demos = Dataset("refund-demos", training_cases(240), make_agent)
    await evaluate(demos, brain=refund_desk_brain(), store=store, concurrency=8)
    examples = await examples_from_store(store)
    brain = train(examples)
    path = brain.save(out / "refund_brain.npz")
    print(f"trained {TrainedPolicy.load(path)!r} in {time.monotonic() - started:.1f} s -> {path}")

    desk = load("refund-desk")
    brains: dict[str, Any] = {"teacher": refund_desk_brain(), "trained": TrainedPolicy.load(path)}
    if local:
        brains["local-0.5b"] = local
    reports = {}
    for label, policy in brains.items():
        report = await evaluate(desk, brain=policy, name=f"refund-desk-{label}", store=store, label=label)
        report.save(out / f"{label}.json")
        report.save(out / f"{label}.html")
        print(report.table(), end="\n\n")
        reports[label] = report
    print("teacher -> trained:", compare(reports["teacher"], reports["trained"]).table())
    await store.aclose()
    return 0 if reports["trained"].summary().accuracy >= 0.8 else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="where the store, the brain and the reports go [a temp dir]")
    parser.add_argument("--no-local", action="store_true", help="leave the offline local model out")
    args = parser.parse_args()
    folder = args.out or Path(tempfile.mkdtemp(prefix="refund-brain-"))
    folder.mkdir(parents=True, exist_ok=True)
    sys.exit(asyncio.run(main(folder, None if args.no_local else local_model())))
