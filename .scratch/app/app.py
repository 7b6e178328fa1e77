
from tether import Action, Agent, FunctionPolicy, tool

@tool(effect="none")
async def step(n: int) -> int:
    """A step."""
    return n

desk = Agent(FunctionPolicy(lambda c, t: "done" if any(m.role == "tool" for m in c) else Action("step", {"n": 1})),
             [step], name="desk")

