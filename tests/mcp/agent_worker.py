"""A worker process for the MCP durability test: one run with one idempotent MCP call.

    python tests/mcp/agent_worker.py --db FILE --oracle FILE --hold DIR [--resume]

It starts the test server over stdio (effects go to the oracle; the first
``remember`` call waits in ``--hold`` so the test can kill this process
mid-call), prints ``ready``, drives run ``mem-1`` to its end (or resumes it
with ``--resume``) and prints its status and output as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from tether import Action, Agent, Context, FunctionPolicy, Tool
from tether.mcp import McpClient, McpServer
from tether.policy import Move
from tether.stores.sqlite import SQLiteStore

SERVER = Path(__file__).with_name("fixture_server.py")


def brain(context: Context, tools: Sequence[Tool]) -> Move:
    """Remember once, then answer with what the tool said."""
    results = [m for m in context if m.role == "tool"]
    return f"done: {results[-1].content}" if results else Action("t__remember", {"key": "k", "value": "v"})


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--db", required=True)
    p.add_argument("--oracle", required=True)
    p.add_argument("--hold", required=True)
    p.add_argument("--resume", action="store_true")
    a = p.parse_args()
    server = McpServer(
        "t", command=sys.executable, args=(str(SERVER), "stdio"), env={"ORACLE": a.oracle, "HOLD_DIR": a.hold}
    )
    with McpClient([server]) as client:
        agent = Agent(FunctionPolicy(brain), client.tools_sync(), store=SQLiteStore(a.db))
        print("ready", flush=True)
        result = agent.run_sync(run_id="mem-1") if a.resume else agent.run_sync("remember k", run_id="mem-1")
    print(json.dumps({"status": result.status, "output": result.output}), flush=True)


if __name__ == "__main__":
    main()
