"""Several async streams as one: items are yielded as they land, in any order.

:func:`interleave` runs each stream in its own task; the first error of any
stream stops the others and is raised; a set ``cancel`` event stops them all and
raises :class:`CancelRequested`; a consumer that leaves early stops them too.

>>> import asyncio
>>> async def count(name, n):
...     for i in range(n):
...         yield f"{name}{i}"
>>> async def main():
...     return sorted([x async for x in interleave([count("a", 2), count("b", 1)], None)])
>>> asyncio.run(main())
['a0', 'a1', 'b0']
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TypeVar

__all__ = ["CancelRequested", "interleave"]

T = TypeVar("T")


class CancelRequested(Exception):
    """The cancel event was set while the streams ran."""


async def interleave(streams: list[AsyncIterator[T]], cancel: asyncio.Event | None) -> AsyncIterator[T]:
    """Yield the items of every stream as they land; see the module docstring."""
    landed: asyncio.Queue[tuple[T] | None] = asyncio.Queue()

    async def drain(stream: AsyncIterator[T]) -> None:
        async for item in stream:
            landed.put_nowait((item,))

    async def every_stream() -> None:
        try:
            async with asyncio.TaskGroup() as tg:
                tasks = [tg.create_task(drain(s)) for s in streams]
                if cancel is not None:
                    watcher = tg.create_task(_watch(cancel))
                    await asyncio.wait(tasks)
                    watcher.cancel()
        finally:
            landed.put_nowait(None)

    runner = asyncio.create_task(every_stream())
    try:
        while (item := await landed.get()) is not None:
            yield item[0]
        await runner
    except BaseExceptionGroup as group:
        real = group.subgroup(lambda e: not isinstance(e, CancelRequested | BaseExceptionGroup))
        if real is not None:
            raise real.exceptions[0] from None
        raise CancelRequested from None
    finally:
        if not runner.done():  # the consumer left: stop the streams
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await runner


async def _watch(cancel: asyncio.Event) -> None:
    await cancel.wait()
    raise CancelRequested
