"""Handoffs: the ``transfer_to_<name>`` tool that hands a run over to another agent, and the team it makes.

Calling it switches which agent drives the same run once the turn is settled
(:meth:`tether.agent.Agent.hand_off_to`); the tool itself only says so. A run
may be driven by any agent of the team, so its fingerprint covers them all.

>>> from types import SimpleNamespace
>>> t = transfer_tool(SimpleNamespace(name="billing desk", description="Refunds.", instructions=None))
>>> t.name, t.handoff.name
('transfer_to_billing_desk', 'billing desk')
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

from ..tools import Tool, tool

__all__ = ["team", "team_fingerprint", "transfer_tool"]


def transfer_tool(target: Any) -> Tool:
    """The tool that hands a run over to ``target`` (an agent: its name, description, instructions)."""

    def transfer(reason: str = "") -> str:
        return f"transferred to {target.name}"  # the loop hands the run over once the turn is settled

    said = target.instructions if isinstance(target.instructions, str) else ""  # a callable: no text yet
    about = target.description or said.split("\n")[0] or f"the {target.name} agent"
    transfer.__doc__ = (
        f"Hand this conversation over to {target.name}: {about}\n\n"
        "Args:\n    reason: why, in a few words (shown to the next agent)."
    )
    name = "transfer_to_" + "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in target.name)
    made = tool(name=name[:64], effect="none")(transfer)
    return dataclasses.replace(made, handoff=target)


def team(agent: Any) -> dict[str, Any]:
    """``agent`` and every agent it can hand off to, directly or not, by name (the first of a name wins)."""
    seen: dict[str, Any] = {}
    todo = [agent]
    while todo:
        one = todo.pop()
        if one.name not in seen:
            seen[one.name] = one
            todo.extend(one.handoffs)
    return seen


def team_fingerprint(agent: Any) -> str:
    """A hash of the tool definitions of ``agent`` and of every agent it can hand off to."""
    parts = [
        f"{name}/{t.name}:{t.fingerprint()}" if name != agent.name else f"{t.name}:{t.fingerprint()}"
        for name, one in team(agent).items()
        for t in one.tool_list
    ]
    return hashlib.sha256(",".join(sorted(parts)).encode()).hexdigest()[:16]
