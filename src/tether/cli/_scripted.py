"""``--model scripted:FILE``: a brain read from a JSON file, for demos and tests.

The file is a JSON list of replies, one per model turn of the conversation:

* ``"text"``: a final answer;
* ``{"tool": NAME, "args": {...}, "reasoning": "..."}``: one tool call;
* a list of those objects: several calls in one turn;
* ``{"answer": "..."}``: a final answer in which ``{last_tool_result}`` is
  replaced by the text of the newest tool result the model can see.

Reply *k* answers the *k*-th model turn of the conversation the model is shown
(the number of assistant notes before it), not the *k*-th request this process
made: so a run resumed in another process, or a chat's second turn, picks up
the script where the conversation stands, and ``clear`` starts it over.

>>> policy = load_script("demo.json")  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..context import Context
from ..exceptions import ScriptExhausted
from ..messages import Message
from ..policy import Action, Move, to_message
from ..testing import ScriptedModel
from ..tools import Tool
from ._errors import ConfigError


@dataclass(frozen=True, slots=True)
class Answer:
    """A final answer that may quote the newest tool result."""

    template: str

    def text(self, context: Context) -> str:
        results = [m.text for m in context if m.role == "tool"]
        return self.template.replace("{last_tool_result}", results[-1] if results else "")


class ScriptedFile(ScriptedModel):
    """A :class:`~tether.testing.ScriptedModel` indexed by the conversation's model turns."""

    def __init__(self, replies: Sequence[Move | Answer], source: str) -> None:
        super().__init__(replies, stream=True)  # type: ignore[arg-type]
        self.source = source

    async def decide(self, context: Context, tools: Sequence[Tool]) -> Message:
        n = sum(1 for m in context if m.role == "assistant")
        if n >= len(self.replies):
            raise ScriptExhausted(
                f"script {self.source!r} has {len(self.replies)} replies; the conversation needs reply #{n + 1}"
            )
        self.requests.append(context)
        reply = self.replies[n]
        if isinstance(reply, Answer):
            reply = reply.text(context)
        return to_message(reply, f"call_{n + 1}")


def load_script(path: str) -> ScriptedFile:
    """Read and check a script file; ConfigError names the first bad entry."""
    try:
        data = json.loads(Path(path).expanduser().read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read script {path!r}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ConfigError(f"script {path!r} is not valid JSON: {exc}") from None
    if not isinstance(data, list):
        raise ConfigError(f"script {path!r} must be a JSON list of replies")
    return ScriptedFile([_reply(item, path, i) for i, item in enumerate(data, 1)], path)


def _reply(item: Any, path: str, i: int) -> Move | Answer:
    if isinstance(item, str):
        return item
    if isinstance(item, dict) and set(item) == {"answer"} and isinstance(item["answer"], str):
        return Answer(item["answer"])
    if isinstance(item, dict):
        return _action(item, path, i)
    if isinstance(item, list) and item:
        return [_action(x, path, i) for x in item]
    raise ConfigError(f"reply #{i} of script {path!r} must be a string, an object or a non-empty list")


def _action(item: Any, path: str, i: int) -> Action:
    ok = (
        isinstance(item, dict)
        and isinstance(item.get("tool"), str)
        and isinstance(item.get("args", {}), dict)
        and isinstance(item.get("reasoning", ""), str)
        and set(item) <= {"tool", "args", "reasoning"}
    )
    if not ok:
        raise ConfigError(
            f'reply #{i} of script {path!r}: a tool call is {{"tool": NAME, "args": {{...}}, "reasoning": "..."}}'
        )
    return Action(item["tool"], item.get("args", {}), item.get("reasoning", ""))
