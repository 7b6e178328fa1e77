"""``tether chat``: a conversation with the agent at the terminal.

Each line you type is one run, continuing the conversation so far
(``agent.stream(text, context=...)``); with ``--session NAME`` each run is a
run of that session in the store (``agent.stream(text, session=NAME)``), so the
conversation goes on after a restart. ``exit`` (or Ctrl-D) leaves, ``clear``
starts a new conversation, Ctrl-C at the prompt clears the line and Ctrl-C
during a turn cancels that turn. A call that needs approval is asked about
inline; leaving that question (Ctrl-C, or the end of the input) leaves the run
paused, as ``tether run`` does: it can be decided and resumed later, and the
conversation goes on with a note telling the model the call has not run.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable

from ..context import Context
from ..exceptions import TetherError
from ..messages import Message
from ._config import location
from ._decide import ask, load_state, pause_hint
from ._render import Renderer, visible
from ._session import Outcome, Session

CANCELLED_CALL = "the user cancelled this call before it reported back; its outcome is unknown"
NOT_RUN_CALL = "the user cancelled the turn before this call ran; it did not run"
UNDECIDED_CALL = "the user has not decided on this call yet (its run is paused); it has not run"
HELP = "type a message; `clear` starts over, `exit` or Ctrl-D leaves, Ctrl-C stops a turn"


def chat(session: Session, renderer: Renderer, *, read: Callable[[str], str] = input, name: str | None = None) -> None:
    """The read-run-print loop; with ``name``, each turn is a run of that session in the store."""
    _enable_line_editing()
    context: Context | None = None
    model = session.settings.model or "local"
    print(visible(f"tether chat · model {model} · workspace {session.settings.workspace}\n{HELP}"))
    if name is not None:
        print(visible(_session_line(session, name)))
    while True:
        try:
            text = read("you> ").strip()
        except EOFError:
            print()
            return
        except KeyboardInterrupt:
            print()
            continue
        if text in ("exit", "quit"):
            return
        if text == "clear" and name is not None:
            print(visible(f"(session {name!r} is kept in the store; start another with --session OTHER)"))
        elif text == "clear":
            context = None
            print("(conversation cleared)")
        elif text and name is not None:
            session_turn(session, renderer, text, name)
        elif text:
            context = turn(session, renderer, text, context)


def turn(session: Session, renderer: Renderer, text: str, context: Context | None) -> Context | None:
    """One run of the conversation; returns the conversation to continue from."""
    try:
        outcome = session.start(text, renderer, context=context)
        outcome = session.settle(outcome, renderer, ask)
        _report(outcome, location(session.settings))
        return session.run(_conversation(session, outcome.run_id)) if outcome.run_id else context
    except TetherError as exc:
        print(visible(f"error: {exc}"), file=sys.stderr)
        return context


def session_turn(session: Session, renderer: Renderer, text: str, name: str) -> None:
    """One run of the session ``name``: it starts from the notebook the session's last run left."""
    try:
        outcome = session.start(text, renderer, name=name)
        outcome = session.settle(outcome, renderer, ask)
        _report(outcome, location(session.settings))
    except TetherError as exc:
        print(visible(f"error: {exc}"), file=sys.stderr)


def _session_line(session: Session, name: str) -> str:
    found = session.run(session.store.sessions(name, limit=1))
    if not found:
        return f"(a new session {name!r})"
    last = found[0]
    return f"(continuing session {name!r}: {last.runs} run(s), the last one {last.last_run} {last.status})"


def _report(outcome: Outcome, where: str) -> None:
    if outcome.interrupted and outcome.state is not None:
        print(visible(f"(left undecided)\n{pause_hint(outcome.state, outcome.call_ids, where)}"))
    elif outcome.status == "cancelled":
        print("(turn cancelled)")
    elif outcome.status in ("failed", "limit-reached"):
        print(visible(f"({outcome.status}: {outcome.reason})"))


async def _conversation(session: Session, run_id: str) -> Context:
    """The run's notebook, with a note for every call that never reported back."""
    state = await load_state(session.store, run_id)
    ctx = Context(state.messages)
    for p in state.open_calls:
        if p.status == "started":
            note = CANCELLED_CALL
        else:  # never started: nothing happened (yet)
            note = UNDECIDED_CALL if state.status in ("paused", "needs-decision") else NOT_RUN_CALL
        ctx = ctx.add(Message.tool_result(p.call.id, note, name=p.call.name, is_error=True))
    return ctx


def _enable_line_editing() -> None:
    if sys.stdin.isatty():
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  # input() gains history and editing
