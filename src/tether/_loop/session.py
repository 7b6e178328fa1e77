"""Sessions: a named conversation that goes on across runs and processes.

``agent.run(task, session="customer-42")`` starts a new run from the notebook
the session's last run left, as the agent's store has it: the store finds the
last run by its session index (:meth:`~tether.store.RunStore.sessions`), the
agent's compactor shortens the notebook first, and the new run's
``run-started`` labels say which session it belongs to and which run it
continues (``meta["session"]``, ``meta["continues"]``). The store refuses a
run that continues anything but the session's last run, so two processes
cannot both continue one conversation.

A session whose last run waits for people (paused, or needing a decision) or
is still running refuses a new run: decide it and resume it first. A call the
last run never finished (it was cancelled, or ran out of budget mid-turn) gets
a note saying so, so the notebook always has a result for every call.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..context import Context
from ..exceptions import LeaseConflict, StateError, UserError
from ..journal import Journal
from ..messages import Message
from ..store import RunStore

__all__ = ["NOT_FINISHED", "continue_session"]

NOT_FINISHED = "the previous run of this conversation ended before this call reported back; it did not finish"
_WAITING = ("paused", "needs-decision")


async def continue_session(
    store: RunStore | None,
    name: str,
    compactor: Callable[[Context], Context] | None,
    prior: Context | None = None,
) -> tuple[Context, dict[str, str]]:
    """The notebook a new run of session ``name`` starts from, and the labels that bind it to the session."""
    if store is None:
        raise UserError("a session lives in the run store: give the agent a store (Agent(store=...))")
    if not isinstance(name, str) or not name or len(name) > 200 or "\x00" in name or not _utf8(name):
        raise UserError(
            f"a session name is a non-empty string of at most 200 characters, without NUL or lone "
            f"surrogates (every store must hold it), got {name!r}"
        )
    if prior is not None:
        raise UserError("give a session or a context, not both: a session's notebook comes from its last run")
    found = await store.sessions(name, limit=1)
    if not found:
        return Context(), {"session": name, "continues": ""}
    last = found[0]
    await _check_idle(store, name, last.last_run, last.status)
    journal = Journal.of(await store.load(last.last_run))
    notebook = Context(journal.snapshot().messages)
    for p in journal.pending.values():
        notebook = notebook.add(Message.tool_result(p.call.id, NOT_FINISHED, name=p.call.name, is_error=True))
    if compactor is not None:
        notebook = compactor(notebook)
    return notebook, {"session": name, "continues": last.last_run}


def _utf8(name: str) -> bool:
    try:
        name.encode()
    except UnicodeEncodeError:
        return False
    return True


async def _check_idle(store: RunStore, name: str, run_id: str, status: str) -> None:
    if status in _WAITING:
        what = "waits for a decision" if status == "paused" else "needs a decision (a call's outcome is unknown)"
        raise StateError(
            f"session {name!r} cannot start a new run: its last run {run_id!r} {what}; decide it "
            f"(state.approve/deny/answer, record_decisions, tether approve) and resume it (run_id={run_id!r}) first"
        )
    if status == "running":
        info = await store.get(run_id)
        if info is not None and info.lease_expires_at is not None and info.lease_expires_at > time.time():
            raise LeaseConflict(
                f"session {name!r} cannot start a new run: its last run {run_id!r} is running ({info.lease_owner})",
                holder=info.lease_owner,
            )
        raise StateError(
            f"session {name!r} cannot start a new run: its last run {run_id!r} was interrupted; "
            f"resume it (run_id={run_id!r}) or cancel it first"
        )
