"""A pause: what a turn asks a person before the run stops, and why it stops.

When a turn waits (:class:`~tether._loop.turn.Wait`), each call that was only
proposed until now is asked about first: an ``approval-requested`` or a
``question-asked`` event, bound to the exact arguments by their hash. Then the
run pauses with every open item of its tree, for the most urgent reason among
them: an outcome unknown after a crash, then an approval, then a question.

>>> from tether.pending import PendingCall
>>> from tether.messages import ToolCall
>>> reason_of([PendingCall(ToolCall("c1", "ask", "{}"), status="awaiting-answer")])
'question'
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..events import ApprovalRequested, Event, PauseReason, QuestionAsked
from ..journal import Journal
from ..pending import PendingCall
from ..state import args_hash
from .turn import Wait, question_text

__all__ = ["asks", "reason_of"]


def asks(journal: Journal, waits: Sequence[Wait]) -> list[Event]:
    """The requests the turn puts to a person: one per waiting call not asked about before this pause."""
    out: list[Event] = []
    for w in waits:
        if journal.pending[w.call.id].status != "proposed":
            continue  # asked before this pause
        if w.reason == "approval":
            out.append(ApprovalRequested(w.call, args_hash(w.call.arguments), w.note))
        elif w.reason == "question":
            out.append(QuestionAsked(w.call, args_hash(w.call.arguments), question_text(w.call)))
    return out


def reason_of(items: Iterable[PendingCall]) -> PauseReason:
    """Why a run with these open items pauses: the most urgent kind among them."""
    reasons = {_REASONS.get(i.status, "approval") for i in items}
    return next(r for r in ("outcome-unknown", "approval", "question") if r in reasons)


_REASONS: dict[str, PauseReason] = {
    "started": "outcome-unknown",
    "awaiting-answer": "question",
    "awaiting-approval": "approval",
}
