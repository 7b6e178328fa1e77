"""Code as action: the model answers with a Python program, and the program calls the tools.

The program runs in the sandbox; each tool call it makes goes through the loop
(validated, gated, journaled). Here the refund needs a person: the run pauses
inside the program, a person approves, and the program runs again from the
top, its earlier calls answered from the journal. The 500-line report stays in
the program's variables and never enters the model's notebook.

python examples/code_actions.py          (needs bubblewrap, like the sandbox)
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from tether import FunctionPolicy, tool
from tether.codeact import code_agent
from tether.toolkits import Sandbox

REPORT = "\n".join(f"order A{i}: {'late' if i % 7 == 3 else 'on time'}, {10 + i % 40} EUR" for i in range(500))
calls: list[str] = []


@tool(effect="none")
def read_report() -> str:
    """The day's delivery report, one line per order."""
    calls.append("read_report")
    return REPORT


@tool(effect="idempotent")
def save_summary(text: str) -> str:
    """Save the summary for the morning meeting."""
    calls.append("save_summary")
    return f"saved {len(text)} characters"


@tool(effect="once", approval=True)
def issue_refund(order: str, amount: float) -> str:
    """Refund an order (a person approves)."""
    calls.append("issue_refund")
    return f"refunded {amount:g} EUR on {order}"


PROGRAM = """\
lines = read_report().splitlines()
late = [line for line in lines if "late" in line]
print(len(lines), "orders,", len(late), "late")
print(save_summary("\\n".join(late)))
order = late[0].split(":")[0].removeprefix("order ")
final_answer(issue_refund(order, 17.0))
"""


def brain(context, tools):
    """A stand-in for the model: it writes the program (a real model writes its own)."""
    return f"I will do it in one program.\n```python\n{PROGRAM}```"


if __name__ == "__main__":
    workspace = tempfile.mkdtemp(prefix="tether-example-")
    Path(workspace).chmod(0o755)  # a root tether runs the sandbox as an unprivileged user
    try:
        agent = code_agent(FunctionPolicy(brain), [read_report, save_summary, issue_refund], sandbox=Sandbox(workspace))
        paused = agent.run_sync("Summarise the late deliveries and refund the first one.")
        [item] = paused.items
        print(f"paused on {item.call.name}({item.call.arguments}); ran so far: {calls}")
        done = agent.run_sync(paused.state.approve(item.id))  # a person approved
        print(f"answer: {done.output}")
        print(f"ran: {calls}  (read and save once each, replayed from the journal on resume)")
        notebook = sum(len(m.text) for m in done.context)
        print(f"the report is {len(REPORT)} characters; the whole notebook is {notebook}")
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
