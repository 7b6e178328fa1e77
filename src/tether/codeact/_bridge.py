"""The host's side of one running program: the sandboxed process and its bridge socket.

The bridge is one end of a ``socketpair`` the sandbox inherits (the program
has no network: it reaches nothing else). The host reads one JSON line at a
time, never more than :data:`MAX_MESSAGE` bytes, and only when the loop asks
for the program's next call, so a program that floods the bridge only blocks
itself. A message that is not exactly ``{"call": str, "args": {...}}`` or
``{"end": {...}}`` stops the program: the bridge carries calls, never ids,
results or anything for the journal.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..toolkits import Sandbox, SandboxLimits
from ..toolkits._sandbox import ExecResult

__all__ = ["MAX_MESSAGE", "BadMessage", "Call", "End", "Session"]

MAX_MESSAGE = 1024 * 1024  # one call's arguments, as JSON
_STUB = (Path(__file__).parent / "_stub.py").read_text()


_LOOP: asyncio.AbstractEventLoop | None = None
_LOCK = threading.Lock()


def _background() -> asyncio.AbstractEventLoop:
    """The event loop the programs' sandboxes run in: its own thread, so that a run which
    pauses and returns (its event loop closing at once) still leaves each program killed and reaped."""
    global _LOOP
    with _LOCK:
        if _LOOP is None:
            _LOOP = asyncio.new_event_loop()
            threading.Thread(target=_LOOP.run_forever, name="tether-codeact", daemon=True).start()
        return _LOOP


class BadMessage(Exception):
    """The program broke the bridge's protocol; it has been stopped."""


@dataclass(frozen=True, slots=True)
class Call:
    """The program asks for one tool call."""

    name: str
    args: dict[str, Any]

    def shown(self) -> str:
        return f"{self.name}({json.dumps(self.args, sort_keys=True, ensure_ascii=False)[:300]})"


@dataclass(frozen=True, slots=True)
class End:
    """The program ended: how (its message, if it sent one) and what the sandbox saw."""

    ending: dict[str, Any] | None
    result: ExecResult


class Session:
    """One run of a program in the sandbox, talking over its bridge."""

    def __init__(self, program: str) -> None:
        self.program = program
        self.asked: list[Call] = []  # the calls it made, in order; the last one may wait for its result
        self.task: asyncio.Future[ExecResult] | None = None
        self._running: concurrent.futures.Future[ExecResult] | None = None
        self.loop = asyncio.get_running_loop()
        self._host, self._guest = socket.socketpair()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def start(
        self, sandbox: Sandbox, config: dict[str, Any], limits: SandboxLimits | None, python: str = "python3"
    ) -> None:
        """Start the program; ``config`` is what the stub reads (the program, the functions)."""
        stdin = json.dumps({**config, "program": self.program, "fd": self._guest.fileno()}).encode()
        argv = [python, "-I", "-c", _STUB]
        running = sandbox.run(argv, stdin=stdin, limits=limits, pass_fds=[self._guest.fileno()])
        self._running = asyncio.run_coroutine_threadsafe(running, _background())
        self.task = asyncio.wrap_future(self._running)
        self._reader, self._writer = await asyncio.open_connection(sock=self._host, limit=MAX_MESSAGE)

    async def next(self) -> Call | End:
        """The program's next call, or how it ended; :class:`BadMessage` (and the program stopped) if neither."""
        assert self.task is not None and self._reader is not None
        read: asyncio.Future[bytes] = asyncio.ensure_future(self._reader.readline())
        try:
            either: list[asyncio.Future[Any]] = [read, self.task]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            read.cancel()
            raise
        if not read.done():
            read.cancel()
            return End(None, await self._ended())
        try:
            line = read.result()
        except (ValueError, asyncio.LimitOverrunError):
            self.stop()
            raise BadMessage(f"a message longer than {MAX_MESSAGE} bytes") from None
        try:
            message = _parse(line)
        except BadMessage:
            self.stop()
            raise
        if isinstance(message, Call):
            self.asked.append(message)
            return message
        return End(message, await self._ended())

    async def reply(self, value: dict[str, Any]) -> None:
        """Answer the program's last call: ``{"ok": value}`` or ``{"error": text}``."""
        assert self._writer is not None
        self._writer.write(json.dumps(value, ensure_ascii=False).encode() + b"\n")
        with contextlib.suppress(ConnectionError):
            await self._writer.drain()

    async def _ended(self) -> ExecResult:
        assert self.task is not None
        result = await self.task
        self.close()
        return result

    def stop(self) -> None:
        """Kill the program (its sandbox goes with it) and close the bridge."""
        if self._running is not None:
            self._running.cancel()  # the sandbox kills every process of the command when cancelled
        self.close()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._host.close()
        self._guest.close()


def _parse(line: bytes) -> Call | dict[str, Any]:
    """A call, or the ending the program sent; :class:`BadMessage` for anything else."""
    if not line.endswith(b"\n"):
        raise BadMessage("a message cut short (no newline before the program closed the bridge)")
    try:
        message = json.loads(line)
    except ValueError as exc:
        raise BadMessage(f"a message that is not JSON ({exc})") from None
    if not isinstance(message, dict):
        raise BadMessage("a message that is not a JSON object")
    if "id" in message or "call_id" in message:
        raise BadMessage("a message naming a call id (call ids are the host's, never the program's)")
    if set(message) == {"call", "args"} and isinstance(message["call"], str) and isinstance(message["args"], dict):
        return Call(message["call"], message["args"])
    if set(message) == {"end"} and isinstance(message["end"], dict):
        ending: dict[str, Any] = message["end"]
        return ending
    raise BadMessage(f"a message that is neither a call nor the end: {json.dumps(message)[:200]}")
