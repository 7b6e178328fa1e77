"""Running one tool call: within the run's time, whatever happens written as its result.

:func:`run_call` never raises for what a tool does: a value becomes the result
text, a timeout or an exception becomes an error note the model reads
(``ToolFinished.error`` says which kind). Only cancellation propagates.

>>> import asyncio
>>> from tether.messages import ToolCall
>>> from tether.tools import tool
>>> from tether._loop.turn import Execute
>>> @tool
... async def halve(n: int) -> float:
...     return n / 2
>>> @tool
... async def boom() -> None:
...     raise ValueError("no")
>>> asyncio.run(run_call(Execute(ToolCall("c1", "halve", "{}"), halve, {"n": 3}), "r1", None)).result.content
'1.5'
>>> asyncio.run(run_call(Execute(ToolCall("c2", "boom", "{}"), boom, {}), "r1", None)).result.content
"tool 'boom' failed: ValueError: no"
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING, Any

from ..events import ErrorKind, Event, ToolFinished
from ..messages import Message
from ..parts import MAX_PARTS, PART_TYPES, Part, Text, within
from ..tools import Invocation, ToolTimedOut, result_text
from .turn import Execute

if TYPE_CHECKING:
    from ..journal import Journal

__all__ = ["fit_result", "run_call"]


async def run_call(step: Execute, run_id: str, deadline: float | None, deps: Any = None) -> ToolFinished:
    """Run ``step``'s tool by ``deadline`` (the event loop's clock); its result, or how it failed.
    ``deps`` are the run's dependencies, handed to the tool through its :class:`Invocation`."""
    tool, call = step.tool, step.call
    invocation = Invocation(run_id, call.id, tool.name, deps)
    error: ErrorKind | None = None
    budget = asyncio.timeout_at(deadline) if deadline is not None else None
    unknown = "" if tool.is_async else "; it runs in a thread and may still finish"
    try:
        if budget is None:
            value = await tool.invoke(step.args, invocation)
        else:
            async with budget:
                value = await tool.invoke(step.args, invocation)
        content = result_content(value, step.prefix)
    except ToolTimedOut as exc:
        note, error = f"{exc}{unknown}", "timeout"
    except TimeoutError as exc:
        if budget is None or not budget.expired():  # the tool's own timeout error, not one of ours
            note, error = f"tool {tool.name!r} failed: TimeoutError: {exc}", "raised"
        else:
            note, error = f"tool {tool.name!r} was stopped: the run's time budget ran out{unknown}", "timeout"
    except Exception as exc:
        note, error = f"tool {tool.name!r} failed: {type(exc).__name__}: {exc}", "raised"
    if error is not None:
        content = step.prefix + note
    result = Message.tool_result(call.id, content, name=tool.name, is_error=error is not None)
    return ToolFinished(result, error)


_PART_CLASSES = frozenset(PART_TYPES)


def result_content(value: Any, prefix: str = "") -> str | tuple[Part, ...]:
    """How a tool's return value is written into the notebook: text, or parts when it returned any.

    A tool may return an :class:`~tether.parts.Image` or :class:`~tether.parts.File`
    (a screenshot), or a list mixing strings and parts.

    >>> from tether.parts import Image
    >>> result_content(["the page:", Image(url="https://example.com/p.png")])[1].url
    'https://example.com/p.png'
    """
    kind = type(value)
    if kind is str:  # the common cases first: the loop pays for this on every call
        text: str = prefix + value
        return text
    if kind in _PART_CLASSES:
        value = [value]
    elif kind is not list and kind is not tuple:
        return prefix + result_text(value)
    if any(isinstance(v, PART_TYPES) for v in value):
        pieces = [v if isinstance(v, PART_TYPES) else Text(result_text(v)) for v in value]
        return capped(tuple([Text(prefix), *pieces] if prefix else pieces))
    return prefix + result_text(value)


def capped(parts: tuple[Part, ...]) -> tuple[Part, ...]:
    """``parts``, or when they are more than a note holds (:data:`~tether.parts.MAX_PARTS`), the
    first ones and a last text part saying how many were left out: a result the model can read.

    >>> len(capped((Text("x"),) * 1200)), capped((Text("x"),) * 1200)[-1].text
    (1000, '[201 of its 1,200 parts were left out: a note holds at most 1,000 parts]')
    """
    if len(parts) <= MAX_PARTS:
        return parts
    kept = MAX_PARTS - 1
    said = (
        f"[{len(parts) - kept:,} of its {len(parts):,} parts were left out: a note holds at most {MAX_PARTS:,} parts]"
    )
    return (*parts[:kept], Text(said))


def fit_result(ev: Event, journal: Journal) -> Event:
    """``ev``, or for a tool's result with parts, the images and files that would take the journal's
    notebook over its cap left out (:data:`~tether.parts.MAX_NOTEBOOK_PART_BYTES`). Text costs a type check."""
    if not isinstance(ev, ToolFinished) or isinstance(ev.result.content, str):
        return ev
    content = ev.result.content
    fitted = within(content, journal.part_bytes())
    if fitted == content:
        return ev
    return dataclasses.replace(ev, result=dataclasses.replace(ev.result, content=fitted))
