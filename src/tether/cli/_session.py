"""Driving runs for a command: one event loop, rendering, Ctrl-C and inline approvals.

A :class:`Session` owns an :class:`asyncio.Runner` (one event loop for the
whole command, so a store's connections stay on one loop) and the store, key
and agent built from the settings. Each run goes through :meth:`Session.drive`:
events are rendered as they come, and Ctrl-C cancels the run instead of
killing the process: it cancels the task driving the run, which cancels a
running tool (a sandboxed command is killed) or the model request, and the
loop commits ``cancelled`` on its way out. The run ends as ``cancelled`` and
the command goes on.

A pause is a pause everywhere: the inline flow does not bypass it. When a run
pauses and someone is at the terminal, :meth:`Session.settle` asks, records
the decisions in the store exactly as ``tether approve`` would, and resumes the
run by id, until it stops for another reason. Leaving the question (Ctrl-C or
end of input) leaves the run paused.

A new run records how it was started (:func:`tether.cli._keys.run_meta`); a
resumed one is driven by an agent built from that record, in its workspace.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ..events import Cancelled, Event, Failed, Finished, LimitReached, Paused, RunStarted
from ..state import Choice, RunState
from ._config import Settings, build_agent, open_store, recorded_fields, settings_for_run
from ._decide import record
from ._errors import ConfigError
from ._keys import check_record, key_source, run_meta, signing_key
from ._mcp import mcp_tools
from ._project import project_of
from ._render import visible
from ._trust import check_user_config, make_state_dir, sqlite_path, user_config_dir

if TYPE_CHECKING:
    from ..agent import Agent
    from ..context import Context
    from ..stores import RunStore
    from ._render import Renderer

T = TypeVar("T")
Asker = Callable[[RunState, Sequence[str]], list[Choice]]


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a run stopped, as a command reports it."""

    run_id: str
    status: str
    output: str | None = None
    reason: str = ""
    state: RunState | None = None  # when paused
    call_ids: tuple[str, ...] = ()  # the calls a pause waits for
    interrupted: bool = False  # the person left an approval prompt

    @classmethod
    def of(cls, run_id: str, last: Event | None) -> Outcome:
        if isinstance(last, Finished):
            return cls(run_id, "finished", output=last.output)
        if isinstance(last, Paused):
            state = last.state
            return cls(run_id, state.status, reason=last.reason, state=state, call_ids=last.call_ids)
        if isinstance(last, Failed):
            return cls(run_id, "failed", reason=last.error)
        if isinstance(last, LimitReached):
            return cls(run_id, "limit-reached", reason=f"the {last.limit} limit of {last.value:g} was reached")
        if isinstance(last, Cancelled):
            return cls(run_id, "cancelled", reason=last.reason or "cancelled")
        return cls(run_id, "running", reason="the run stopped without a final event")


class Session:
    """The event loop, store, key and agent of one command."""

    def __init__(self, settings: Settings, *, create: bool = True) -> None:
        self.settings = settings
        self.create = create  # False: commands that only look at or decide on existing runs
        self.runner = asyncio.Runner()
        self._store: RunStore | None = None
        self._agents: dict[tuple[Any, ...], Agent] = {}
        self._notes: dict[tuple[Any, ...], str] = {}  # what each agent's runs start with, said once
        self._told = False  # whether the command said which project instructions its runs start with
        self._key: bytes | None = None

    def __enter__(self) -> Session:
        if self.create:  # about to start an agent here: refuse before anything is written
            check_user_config(self.settings.workspace, user_config_dir(self.settings.env))
        db = sqlite_path(self.settings.store_url)
        if not self.create and db is not None and not db.exists():
            raise ConfigError(
                f"no runs here: {db} does not exist (run this in the workspace, or pass --workspace / --store)"
            )
        try:
            self._store = self.run(open_store(self.settings))
        except BaseException:
            self.runner.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._store is not None:
                with contextlib.suppress(Exception):
                    self.run(self._store.aclose())
        finally:
            self.runner.close()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.runner.run(coro)

    @property
    def store(self) -> RunStore:
        if self._store is None:
            raise RuntimeError("use the Session in a `with` block")
        return self._store

    @property
    def key(self) -> bytes:
        """The store's signing key (made on first use only by commands that run agents)."""
        if self._key is None:
            self._key = signing_key(self.settings.store_url, self.settings.env, create=self.create)
        return self._key

    @property
    def agent(self) -> Agent:
        """The agent for new runs, built from this command's settings."""
        return self.agent_for(self.settings)

    def agent_for(self, settings: Settings) -> Agent:
        """An agent working in ``settings.workspace``, once it is known to be safe to work in."""
        check_user_config(settings.workspace, user_config_dir(settings.env))
        make_state_dir(settings.workspace)
        spec = self._spec(settings)
        if spec not in self._agents:
            project = project_of(settings)  # read once: each run keeps the text in its first note
            text, skills = project.instructions.text, project.skills
            agent = build_agent(settings, self.store, self.key, mcp_tools(settings), text, skills)
            self._agents[spec] = agent
            self._notes[spec] = project.note([s.name for s in agent.skills.skills])
        return self._agents[spec]

    @staticmethod
    def _spec(settings: Settings) -> tuple[Any, ...]:
        return (settings.workspace, settings.model, settings.base_url, settings.api_key_env)

    async def settings_of(self, run_id: str) -> Settings:
        """The settings ``run_id`` continues with, after checking this command's key against its record."""
        events = await self.store.load(run_id)
        meta = events[0].meta if events and isinstance(events[0], RunStarted) else {}
        return settings_for_run(self.settings, meta if self.check_key(run_id, meta) else {}, run_id)

    def check_key(self, run_id: str, meta: dict[str, str]) -> bool:
        """Refuse to act on a run started with another signing key (see :mod:`tether.cli._keys`).

        True if the run's record is signed with this store's key (and may be used).
        """
        return check_record(meta, self.key, run_id, key_source(self.settings.store_url, self.settings.env))

    # -- runs ------------------------------------------------------------------

    def start(
        self, task: str, renderer: Renderer, *, context: Context | None = None, name: str | None = None
    ) -> Outcome:
        """A new run of ``task`` (continuing ``context``, or the session ``name`` from the store)."""
        agent = self.agent
        if not self._told and (note := self._notes[self._spec(self.settings)]):
            print(visible(note), file=sys.stderr)  # which AGENTS.md files the run starts with, once per command
        self._told = True
        meta = run_meta(recorded_fields(self.settings), self.key)
        return self.run(self.drive(lambda: agent.stream(task, context=context, meta=meta, session=name), renderer))

    def resume(self, run_id: str, renderer: Renderer) -> Outcome:
        agent = self.agent_for(self.run(self.settings_of(run_id)))
        events = self.run(self.store.load(run_id))
        first = events[0] if events and isinstance(events[0], RunStarted) else None
        if first is not None and "key_id" not in first.meta and first.fingerprint != agent.fingerprint:
            raise ConfigError(
                f"run {run_id!r} was started by another program (agent {first.agent!r}) with other tools than the "
                f"command line's agent: resume it in that program, agent.run(run_id={run_id!r})"
            )
        return self.run(self.drive(lambda: agent.stream(run_id=run_id), renderer))

    def settle(self, outcome: Outcome, renderer: Renderer, ask: Asker | None) -> Outcome:
        """While the run waits for people and someone can answer: ask, record, resume."""
        while ask is not None and outcome.state is not None and outcome.status in ("paused", "needs-decision"):
            try:
                choices = ask(outcome.state, outcome.call_ids)
            except (EOFError, KeyboardInterrupt):
                print()
                return dataclasses.replace(outcome, interrupted=True)
            self.run(record(self.store, outcome.run_id, choices, key=self.key))
            outcome = self.resume(outcome.run_id, renderer)
        return outcome

    async def drive(self, stream: Callable[[], AsyncIterator[Event]], renderer: Renderer) -> Outcome:
        """Render one run's events; Ctrl-C cancels the run, not the command."""
        run_id, last = "", None
        events = stream()
        renderer.start()
        with _CtrlC() as ctrl_c:
            try:
                async for ev in events:
                    renderer.event(ev)
                    run_id = ev.run_id if isinstance(ev, RunStarted) else run_id
                    last = ev
            except asyncio.CancelledError:
                if not ctrl_c.consume():
                    raise
                last = Cancelled("interrupted (Ctrl-C)")
                renderer.event(last)
            finally:
                ctrl_c.armed = False
                renderer.stop()
        if (close := getattr(events, "aclose", None)) is not None:
            await close()  # a stream left early records how it ended in the journal
        return Outcome.of(run_id, last)


class _CtrlC:
    """While armed, Ctrl-C cancels the task that entered the block (not the process).

    The agent's ``cancel`` event would be gentler, but with it the loop waits on
    its watcher after the tools are done; cancelling the task ends the run the
    same way: tools are cancelled and the loop commits ``cancelled``.
    """

    def __init__(self) -> None:
        self.pressed = 0
        self.armed = True
        self.task: asyncio.Task[Any] | None = None

    def __enter__(self) -> _CtrlC:
        if threading.current_thread() is threading.main_thread():
            self.task = asyncio.current_task()
            asyncio.get_running_loop().add_signal_handler(signal.SIGINT, self._interrupt)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.task is not None:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)
            signal.signal(signal.SIGINT, signal.default_int_handler)

    def _interrupt(self) -> None:
        if self.pressed:  # a second Ctrl-C: leave now; the run is resumable (its lease lapses, or it was cancelled)
            sys.stderr.write("\nstopped; the run can be resumed (tether resume)\n")
            sys.stderr.flush()
            os._exit(130)
        if self.armed and self.task is not None:
            self.pressed += 1
            sys.stderr.write("\nstopping… (Ctrl-C again to quit at once)\n")  # said at once, before the model stops
            sys.stderr.flush()
            self.task.cancel()

    def consume(self) -> bool:
        """True (and the task's cancellation undone) if Ctrl-C caused it."""
        if not self.pressed or self.task is None:
            return False
        while self.task.uncancel():
            pass
        return True
