"""The short questions asked before a reply: which tool fits the task (or none), and does it really.

Each is a constrained request whose answer is one enum value
(:func:`decision_request`, :func:`verify_request`). Both show the notebook as
:func:`tether.providers._prompt.render` does, so the server's prompt cache
shares their prefix with the reply's request.

>>> decided('{"tool": "none"}'), confirmed('{"answer": "no"}')
(None, False)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..context import Context
from ..messages import Message
from ..tools import Tool
from ._parts import refuse_parts
from ._prompt import append_user, output_tool, render, since_user, tool_line

NO_TOOL = "none"
DECIDE = (
    'Which tool would you use first for what the user asks? Reply {"tool": <its name>}, or {"tool": "none"} '
    "when no tool helps with it (then you answer yourself)."
)
# The question the 0.5B is asked again once tools have answered: asked what is left
# (DECIDE_NEXT) it names a tool again after every result and never stops.
DECIDE_AGAIN = (
    'Which tool does what the user asks? Reply {"tool": <its name>}, or {"tool": "none"} when no '
    "tool does it (then you answer yourself) or the results above already answer it."
)
# Once tools have answered, the question is what is left: asked "which tool does it?"
# again, both models answered "none" after the first step of a task of several steps
# (the weather looked up, the email to send with it never sent).
DECIDE_NEXT = (
    'The user asked: "{task}" Done so far: {done}. Does a part of it still need a tool? Reply '
    '{{"tool": <the tool for that part>}}, or {{"tool": "none"}} when nothing is left to do.'
)


def decision_request(context: Context, tools: Sequence[Tool], *, what_is_left: bool = True) -> dict[str, Any]:
    """A short constrained request before the reply: the name of the tool that fits, or ``"none"``.

    The answer is one enum value, so the choice between using a tool and
    answering is a question the model is asked on its own, instead of the
    first character of a reply. Once tools have answered, the question is what
    is left of the task (``what_is_left``), or the first question again.
    """
    refuse_parts(context, "this brain (constrained decoding: LocalModel, ConstrainedOpenAI)")
    final = output_tool(tools)  # answering with it is "none": no tool fits, answer
    schema = {
        "type": "object",
        "properties": {"tool": {"enum": [*(t.name for t in tools if t is not final), NO_TOOL]}},
        "required": ["tool"],
        "additionalProperties": False,
    }
    messages = render(context, tools)
    task_notes = since_user(context)
    if not any(m.role == "tool" for m in task_notes):
        question = DECIDE
    else:
        question = _next_question(task_notes) if what_is_left else DECIDE_AGAIN
    append_user(messages, question)
    return {
        "messages": messages,
        "response_format": {"type": "json_schema", "json_schema": {"name": "decision", "schema": schema}},
    }


VERIFY = (
    'Does this tool do what the user asks, or a step of it? {tool} Reply {{"answer": "yes"}} or {{"answer": "no"}}.'
)


def _next_question(task_notes: list[Message]) -> str:
    """DECIDE_NEXT with the task's words (its first 600 characters) and the tools called since."""
    task = " ".join(task_notes[-1].text.split()) if task_notes[-1].role == "user" else ""
    task = task if len(task) <= 600 else task[:600] + "..."
    done = [c.name for m in reversed(task_notes) for c in m.tool_calls]
    return DECIDE_NEXT.format(task=task, done=", ".join(done) or "nothing")


def verify_request(context: Context, tools: Sequence[Tool], chosen: Tool) -> dict[str, Any]:
    """A second short request: does ``chosen`` really give what the question asks? (yes or no).

    Asked about one named tool, the 1.5B tells a stock price tool from a
    history question; asked to pick among all tools, it picks one anyway.
    """
    schema = {
        "type": "object",
        "properties": {"answer": {"enum": ["yes", "no"]}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    messages = render(context, tools)
    append_user(messages, VERIFY.format(tool=tool_line(chosen)))
    return {
        "messages": messages,
        "response_format": {"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema}},
    }


def confirmed(text: str) -> bool:
    """Whether the reply to :func:`verify_request` says yes (anything unreadable counts as yes).

    >>> confirmed('{"answer": "no"}'), confirmed('{"answer": "yes"}')
    (False, True)
    """
    try:
        return bool(json.loads(text).get("answer") != "no")
    except (ValueError, AttributeError):
        return True


def decided(text: str) -> str | None:
    """The tool the reply to :func:`decision_request` names; None when no tool fits.

    Anything unreadable counts as "a tool fits, any of them" (``""``).

    >>> decided('{"tool": "none"}'), decided('{"tool": "add"}'), decided("?")
    (None, 'add', '')
    """
    try:
        name = json.loads(text).get("tool")
    except (ValueError, AttributeError):
        return ""
    return None if name == NO_TOOL else str(name or "")
