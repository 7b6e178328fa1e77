"""One process, one run of a session: ``python session_worker.py STORE_URL SESSION TASK``.

Prints the run's answer; the brain says how many user notes it saw and the first.
"""

from __future__ import annotations

import asyncio
import sys

from tether import Agent, FunctionPolicy
from tether.memory import compactor
from tether.stores import open_store


def brain(context, tools):
    users = [m.text for m in context if m.role == "user"]
    return f"{len(users)} notes, first {users[0]!r}, pid-independent"


async def main(url: str, session: str, task: str) -> None:
    store = open_store(url)
    try:
        agent = Agent(FunctionPolicy(brain), store=store, compactor=compactor(max_messages=50, keep_last=20))
        result = await agent.run(task, session=session)
        print(result.output)
    finally:
        await store.aclose()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
