"""ReAct, Plan-and-Execute and Reflection on the shipped task set, with the local model.

    python bench/bench_patterns.py [--model qwen2.5-coder-0.5b] [--pattern react|plan|reflect] [--tag T]
                                   [--part K/N] [--out DIR]

Every pattern gets the same cases, the same bodies (tools and instructions,
:func:`tether.evals.datasets.make_agent`), the same scripted humans and the
same model:

* ``react``: the default loop, the body's agent as it is;
* ``plan``: :func:`tether.strategies.plan_execute_agent`, the model as planner,
  the body's agent as executor (each step a child run);
* ``reflect``: :func:`tether.strategies.reflection_agent`, the body's agent as
  writer, the same model as critic (it reads the task and the answer and
  replies OK or what is wrong; one revision at most).

Tool calls are graded on the calls the child runs made. Each report is saved
as ``DIR/<pattern>-<model>.json``; the table printed is what docs/patterns.md
shows. (Runs one trial at a time: the machine has 2 shared cores.) ``--part 0/2`` runs every
other case (the 1st, 3rd, ...; every tag is in each part), ``--part 1/2`` the rest, into the
same store under the same name: run once more without ``--part`` for the report of both
(graded trials are read back from the store, not run again).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from tether import Agent, Context, Message
from tether.evals import Setup, evaluate
from tether.evals.datasets import load, make_agent
from tether.providers.local import LocalModel
from tether.stores.sqlite import SQLiteStore
from tether.strategies import plan_execute_agent, reflection_agent

CRITIC = (
    "You check an assistant's answer. Task: {task}\nAnswer: {answer}\n"
    "If the answer does what the task asks, reply exactly OK. Otherwise say in one sentence what is wrong."
)


def factories(model: LocalModel) -> dict[str, object]:
    def react(setup: Setup) -> Agent:
        return make_agent(setup)

    def plan(setup: Setup) -> Agent:
        return plan_execute_agent(model, make_agent(setup), max_replans=1)

    async def critic(answer: str, context: Context) -> str | None:
        task = next((m.content for m in context if m.role == "user"), "")
        reply = await model.decide(Context([Message.user(CRITIC.format(task=task, answer=answer))]), ())
        said = reply.content.strip()
        return None if not said or said.upper().startswith("OK") else said

    def reflect(setup: Setup) -> Agent:
        return reflection_agent(make_agent(setup), critic, rounds=1)

    return {"react": react, "plan": plan, "reflect": reflect}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--pattern", action="append", choices=["react", "plan", "reflect"])
    parser.add_argument("--tag", action="append", default=[])
    parser.add_argument("--part", default="0/1", help="K/N: only the cases whose position is K modulo N")
    parser.add_argument("--out", default="bench/out")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = LocalModel(args.model)
    dataset = load("tether-tasks").select(tags=args.tag)
    k, n = (int(x) for x in args.part.split("/"))
    dataset = dataset.select(ids=[c.id for i, c in enumerate(dataset.cases) if i % n == k])
    made = factories(model)
    for name in args.pattern or ["react", "plan", "reflect"]:
        started = time.monotonic()
        store = SQLiteStore(out / f"{name}-{args.model}.db")
        report = await evaluate(
            dataset, made[name], brain=model, store=store, name=f"{name}-{args.model}", concurrency=1, progress=False
        )
        report.save(out / f"{name}-{args.model}.json")
        print(f"== {name} ({time.monotonic() - started:.0f} s)")
        print(report.table())
        sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
