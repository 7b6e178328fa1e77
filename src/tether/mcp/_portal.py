"""An event loop in a thread of its own, where a client's MCP connections live.

The MCP SDK's connections are tied to the event loop that opened them, but a
tether agent may run in many loops one after another (``run_sync`` starts one
per run). So every connection is owned by a task on this loop, and calls from
any loop (or none) are handed over: cancelling the awaiting side cancels the
call here, which tells the server to stop.

>>> portal = Portal()
>>> async def two() -> int:
...     return 2
>>> portal.run_sync(two())
2
>>> portal.stop()
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from ..exceptions import UserError

T = TypeVar("T")


class Portal:
    """A daemon thread running one event loop, started on first use."""

    def __init__(self, name: str = "tether-mcp") -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopped = False

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop (started now if it was not running; ``UserError`` once stopped)."""
        with self._lock:
            if self._stopped:
                raise UserError("this MCP client is closed")
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=loop.run_forever, name=self.name, daemon=True)
                self._thread.start()
                self._loop = loop
            return self._loop

    def inside(self) -> bool:
        """Whether the caller runs on this portal's own thread."""
        return self._thread is not None and threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start ``coro`` on the loop; cancelling the future cancels it."""
        try:
            loop = self.loop
        except UserError:
            coro.close()
            raise
        return asyncio.run_coroutine_threadsafe(coro, loop)

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the loop from any other loop."""
        if self.inside():
            return await coro
        return await asyncio.wrap_future(self.submit(coro))

    def run_sync(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and block until it ends."""
        if self.inside():
            coro.close()
            raise UserError("a blocking MCP call was made from the MCP client's own thread; await it instead")
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()
            raise

    def stop(self) -> None:
        """Stop the loop and wait for its thread (a no-op if it never started)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop, self._thread, self._stopped = None, None, True
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not threading.current_thread():
            thread.join(10)
        if not thread.is_alive():
            loop.close()
