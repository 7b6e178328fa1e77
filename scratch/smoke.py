from dataclasses import dataclass
from typing import Literal
import pydantic
from tether import Action, Agent, tool, Invocation
from tether.testing import ScriptedModel

class Ticket(pydantic.BaseModel):
    title: str
    priority: Literal["low", "medium", "high"]

class Triage(pydantic.BaseModel):
    tickets: list[Ticket]
    summary: str

agent = Agent(ScriptedModel([
    "here it is in text",
    Action("final_result", {"tickets": [{"title": "a", "priority": "High"}, {"titel": "b", "priority": "low"}], "summary": "s"}),
    Action("final_result", {"tickets": [{"title": "a", "priority": "high"}], "summary": "s"}),
]), output_type=Triage)
r = agent.run_sync("triage")
print(r.status, repr(r.output), r.error)
for m in r.context: print(m.role, m.name, m.content[:1500])
print(agent.tools["final_result"].parameters)

@dataclass
class Deps:
    user: str

@tool(effect="none")
def whoami(call: Invocation[Deps]) -> str:
    return call.deps.user

a2 = Agent(ScriptedModel([Action("whoami", {}), "done"]), [whoami], instructions=lambda inv: f"user is {inv.deps.user}")
r = a2.run_sync("who", deps=Deps("ada"))
print([ (m.role, m.content) for m in r.context])
try:
    a2.run_sync("who")
except Exception as e: print(type(e).__name__, e)
