"""The brain of a code action's child run: the program itself, replayed against the journal.

Each tool call the program makes is one reply of this policy, so the loop
validates it, gates it, journals it and runs it like any other call. When the
loop asks for the next reply, the policy gives the program the call's result
(from the notebook: what the loop wrote is what the program gets) and waits
for its next call.

A program that is not running any more (the run paused, crashed or moved to
another process) runs again from the top: each call the notebook already holds
is answered from its recorded result without running again, and the first call
past them goes on live. A call that differs from the recorded one at its
position (time, randomness, an edited program) ends the action with a note
that starts ``replay diverged:`` and names both calls; the agent turns that
into a failed run (:mod:`tether.codeact._actions`).

One policy serves every run of its agent, so a waiting program is kept under
the id of the run that started it (:func:`~tether.policy.deciding_run`) and
only that run ever continues it: another run with the same program and the
same calls so far gets its own process, never one holding someone else's results.
"""

from __future__ import annotations

import asyncio
import json
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from ..context import Context
from ..messages import Message, ToolCall
from ..policy import deciding_run
from ..toolkits import Sandbox, SandboxLimits
from ..tools import Tool
from . import _api
from ._bridge import BadMessage, Call, End, Session

__all__ = ["DIVERGED", "FINAL", "ProgramPolicy"]

FINAL = "final_answer: "  # the first line of a note whose program called final_answer(value)
DIVERGED = "replay diverged: "  # the first line of a note whose program made another call than its journal's
MAX_NOTE = 16_000  # characters of printed output kept in the note


class ProgramPolicy:
    """A :class:`~tether.policy.Policy` whose replies are a sandboxed program's tool calls.

    It is also the child agent's observer: when a child run stops streaming (it
    paused, ended or was cancelled), programs left waiting are killed.
    """

    model = None

    def __init__(self, sandbox: Sandbox, servers: Mapping[str, Sequence[Tool]], limits: SandboxLimits | None) -> None:
        self.sandbox, self.limits = sandbox, limits
        self.modules = {name: [t.name for t in tools] for name, tools in servers.items()}
        # run id -> (the task streaming that run, its program blocked on a result)
        self._waiting: dict[str, tuple[Any, Session]] = {}
        self._text: dict[str, bool] = {}  # tool name -> returns str (then its note is the value as it is)

    async def decide(self, context: Context, tools: Sequence[Tool]) -> Message:
        program = _program_of(context)
        history = _history(context)
        run_id = deciding_run()
        session = self._live(run_id, program, history)
        try:
            if session is None:
                session = Session(program)
                await session.start(self.sandbox, self._config(tools), self.limits)
                if (diverged := await self._replay(session, history, tools)) is not None:
                    session.stop()
                    return Message.assistant(diverged)
            else:
                await session.reply(self._result(*history[-1], tools))
            step = await session.next()
        except BadMessage as exc:
            return Message.assistant(f"The program was stopped: it sent {exc} on the bridge.")
        except BaseException:
            if session is not None:
                session.stop()
            raise
        if isinstance(step, End):
            return Message.assistant(note_of(step, len(session.asked)))
        if run_id:
            self._waiting[run_id] = (asyncio.current_task(), session)
        else:  # decided outside a run: nothing names who may continue it, so nobody does (it replays)
            session.stop()
        return Message.assistant("", [ToolCall.of(step.name, step.args, id=f"code_{len(history) + 1}")])

    def _live(self, run_id: str, program: str, history: list[tuple[ToolCall, Message | None]]) -> Session | None:
        """This run's program still waiting for the last recorded call's result, if it runs here.

        Only the run that started a program continues it; a program of this run that
        no longer fits its notebook is stopped (the run replays from the top).
        """
        loop = asyncio.get_running_loop()
        for rid, (_, s) in list(self._waiting.items()):
            if s.loop is not loop:  # an earlier event loop's: it is gone
                del self._waiting[rid]
                s.stop()
        entry = self._waiting.pop(run_id, None) if run_id else None
        if entry is None:
            return None
        session = entry[1]
        calls = [Call(c.name, json.loads(c.arguments)) for c, _ in history]
        if session.program == program and session.asked == calls:
            return session
        session.stop()
        return None

    async def _replay(
        self, session: Session, history: list[tuple[ToolCall, Message | None]], tools: Sequence[Tool]
    ) -> str | None:
        """Answer the calls the notebook holds from their results; a note if the program goes another way."""
        for n, (call, result) in enumerate(history, 1):
            recorded = Call(call.name, json.loads(call.arguments))
            step = await session.next()
            if isinstance(step, End):
                return f"{DIVERGED}the journal holds call {n}, {recorded.shown()}, but the program ended before it"
            if step != recorded:
                return (
                    f"{DIVERGED}call {n} of the program is {step.shown()}, but the journal holds "
                    f"{recorded.shown()} at that position (does the program depend on time, randomness or "
                    "an edit?); nothing was run"
                )
            await session.reply(self._result(call, result, tools))
        return None

    def _result(self, call: ToolCall, result: Message | None, tools: Sequence[Tool]) -> dict[str, Any]:
        """What the program gets for a recorded call: the value the note holds, or the error it tells."""
        if result is None:
            return {"error": f"no result was recorded for {call.name}"}
        if result.is_error:
            return {"error": result.text}
        text = result.text
        if self._returns_text(call.name, tools):
            return {"ok": text}
        try:
            return {"ok": json.loads(text)}
        except ValueError:
            return {"ok": text}

    def _returns_text(self, name: str, tools: Sequence[Tool]) -> bool:
        if name not in self._text:
            tool = next((t for t in tools if t.name == name), None)
            try:
                self._text[name] = tool is not None and typing.get_type_hints(tool.fn).get("return") is str
            except Exception:  # a hint that does not resolve: read the note as JSON when it is
                self._text[name] = False
        return self._text[name]

    def _config(self, tools: Sequence[Tool]) -> dict[str, Any]:
        """What the stub builds the program's functions from."""
        by_name = {t.name: t for t in tools}
        in_modules = {n for names in self.modules.values() for n in names}
        top = [_api.spec_of(t) for t in tools if t.name not in in_modules]
        servers = {
            _api.python_name(name): _api.module_of(name, [by_name[n] for n in names if n in by_name])
            for name, names in self.modules.items()
        }
        return {"tools": top, "servers": servers}

    # -- the observer: a stopped run leaves no program behind --------------

    def watch(self, agent: Any) -> ProgramPolicy:
        return self

    def event(self, ev: Any) -> None:
        pass

    def close(self) -> None:
        """A child run stopped streaming: kill its program if it still waits (a resume replays it).

        Runs stream in their own tasks, and a run's watcher closes in the task that streamed it.
        """
        try:
            task = asyncio.current_task()
        except RuntimeError:  # no event loop: nothing of this process can be waiting
            task = None
        for rid, (owner, s) in list(self._waiting.items()):
            if owner is task or owner is None or owner.done():
                del self._waiting[rid]
                s.stop()


def _program_of(context: Context) -> str:
    first = next((m for m in context if m.role == "user"), None)
    return first.text if first is not None else ""


def _history(context: Context) -> list[tuple[ToolCall, Message | None]]:
    """The calls the notebook holds, in order, each with its result (None while it has none)."""
    calls: list[tuple[ToolCall, Message | None]] = []
    index: dict[str, int] = {}
    for m in context:
        if m.role == "assistant":
            for c in m.tool_calls:
                index[c.id] = len(calls)
                calls.append((c, None))
        elif m.role == "tool" and m.tool_call_id in index:
            i = index[m.tool_call_id]
            calls[i] = (calls[i][0], m)
    return calls


def note_of(end: End, calls: int) -> str:
    """The action's result note: how it ended, what it printed, its last expression's value."""
    ending, result = end.ending, end.result
    made = f"{calls} tool call{'s' if calls != 1 else ''}"
    if ending is None:
        why = result.killed_reason or f"exit code {result.exit_code}"
        head = f"The program was stopped before it finished ({why}; {made})."
    elif "final" in ending:
        head = FINAL + json.dumps(ending["final"], ensure_ascii=False)
    elif "error" in ending:  # the stub keeps these short; a program writing its own end may not
        where = _cut(str(ending.get("where") or "the start"), 4000)
        head = f"The program stopped with an error ({made}): {_cut(str(ending['error']), 4000)}\n[where]\n{where}"
    elif "exit" in ending:
        head = f"The program exited with status {ending['exit']} ({made})."
    else:
        head = f"The program ran to its end ({made})."
    parts = [head]
    if result.stdout:
        parts.append("[printed]\n" + _cut(result.stdout.decode(errors="replace")))
    if result.stderr:
        parts.append("[stderr]\n" + _cut(result.stderr.decode(errors="replace")))
    if ending is not None and "value" in ending:
        parts.append(f"[value]\n{_cut(str(ending['value']), 4000)}")
    return "\n".join(p.rstrip("\n") for p in parts)


def _cut(text: str, most: int = MAX_NOTE) -> str:
    if len(text) <= most:
        return text
    return text[:most] + f"\n[... {len(text) - most} more characters not shown]"
