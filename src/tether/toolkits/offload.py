"""The file system as context: a tool result too large for the notebook goes to a file.

:func:`offload_results` wraps an agent's tools: when one returns more than
``over`` characters, the whole result is written to a file in the workspace,
``.tool-results/<run id>/<call id>.txt``, and the notebook gets only the file's
path and the first ``preview`` characters. The model reads the rest with the
file tools (``read_file`` with ``offset=``) when it needs it, as a person opens
a log file instead of printing it.

The notebook's note starts with the path, so a compaction that summarises the
note down to its first line keeps what it takes to get the result back: the
compression is restorable. :func:`keeping_saved` makes sure of it however often
the notebook is compacted: it lists every saved file under the summary.

The file stays in the workspace, so a run resumed in another process (or after
a crash) reads the same file; a call that runs again writes the same path again.

>>> from tether import tool
>>> @tool(effect="none")
... def dump() -> str:
...     return "row\\n" * 10_000
>>> [t.name for t in offload_results([dump], "/srv/project", over=20_000)]  # doctest: +SKIP
['dump']
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

from ..exceptions import UserError
from ..messages import Message
from ..parts import PART_TYPES
from ..tools import Invocation, Tool, result_text
from ._workspace import Workspace

__all__ = ["FOLDER", "keeping_saved", "offload_results"]

FOLDER = ".tool-results"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_SAVED = re.compile(re.escape(FOLDER) + r"/[A-Za-z0-9._/-]+?\.txt")
_HEAD = "Tool results saved to files (read them again with read_file when you need them):"


def offload_results(
    tools: Sequence[Tool],
    workspace: str | os.PathLike[str] | Workspace,
    *,
    over: int = 20_000,
    preview: int = 2_000,
    keep: Sequence[str] = ("read_file",),
) -> list[Tool]:
    """``tools``, each writing a result longer than ``over`` characters to a workspace file and
    returning its path and first ``preview`` characters instead.

    The tools named in ``keep`` (reading a window of a file) keep their results as they are, as do
    tools that end the run, ask a person, hand over or run another agent, and results that hold
    images or files.
    """
    if not (isinstance(over, int) and isinstance(preview, int) and 0 <= preview < over):
        raise UserError(f"offload_results needs 0 <= preview < over, got over={over!r}, preview={preview!r}")
    ws = workspace if isinstance(workspace, Workspace) else Workspace(os.fspath(workspace))
    keeper = _Keeper(ws, over, preview)
    return [t if _as_is(t) or t.name in keep else _offloading(t, keeper) for t in tools]


def keeping_saved(summarize: Callable[[Sequence[Message]], str]) -> Callable[[Sequence[Message]], str]:
    """A compaction summary (``tether.memory.compactor(summarize=...)``) that also lists every
    offloaded result's file among the notes it replaces, whole, so that however often the notebook
    is compacted, the model can get each result back.

    >>> from tether import Message
    >>> notes = [Message.tool_result("c1", "[saved to .tool-results/r1/c1.txt: ...] rows", name="dump")]
    >>> print(keeping_saved(lambda ms: "Summary.")(notes))
    Summary.
    Tool results saved to files (read them again with read_file when you need them):
    - .tool-results/r1/c1.txt
    """

    def summary(messages: Sequence[Message]) -> str:
        found = dict.fromkeys(p for m in messages for p in _SAVED.findall(m.text))
        listed = "\n".join(f"- {p}" for p in found)
        return f"{summarize(messages)}\n{_HEAD}\n{listed}" if found else summarize(messages)

    return summary


def _as_is(t: Tool) -> bool:
    return t.terminal or t.is_question or t.agent is not None or t.handoff is not None


@dataclasses.dataclass(frozen=True)
class _Keeper:
    ws: Workspace
    over: int
    preview: int

    def result(self, value: Any, call: Invocation[Any]) -> Any:
        """``value``, or when its text is over the size, the note that points to the file holding it."""
        if isinstance(value, PART_TYPES) or (
            isinstance(value, list | tuple) and any(isinstance(v, PART_TYPES) for v in value)
        ):
            return value
        text = value if isinstance(value, str) else result_text(value)
        if len(text) <= self.over:
            return value
        path = "/".join(
            (FOLDER, *(_UNSAFE.sub("_", p) for p in call.run_id.split("/")), _UNSAFE.sub("_", call.call_id))
        )
        path += ".txt"
        data = text.encode()
        self.ws.write_bytes(path, data)
        shown = text[: self.preview]
        rest = len(shown.encode())
        return (
            f"[saved to {path}: the {len(text):,}-character result of {call.tool_name} was too long for the "
            f"notebook. Its first {len(shown):,} characters follow; read more with "
            f'read_file(path="{path}", offset={rest}) ({len(data):,} bytes in all).]\n{shown}'
        )


def _offloading(t: Tool, keep: _Keeper) -> Tool:
    inject = t.inject or "offload_invocation"

    async def run(**kwargs: Any) -> Any:
        call: Invocation[Any] = kwargs.pop(inject)
        value = await t.invoke(kwargs, call)  # which hands the invocation on if the tool asks for it
        return await asyncio.to_thread(keep.result, value, call)  # a large write stays off the event loop

    return dataclasses.replace(t, fn=run, inject=inject, timeout=None)  # the tool's own timeout still applies
