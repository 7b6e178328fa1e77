"""tether: a small agent framework that gets the hard parts right.

An agent is a loop: the brain (a :class:`Policy`) decides, a :class:`Tool` acts,
the result is written into an append-only notebook (a :class:`Context` of
:class:`Message` values), repeat until done. The :class:`Agent` runs that loop
as a stream of typed events; a run can pause for a human, be journaled to a
store, and resume later in another process.

>>> from tether import Agent, tool
>>> from tether.testing import ScriptedModel, Action
"""

# ruff: noqa: E402
# `python -m tether` imports this package while the current directory is first on
# sys.path, so a workspace's json.py would shadow the standard library: drop that entry
# before anything else is imported (sys and os are loaded at interpreter start-up).
import os as _os
import sys as _sys

if _sys.argv[:1] == ["-m"] and _sys.path[:1] in ([""], [_os.path.abspath("")]):
    del _sys.path[0]
del _os, _sys

from .agent import Agent, Observer, RunResult, Watcher
from .context import Context
from .events import (
    ApprovalDecided,
    ApprovalRequested,
    Cancelled,
    ChildEvent,
    ChildStopped,
    Compacted,
    Event,
    Failed,
    Finished,
    HandedOff,
    LimitReached,
    ModelReplied,
    Noted,
    Paused,
    QuestionAsked,
    RunStarted,
    Token,
    ToolFinished,
    ToolStarted,
)
from .exceptions import (
    LeaseConflict,
    ModelRequestsBlocked,
    ProviderError,
    SandboxUnavailable,
    ScriptExhausted,
    StateError,
    StateIncompatible,
    StateTampered,
    StoreError,
    TetherError,
    UserError,
)
from .instructions import instructions_from
from .journal import replay, state_of
from .messages import Message, Reasoning, ToolCall, Usage
from .parts import File, Image, Text
from .policy import Action, FunctionPolicy, Policy
from .state import Choice, Decision, PendingCall, RunState
from .store import RunInfo, RunStore, record_decisions
from .tools import Invocation, Tool, ask_human, tool

__version__ = "0.1.0"

__all__ = [
    "Action",
    "Agent",
    "ApprovalDecided",
    "ApprovalRequested",
    "ask_human",
    "Cancelled",
    "ChildEvent",
    "ChildStopped",
    "Choice",
    "Compacted",
    "Context",
    "Decision",
    "Event",
    "Failed",
    "File",
    "Finished",
    "FunctionPolicy",
    "HandedOff",
    "Image",
    "instructions_from",
    "Invocation",
    "LeaseConflict",
    "LimitReached",
    "Message",
    "ModelReplied",
    "ModelRequestsBlocked",
    "Noted",
    "Observer",
    "Paused",
    "PendingCall",
    "Policy",
    "ProviderError",
    "QuestionAsked",
    "Reasoning",
    "record_decisions",
    "replay",
    "RunInfo",
    "RunResult",
    "RunStarted",
    "RunState",
    "RunStore",
    "SandboxUnavailable",
    "ScriptExhausted",
    "state_of",
    "StateError",
    "StateIncompatible",
    "StateTampered",
    "StoreError",
    "TetherError",
    "Text",
    "Token",
    "tool",
    "Tool",
    "ToolCall",
    "ToolFinished",
    "ToolStarted",
    "Usage",
    "UserError",
    "Watcher",
]
