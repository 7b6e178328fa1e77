"""Code as action: the model writes a Python program that calls tools, sandboxed, gated, journaled, resumable.

:func:`code_agent` gives an :class:`~tether.Agent` whose model replies with one
fenced Python program per turn. The program runs in the toolkits'
:class:`~tether.toolkits.Sandbox` (no network, the workspace only, limits), and
the tools are plain Python functions in it. Each call the program makes
crosses a private socket to the host and goes through the loop as a call of
the action's child run: validated, gated by its approval rule and every
approver up the tree, journaled, run on the host under its effect. A call that
needs a person pauses the run; on resume the program runs again from the top
and the calls already journaled return their recorded results (deterministic
replay). MCP servers are modules the program discovers (``servers.list()``).
See ``docs/codeact.md``.

>>> from tether.testing import ScriptedModel
>>> from tether.toolkits import Sandbox
>>> agent = code_agent(ScriptedModel(["```python\\nfinal_answer(6 * 7)\\n```"]), [],
...                    sandbox=Sandbox("/srv/project"))  # doctest: +SKIP
>>> agent.run_sync("What is six times seven?").output  # doctest: +SKIP
'42'
"""

from __future__ import annotations

from ._actions import CODE_TOOL, CodePolicy, ReplayDiverged, code_agent, instructions_for
from ._bridge import MAX_MESSAGE
from ._program import ProgramPolicy

__all__ = [
    "CODE_TOOL",
    "MAX_MESSAGE",
    "CodePolicy",
    "ProgramPolicy",
    "ReplayDiverged",
    "code_agent",
    "instructions_for",
]
