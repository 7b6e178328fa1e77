"""Multi-agent is an agent used as a coworker: a manager delegates to a researcher.

python examples/agent_as_tool.py
"""

from __future__ import annotations

from tether import Action, Agent, FunctionPolicy, tool
from tether.trace import render

SHIPMENTS = {"B77": "left the warehouse on Monday, arrives Thursday"}


@tool(effect="none")
def track(order_id: str) -> str:
    """Where a shipment is."""
    return SHIPMENTS.get(order_id, "unknown order")


def researcher_brain(context, tools):
    if not any(m.role == "tool" for m in context):
        return Action("track", {"order_id": "B77"}, "look it up")
    return f"Order B77 {context.last().content}."


def manager_brain(context, tools):
    if not any(m.role == "tool" for m in context):
        return Action("researcher", {"task": "Where is order B77?"}, "ask the researcher")
    return f"Here is what I found: {context.last().content}"


researcher = Agent(FunctionPolicy(researcher_brain), [track], name="researcher")
manager = Agent(
    FunctionPolicy(manager_brain),
    [researcher.as_tool(description="Research shipments and orders.", effect="none")],
    name="manager",
)

if __name__ == "__main__":
    result = manager.run_sync("Where is my order B77?")
    print(render(result.events, name="manager"))
