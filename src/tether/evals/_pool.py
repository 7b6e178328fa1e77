"""Where trials run concurrently: one small function, so a dispatcher can replace it.

:func:`run_bounded` runs coroutine factories with at most ``limit`` of them in
flight (a bounded asyncio pool in this process) and returns their results in
the order given. It is the only place the harness decides *how* trials are
run; a different executor (a dispatcher handing runs to workers) fits the same
signature.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

Job = Callable[[], Awaitable[T]]
Runner = Callable[[Sequence[Job[T]], int], Awaitable[list[T]]]


async def run_bounded(jobs: Sequence[Job[T]], limit: int) -> list[T]:
    """Run every job, ``limit`` at a time; results in job order. The first error cancels the rest.

    >>> async def one(): return 1
    >>> asyncio.run(run_bounded([one, one], 1))
    [1, 1]
    """
    gate = asyncio.Semaphore(max(1, limit))
    results: list[T | None] = [None] * len(jobs)

    async def slot(i: int, job: Job[T]) -> None:
        async with gate:
            results[i] = await job()

    try:
        async with asyncio.TaskGroup() as tg:
            for i, job in enumerate(jobs):
                tg.create_task(slot(i, job))
    except BaseExceptionGroup as group:
        raise _first(group) from None
    return results  # type: ignore[return-value]  # every slot was filled


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first real error of a task group (one clear traceback instead of a tree)."""
    error: BaseException = group
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error
