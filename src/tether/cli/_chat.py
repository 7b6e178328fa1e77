"""``tether chat``: a conversation with the agent at the terminal.

Each line you type is one run, continuing the conversation so far
(``agent.stream(text, context=...)``). ``exit`` (or Ctrl-D) leaves, ``clear``
starts a new conversation, Ctrl-C at the prompt clears the line and Ctrl-C
during a turn cancels that turn. A call that needs approval is asked about
inline; leaving that question with Ctrl-C cancels the run, and the model is
told the call never reported back.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable

from ..context import Context
from ..events import Cancelled
from ..exceptions import TetherError
from ..messages import Message
from ._decide import ask, load_state
from ._render import Renderer
from ._session import Outcome, Session

CANCELLED_CALL = "the user cancelled this call before it reported back; its outcome is unknown"
NOT_RUN_CALL = "the user cancelled the turn before this call ran; it did not run"
HELP = "type a message; `clear` starts over, `exit` or Ctrl-D leaves, Ctrl-C stops a turn"


def chat(session: Session, renderer: Renderer, *, read: Callable[[str], str] = input) -> None:
    """The read-run-print loop."""
    _enable_line_editing()
    context: Context | None = None
    model = session.settings.model or "local"
    print(f"tether chat · model {model} · workspace {session.settings.workspace}\n{HELP}")
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
        if text == "clear":
            context = None
            print("(conversation cleared)")
        elif text:
            context = turn(session, renderer, text, context)


def turn(session: Session, renderer: Renderer, text: str, context: Context | None) -> Context | None:
    """One run of the conversation; returns the conversation to continue from."""
    try:
        outcome = session.start(text, renderer, context=context)
        outcome = session.settle(outcome, renderer, ask)
        if outcome.interrupted:
            _cancel(session, outcome)
        _report(outcome)
        return session.run(_conversation(session, outcome.run_id)) if outcome.run_id else context
    except TetherError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return context


def _report(outcome: Outcome) -> None:
    if outcome.interrupted:
        print("(turn cancelled: the waiting call was not run)")
    elif outcome.status == "cancelled":
        print("(turn cancelled)")
    elif outcome.status in ("failed", "limit-reached"):
        print(f"({outcome.status}: {outcome.reason})")


def _cancel(session: Session, outcome: Outcome) -> None:
    """End a run whose approval the person walked away from."""

    async def cancel() -> None:
        state = await load_state(session.store, outcome.run_id)
        await session.store.append(
            outcome.run_id, [Cancelled("the user left the approval prompt")], expected_seq=state.seq
        )

    session.run(cancel())


async def _conversation(session: Session, run_id: str) -> Context:
    """The run's notebook, with a note for every call that never reported back."""
    state = await load_state(session.store, run_id)
    ctx = Context(state.messages)
    for p in state.pending:
        note = CANCELLED_CALL if p.status == "started" else NOT_RUN_CALL  # never started: nothing happened
        ctx = ctx.add(Message.tool_result(p.call.id, note, name=p.call.name, is_error=True))
    return ctx


def _enable_line_editing() -> None:
    if sys.stdin.isatty():
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  # input() gains history and editing
