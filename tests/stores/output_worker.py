"""A typed-output agent for the cross-process test: ``python output_worker.py finish DB RUN_ID``.

The same agent (same tools, same output type, so the same fingerprint) is
built in the test process, which starts the run and pauses it; this process
approves the waiting call, resumes the run by id from the SQLite file, and
prints the instance it got back as JSON with its type's name.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Literal

import pydantic

from tether import Action, Agent, record_decisions, tool
from tether.stores.sqlite import SQLiteStore
from tether.testing import ScriptedModel


class Refund(pydantic.BaseModel):
    order_id: str
    amount: int
    outcome: Literal["refunded", "refused"]


# Not support.refund: the typed answer these processes agree on carries the order id and the amount.
@tool(approval=True)
def issue_refund(order_id: str, amount: int) -> str:
    """Refund an order (a human approves)."""
    return f"${amount} refunded"


ANSWER = {"order_id": "A1234", "amount": "79", "outcome": "refunded"}


def agent(db: str, replies: list) -> Agent:
    return Agent(ScriptedModel(replies), [issue_refund], output_type=Refund, store=SQLiteStore(db))


def finish(db: str, run_id: str) -> None:
    store = SQLiteStore(db)
    asyncio.run(record_decisions(store, run_id, lambda s: s.approve(s.open_calls[0].call.id, by="lead")))
    result = agent(db, [Action("final_result", ANSWER)]).run_sync(run_id=run_id)
    print(type(result.output).__name__, result.output.model_dump_json())


if __name__ == "__main__":
    finish(sys.argv[2], sys.argv[3])
