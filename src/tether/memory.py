"""Memory that does not blow up: compaction is one pure ``Context -> Context`` function.

:func:`compactor` builds the function an :class:`~tether.agent.Agent` takes as
``compactor=``: when the notebook grows past ``max_messages``, older notes are
replaced by one summary note, leading system notes are kept, and the cut never
separates an assistant's tool calls from their results. The loop records each
compaction as a ``compacted`` event, so replaying a run still rebuilds exactly
what the model saw.

>>> from tether import Context, Message
>>> notes = Context([Message.system("be brief"), *(Message.user(f"note {i}") for i in range(6))])
>>> short = compactor(max_messages=4, keep_last=2)(notes)
>>> [m.role for m in short], short[-1].content
(['system', 'user', 'user', 'user'], 'note 5')

Pass it to an agent as ``Agent(policy, tools, compactor=compactor(max_messages=40, keep_last=10))``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .context import Context
from .exceptions import UserError
from .messages import Message

__all__ = ["Summarizer", "compact", "compactor", "default_summary"]

Summarizer = Callable[[Sequence[Message]], str]


def default_summary(messages: Sequence[Message]) -> str:
    """A plain, model-free summary: one line per note, shortened."""
    lines = []
    for m in messages:
        who = m.name or m.role
        calls = ", ".join(f"{c.name}({c.arguments})" for c in m.tool_calls)
        text = " ".join((m.text or calls).split())
        lines.append(f"- {who}: {text[:160]}")
    return "Summary of earlier notes:\n" + "\n".join(lines)


def compact(context: Context, *, keep_last: int, summarize: Summarizer = default_summary) -> Context:
    """``context`` with all but the last ``keep_last`` notes folded into one summary note.

    Leading system notes stay. The kept tail never starts with a tool result:
    the boundary moves back to the assistant message that asked for it.
    """
    msgs = context.messages
    head = 0
    while head < len(msgs) and msgs[head].role == "system":
        head += 1
    cut = max(head, len(msgs) - keep_last)
    while head < cut < len(msgs) and msgs[cut].role == "tool":
        cut -= 1
    if cut <= head:
        return context
    summary = Message.user(summarize(msgs[head:cut]))
    return Context((*msgs[:head], summary, *msgs[cut:]))


def compactor(
    *, max_messages: int = 50, keep_last: int = 20, summarize: Summarizer = default_summary
) -> Callable[[Context], Context]:
    """A compaction policy for ``Agent(compactor=...)``."""
    if not 0 < keep_last < max_messages:
        raise UserError("compactor needs 0 < keep_last < max_messages")

    def run(context: Context) -> Context:
        if len(context) <= max_messages:
            return context
        return compact(context, keep_last=keep_last, summarize=summarize)

    return run
