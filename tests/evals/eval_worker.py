"""An evaluation in its own process, for the kill-and-resume test.

    python eval_worker.py DB LOG [resume|restart]

Twelve cases, each a tool call then an answer, by a brain that takes a while
per decision and writes one line per decision to LOG ("case pid"). Prints the
report as JSON when it finishes.
"""

from __future__ import annotations

import asyncio
import os
import sys

from tether import Action, Agent, FunctionPolicy, tool
from tether.evals import Case, ExpectedCall, Setup, evaluate
from tether.stores.sqlite import SQLiteStore


@tool(effect="none")
def double(n: int) -> int:
    """Double a number.

    Args:
        n: the number.
    """
    return 2 * n


CASES = [
    Case(f"c{i:02d}", f"double {i}", expected=str(2 * i), tool_calls=(ExpectedCall("double", {"n": i}),))
    for i in range(12)
]


def brain(setup: Setup, log: str) -> FunctionPolicy:
    async def decide(context, tools):  # type: ignore[no-untyped-def]
        with open(log, "a") as f:
            f.write(f"{setup.case.id} {os.getpid()}\n")
        await asyncio.sleep(0.15)
        last = context.last()
        if last.role == "tool":
            return last.content
        return Action("double", {"n": int(context.last().content.split()[-1])})

    return FunctionPolicy(decide)


async def main(db: str, log: str, unfinished: str) -> None:
    store = SQLiteStore(db)
    report = await evaluate(
        CASES,
        lambda s: Agent(brain(s, log), [double], store=s.store),
        name="killme",
        store=store,
        concurrency=2,
        unfinished=unfinished,  # type: ignore[arg-type]
        progress=False,
    )
    print(report.to_json(indent=None))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "restart"))
