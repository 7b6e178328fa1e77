"""The memory tools a model calls: ``remember``, ``recall`` and ``forget``.

``remember`` acts the way any tool with an effect acts: it is ``idempotent``
with the call's key (a retry after a crash stores nothing twice), and its
``approval`` rule is the operator's, so a person can be asked to sign off every
item an agent commits to memory. Nothing else writes memory: a tool result that
*says* "remember this" is only text in the notebook until the model calls
``remember`` and that call passes its gate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..tools import Approval, Invocation, Tool, tool
from .memory import Memory
from .quoting import quoted

__all__ = ["memory_tools"]

Namespace = str | Callable[[Invocation[Any]], str]


def memory_tools(
    memory: Memory,
    namespace: Namespace,
    *,
    approval: Approval = False,
    forget_approval: Approval = False,
    k: int = 5,
    budget: int = 2500,
) -> list[Tool]:
    """``remember``, ``recall`` and ``forget`` on ``namespace`` (a name, or a function of the call,
    e.g. ``lambda call: f"user:{call.deps['customer']}"``). ``approval`` gates ``remember``,
    ``forget_approval`` gates ``forget``; ``recall`` only reads, and its result holds the best items
    that fit in ``budget`` tokens (about four characters each; the default fits one item of the
    largest size, 8 KiB)."""
    name_of: Callable[[Invocation[Any]], str] = namespace if callable(namespace) else (lambda call: namespace)

    @tool(effect="idempotent", approval=approval)
    async def remember(text: str, call: Invocation[Any]) -> str:
        """Commit one fact to long-term memory, for later runs and sessions.

        Args:
            text: the fact, as one self-contained sentence.
        """
        source = f"run {call.run_id}"
        item, new = await memory.remember_new(text, namespace=name_of(call), source=source, key=call.idempotency_key)
        return f"remembered as {item.id}" if new else f"already remembered as {item.id}: {item.text!r}"

    @tool(effect="none")
    async def recall(query: str, call: Invocation[Any], k: int = k) -> str:
        """Search long-term memory for facts about the query.

        Args:
            query: what to look for, in words.
            k: how many items at most.
        """
        found = await memory.recall(query, namespace=name_of(call), k=k)
        if not found:
            return "nothing in memory matches"
        return quoted(found, memory.clock(), budget=budget) or "the items that match are too long to show here"

    @tool(effect="idempotent", approval=forget_approval)
    async def forget(id: str, call: Invocation[Any]) -> str:
        """Delete one item from long-term memory.

        Args:
            id: the item's id, as recall shows it (m-...).
        """
        found = await memory.items.get([id])
        if not found or found[0].namespace != name_of(call):  # another namespace's item is not there
            return f"no memory item {id!r}"
        await memory.forget(id)
        return f"forgot {id}"

    return [remember, recall, forget]
