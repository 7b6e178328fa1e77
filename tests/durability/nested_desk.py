"""The seed's refund desk as a run tree, one step per process (issue 11).

``support`` looks the order up and delegates the refund to ``billing`` (an
agent used as a tool, so a child run in the same store); billing checks the
policy and calls ``issue_refund``, which needs a person's approval. The refund
writes a row to an oracle file (fsynced) when it really runs.

    python nested_desk.py start   --db runs.db --oracle refunds.jsonl   # prints the run id; pauses
    python nested_desk.py approve --db runs.db RUN_ID ITEM_ID           # a person, no agent here
    python nested_desk.py deny    --db runs.db RUN_ID ITEM_ID MESSAGE
    python nested_desk.py finish  --db runs.db --oracle refunds.jsonl RUN_ID

``start`` prints each waiting item to stderr as ``waiting: <id> | <label> | <arguments>``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[2] / "examples"))

from refund_agent import ORDERS, check_policy, look_up_order
from worker import Oracle

from tether import Action, Agent, FunctionPolicy, Invocation, RunState, Tool, record_decisions, tool
from tether.stores.sqlite import SQLiteStore

TASK = "Can I get a refund for order A1234? It arrived broken."


def refund_tool(oracle: Oracle) -> Tool:
    # Not support.refund: the oracle records the run and call of each execution across processes.
    @tool(approval=True, effect="once")
    def issue_refund(order_id: str, amount: int, call: Invocation) -> str:
        """Refund an order to the original card (a human must approve)."""
        oracle.write(order_id=order_id, amount=amount, run=call.run_id, call=call.call_id)
        return f"${amount} refunded to the original card"

    return issue_refund


def billing_brain(context: Any, tools: Any) -> Any:
    done = {m.name: m for m in context if m.role == "tool"}
    if "check_policy" not in done:
        return Action("check_policy", {"order_id": "A1234"}, "billing checks the policy first")
    if "issue_refund" not in done:
        price = ORDERS["A1234"]["price"]
        return Action("issue_refund", {"order_id": "A1234", "amount": price}, "eligible: refund it")
    refund = done["issue_refund"]
    if refund.is_error:
        return f"billing could not refund A1234: {refund.content}"
    return f"billing refunded A1234: {refund.content}"


def support_brain(context: Any, tools: Any) -> Any:
    done = {m.name: m for m in context if m.role == "tool"}
    if "look_up_order" not in done:
        return Action("look_up_order", {"order_id": "A1234"}, "let me pull up the order first")
    if "billing" not in done:
        return Action("billing", {"task": "Refund order A1234 ($79): it arrived broken."}, "billing does refunds")
    return f"Support here. {done['billing'].content}"


def desk(store: SQLiteStore, oracle: Oracle) -> Agent:
    billing = Agent(FunctionPolicy(billing_brain), [check_policy, refund_tool(oracle)], name="billing")
    tools = [look_up_order, billing.as_tool(description="Billing handles refunds.")]
    return Agent(FunctionPolicy(support_brain), tools, name="support", store=store)


async def start(db: str, oracle: str) -> int:
    result = await desk(SQLiteStore(db), Oracle(oracle)).run(TASK)
    print(result.run_id)
    for item in result.items:
        print(f"waiting: {item.id} | {item.label} | {item.call.arguments}", file=sys.stderr)
    return 0 if result.status == "paused" else 1


async def decide(db: str, run_id: str, item_id: str, message: str | None) -> int:
    def verdict(state: RunState) -> RunState:
        if message is None:
            return state.approve(item_id, by="supervisor")
        return state.deny(item_id, message, by="supervisor")

    state = await record_decisions(SQLiteStore(db), run_id, verdict)
    found = state.decision(item_id)
    print(json.dumps({"item": item_id, "verdict": found.verdict if found else None}))
    return 0


async def finish(db: str, oracle: str, run_id: str) -> int:
    result = await desk(SQLiteStore(db), Oracle(oracle)).run(run_id=run_id)
    print(json.dumps({"status": result.status, "output": result.output}))
    return 0 if result.status == "finished" else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("step", choices=["start", "approve", "deny", "finish"])
    p.add_argument("args", nargs="*")
    p.add_argument("--db", required=True)
    p.add_argument("--oracle", default="refunds.jsonl")
    a = p.parse_intermixed_args()
    if a.step == "start":
        return asyncio.run(start(a.db, a.oracle))
    if a.step == "finish":
        return asyncio.run(finish(a.db, a.oracle, *a.args))
    run_id, item_id, *said = a.args
    return asyncio.run(decide(a.db, run_id, item_id, " ".join(said) if a.step == "deny" else None))


if __name__ == "__main__":
    sys.exit(main())
