"""The refund desk in code: three tools that write an oracle file, programs that call them, the agent.

``lookup`` reads (``effect="none"``), ``tag`` is idempotent (it records its
idempotency key), ``refund`` is an approval-gated ``once`` call. Each appends a
JSON line to the oracle file, outside the store and the sandbox, so a test
counts what really ran whatever the run's journal says.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import tether._loop.crash as crash
from tether import Agent, FunctionPolicy, Invocation, tool
from tether.codeact import code_agent
from tether.context import Context
from tether.toolkits import Sandbox
from tether.tools import Tool

REFUND = """\
o = lookup("A1")
t = tag(o["order"], "refund-requested")
try:
    r = refund(o["order"], o["amount"])
except ToolError as e:
    r = "denied: " + str(e)
print("looked up", o["order"], "tagged", t)
final_answer(r)
"""

RANDOM = """\
import random
n = random.randrange(10**12)
lookup(f"A{n}")
refund("A1", 1.0)
"""

PROGRAMS = {"refund": REFUND, "random": RANDOM}


def oracle_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def count(path: Path, name: str) -> int:
    return sum(r["tool"] == name for r in oracle_rows(path))


def desk_tools(oracle: Path) -> list[Tool]:
    def note(name: str, args: dict[str, Any], key: str = "") -> None:
        with open(oracle, "a") as f:
            f.write(json.dumps({"tool": name, "args": args, "key": key}) + "\n")
            f.flush()
            os.fsync(f.fileno())

    @tool(effect="none")
    def lookup(order: str) -> dict[str, Any]:
        """Look an order up.

        Args:
            order: the order id, e.g. "A1".
        """
        note("lookup", {"order": order})
        return {"order": order, "amount": 79.0}

    @tool(effect="idempotent")
    def tag(order: str, label: str, inv: Invocation) -> str:
        """Put a label on an order."""
        note("tag", {"order": order, "label": label}, inv.idempotency_key)
        return f"{order}:{label}"

    @tool(effect="once", approval=True)
    def refund(order: str, amount: float) -> str:
        """Refund an order (a person approves)."""
        note("refund", {"order": order, "amount": amount})
        crash.crash_point("mid_tool")  # a crash test may kill the worker right after the side effect
        return f"refunded {amount:g} on {order}"

    return [lookup, tag, refund]


def writes(program: str) -> FunctionPolicy:
    """A brain that writes ``program``, then answers in words once it has read the action's note."""

    def brain(context: Context, tools: object) -> str:
        if any(m.role == "tool" and m.name == "python" for m in context):
            return "done"
        return f"Here is the program.\n```python\n{program}```"

    return FunctionPolicy(brain)


def open_workspace() -> Path:
    """A workspace every user may enter (a root tether runs the sandbox as an unprivileged uid)."""
    path = Path(tempfile.mkdtemp(prefix="tether-codeact-"))
    path.chmod(0o755)
    return path


def desk(program: str, oracle: Path, workspace: Path, **agent: Any) -> Agent:
    return code_agent(writes(program), desk_tools(oracle), sandbox=Sandbox(str(workspace)), **agent)
