"""Human decisions from the command line: recorded in the store, or asked inline.

:func:`record` is what ``tether approve`` / ``deny`` / ``retry`` / ``skip`` do:
rebuild the run's state from its committed events, decide on it (signed with
the workspace key), and append one ``approval-decided`` event per decision with
``expected_seq`` set to the state's length, so a decision made while another
process advanced the run is refused instead of landing on a state nobody saw.
Nothing runs the agent: ``tether resume`` (or the inline flow) does that, and
the agent checks every signature again before executing anything. A recorded
decision stands until its call runs: changing it takes ``replace=True``
(``--replace``), and deciding the same thing again changes nothing.

:func:`ask` is the inline flow: for each waiting call it shows the tool and its
full arguments (control characters made visible) and reads a whole word,
``y``/``yes``, ``n``/``no`` or ``e``/``edit`` (``r``/``retry`` or ``s``/``skip``
for a call whose outcome is unknown), asking again for anything else.
"""

from __future__ import annotations

import getpass
import json
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..exceptions import UserError
from ..journal import state_of
from ..pending import VERBS
from ..state import Choice, Decision, PendingCall, RunState
from ..store import record_decisions
from ._render import visible

if TYPE_CHECKING:
    from ..stores import RunStore


def reviewer() -> str:
    """Who decided, as recorded in the decision (``cli:<user>``)."""
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


async def load_state(store: RunStore, run_id: str) -> RunState:
    """The state a run's committed events describe; UserError if there is no such run."""
    events = await store.load(run_id)
    if not events:
        raise UserError(f"no run {run_id!r} in the store")
    return state_of(events)


async def record(
    store: RunStore,
    run_id: str,
    choices: Sequence[Choice],
    *,
    key: bytes,
    by: str | None = None,
    replace: bool = False,
) -> RunState:
    """Sign ``choices`` and append them to the run's journal; returns the decided state."""
    state = await load_state(store, run_id)
    if state.status not in ("paused", "needs-decision"):
        hint = " (if its process died, `tether resume` it first)" if state.status == "running" else ""
        raise UserError(f"run {run_id!r} is {state.status!r}, not waiting for a decision{hint}")
    return await record_decisions(store, run_id, choices, by=by or reviewer(), key=key, replace=replace)


def same(d: Decision, c: Choice) -> bool:
    """True if the recorded decision ``d`` already says what ``c`` says."""
    return (d.verdict, d.args, d.message, d.answer) == (c.verdict, c.args, c.message, c.answer)


def described(d: Decision) -> str:
    """``approved by cli:me`` / ``denied by cli:me ("not now")``, for messages."""
    edited = f" with {json.dumps(d.args, sort_keys=True)}" if d.args is not None else ""
    said = f" ({d.message!r})" if d.message else ""
    return f"{VERBS[d.verdict].done}{edited} by {d.by or '?'}{said}"


def check_replacing(state: RunState, choices: Sequence[Choice], replace: bool) -> list[Choice]:
    """The choices that change something; UserError for a change made without ``replace``."""
    changes = []
    for c in choices:
        d = state.decision(c.item)
        if d is not None and same(d, c):
            continue
        if d is not None and not replace:
            raise UserError(
                f"call {c.item!r} is already {described(d)}; that decision stands until the run resumes "
                "(pass --replace to change it)"
            )
        changes.append(c)
    return changes


def waiting(state: RunState) -> list[PendingCall]:
    """The items of a paused run (and of its child runs) that still need a human decision."""
    return [
        p
        for p in state.items()
        if state.decision(p.id) is None and p.status in ("awaiting-approval", "awaiting-answer", "started")
    ]


def _question(p: PendingCall) -> str:
    try:
        args = json.loads(p.call.arguments or "{}")
    except ValueError:
        return p.call.arguments
    return str(args.get("question", p.call.arguments)) if isinstance(args, dict) else p.call.arguments


def pretty_args(p: PendingCall) -> str:
    try:
        return json.dumps(json.loads(p.call.arguments or "{}"), indent=2, ensure_ascii=False)
    except ValueError:
        return p.call.arguments


def pause_hint(state: RunState, call_ids: Sequence[str], where: str) -> str:
    """What a paused run waits for and the commands that decide it and continue it."""
    rid = state.run_id
    calls = [state.item(c) for c in call_ids]
    lines = [f"paused: run {rid} waits for a decision on {len(calls)} call(s):"]
    lines += [f"  {p.id}  {p.label} {p.call.arguments}" for p in calls]
    one = calls[0].id if len(calls) == 1 else "CALL_ID"
    if all(p.status == "awaiting-answer" for p in calls):
        lines.append(f"  answer:   tether answer {rid} {one} TEXT{where}")
    elif state.status == "needs-decision":
        lines.append(f"  run again:  tether retry {rid} {one}{where}")
        lines.append(f"  or not:     tether skip {rid} {one} [-m MESSAGE]{where}")
    else:
        many = one if len(calls) == 1 else "[CALL_ID...]"
        lines.append(f"  approve:  tether approve {rid} {many}{where}")
        lines.append(f"  deny:     tether deny {rid} {one} [-m MESSAGE]{where}")
    lines.append(f"  then:     tether resume {rid}{where}")
    return visible("\n".join(lines))


# -- inline ----------------------------------------------------------------------------

Prompt = Callable[[str], str]
APPROVAL_WORDS = {"y": "approve", "yes": "approve", "n": "deny", "no": "deny", "e": "edit", "edit": "edit"}
UNKNOWN_WORDS = {"r": "retry", "retry": "retry", "s": "skip", "skip": "skip"}


def ask(state: RunState, call_ids: Sequence[str], read: Prompt = input) -> list[Choice]:
    """Ask about each waiting call in turn; EOFError/KeyboardInterrupt abort the whole set."""
    return [_ask_one(state.item(cid), read) for cid in call_ids]


def _ask_one(p: PendingCall, read: Prompt) -> Choice:
    name = visible(p.label)
    if p.status == "awaiting-answer":
        print(f"\n  {name} asks: {visible(_question(p))}")
        while not (text := read("  your answer: ").strip()):
            pass
        return Choice("answer", p.id, answer=text)
    print(f"\n  {name} wants to run with:")
    print(_indent(visible(pretty_args(p)), 4))
    if p.status == "started":
        print(f"  {name} was interrupted before it reported back: it may or may not have run.")
        if _choose(read, "  run it again? [r]etry, [s]kip: ", UNKNOWN_WORDS) == "retry":
            return Choice("retry", p.id)
        return Choice("skip", p.id, message=read("  tell the model why (optional): ").strip())
    while True:
        answer = _choose(read, "  allow? [y]es, [n]o, [e]dit: ", APPROVAL_WORDS)
        if answer == "approve":
            return Choice("approve", p.id)
        if answer == "deny":
            return Choice("deny", p.id, message=read("  tell the model why (optional): ").strip())
        args = _edit(p, read)
        if args is not None:
            return Choice("approve", p.id, args=args)


def _choose(read: Prompt, prompt: str, words: dict[str, str]) -> str:
    """The verdict a whole word names; anything else asks again."""
    while True:
        answer = words.get(read(prompt).strip().lower())
        if answer is not None:
            return answer
        long, short = [w for w in words if len(w) > 1], [w for w in words if len(w) == 1]
        print(f"  please answer {_either(long)} (or {_either(short)})")


def _either(words: list[str]) -> str:
    return ", ".join(words[:-1]) + " or " + words[-1]


def _edit(p: PendingCall, read: Prompt) -> dict[str, Any] | None:
    """New arguments, in $VISUAL/$EDITOR when set, else typed as one line of JSON.

    None (back to the question) for an empty line, or an editor left without saving.
    """
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    text: str | None = None
    while True:
        if editor and text is None:
            import click

            text = click.edit(pretty_args(p) + "\n", extension=".json") or ""
        else:
            text = read("  new arguments as JSON (empty line: back): ")
        if not text.strip():
            return None
        try:
            args = json.loads(text)
        except ValueError as exc:
            print(f"  that is not JSON ({exc}); try again")
            continue
        if isinstance(args, dict):
            print("  approved with:\n" + _indent(visible(json.dumps(args, indent=2, ensure_ascii=False)), 4))
            return args
        print("  the arguments must be a JSON object; try again")


def _indent(text: str, n: int) -> str:
    return "\n".join(" " * n + line for line in text.splitlines())


def check_args_for(call_ids: Sequence[str], args: str | None) -> dict[str, Any] | None:
    """Parse ``--args``; it edits exactly one call."""
    if args is None:
        return None
    if len(call_ids) != 1:
        raise UserError("--args edits one call: name exactly one call id")
    try:
        value = json.loads(args)
    except ValueError as exc:
        raise UserError(f"--args is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise UserError("--args must be a JSON object")
    return value
