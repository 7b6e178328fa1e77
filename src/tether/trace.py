"""A run's story: its events told as lines, and the text trace the seed article shows.

:class:`Story` turns events into :class:`Line` values (who, what kind, the
text, the call it concerns, where in the run tree, when), one event at a time,
and handles every kind of :data:`~tether.events.Event` (a type checker says so:
a new kind without a line fails ``mypy --strict``). It follows who drives each
run: a child run's lines are in the child agent's name, and after a handoff the
lines are in the name of the agent that took over. The faces only format the
lines: :func:`render` (the text trace below), the CLI and the web inbox.

>>> from tether import Action, Agent, tool
>>> from tether.testing import ScriptedModel
>>> @tool(effect="none")
... def look_up_order(order_id: str) -> str:
...     return f"{order_id}: Wireless Headphones, $79, delivered"
>>> model = ScriptedModel([Action("look_up_order", {"order_id": "A1234"}, reasoning="let me pull up the order first"),
...                        "Refunded $79."])
>>> result = Agent(model, [look_up_order]).run_sync("Can I get a refund for order A1234?")
>>> print(render(result.events, name="support"))
you asked: "Can I get a refund for order A1234?"
  support thought: let me pull up the order first
  support calls: look_up_order({"order_id": "A1234"})
    -> look_up_order returned: A1234: Wireless Headphones, $79, delivered
  final answer: Refunded $79.
>>> [line.kind for line in story(result.events)]
['asked', 'thought', 'call', 'result', 'answer', 'finished']
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Literal, assert_never

from .context import Context
from .events import (
    TERMINAL,
    ApprovalDecided,
    ApprovalRequested,
    Cancelled,
    ChildEvent,
    ChildStopped,
    Compacted,
    Event,
    Failed,
    Finished,
    HandedOff,
    LimitReached,
    ModelReplied,
    Noted,
    Paused,
    QuestionAsked,
    RunStarted,
    Token,
    ToolFinished,
    ToolStarted,
)
from .messages import Message

__all__ = ["Line", "LineKind", "Story", "render", "story", "text_of"]

LineKind = Literal[
    "asked",  # a person's words at a run's start (a child run's task)
    "resumed",  # a paused or interrupted run goes on
    "thought",  # the model's words beside its calls
    "call",  # the model calls a tool (text: the arguments as JSON)
    "answer",  # the model's text reply
    "result",  # a tool's result (error: it failed)
    "approval",  # a call waits for a person's approval (text: why, when it is not the plain case)
    "question",  # a tool asks a person (text: the question)
    "decided",  # a person decided on a call (value: the verdict, text: their message)
    "handed-off",  # another agent drives the run from here (value: its name)
    "child-stopped",  # a child run stopped before it finished (tool: the child agent, value: its status)
    "compacted",  # older notes were summarised
    "noted",  # the loop told the model something no call asked
    "paused",  # value: the reason
    "finished",  # text: the output
    "failed",  # text: the error
    "cancelled",  # text: the reason
    "limit-reached",  # value: the limit, text: which limit of how much
]
Path = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a run's story, for a face to format.

    ``agent`` drives the run the line belongs to; ``path`` is that run's place
    in the tree (the delegating call ids from the root down, empty at the root).
    ``echo`` marks a line that retells what an earlier line told (a run's output
    right after its text reply, a child's stop right after its own pause): a face
    that shows every line skips it.

    >>> Line("call", "support", text='{"order": "A1"}', tool="refund", call_id="c1").kind
    'call'
    """

    kind: LineKind
    agent: str
    text: str = ""  # what was said, whole: each face shortens it as it likes
    tool: str = ""  # the tool the line is about (a child's stop: the child agent)
    call_id: str = ""
    value: str = ""  # a short word: a verdict, a reason, a status, a limit, an agent handed to
    by: str = ""  # who decided (a decision)
    path: Path = ()
    error: bool = False
    echo: bool = False
    at: float = 0.0  # when its event was committed (epoch seconds; 0.0 if never)


class Story:
    """Tells a run's events as :class:`Line` values, one event at a time (a stream is told as it comes).

    It remembers who drives each run of the tree and what each told last.

    >>> from tether.events import HandedOff, ModelReplied
    >>> from tether.messages import Message, ToolCall
    >>> teller = Story("triage")
    >>> [(l.kind, l.agent, l.value) for l in teller.tell(HandedOff("billing"))]
    [('handed-off', 'triage', 'billing')]
    >>> reply = ModelReplied(Message.assistant("", (ToolCall.of("refund", {}),)))
    >>> [(l.kind, l.agent, l.tool) for l in teller.tell(reply)]
    [('call', 'billing', 'refund')]
    """

    def __init__(self, agent: str = "agent") -> None:
        self.agents: dict[Path, str] = {(): agent}  # who drives each run of the tree now
        self.last: dict[Path, Event] = {}  # the last event each run of the tree told

    def tell(self, item: Event | Message) -> list[Line]:
        """The lines for one event (or one note, when a notebook is told)."""
        if isinstance(item, Message):
            return list(_note(item, partial(Line, agent=self.agents[()])))
        return self._tell(item, ())

    def _tell(self, ev: Event, path: Path) -> list[Line]:
        lines = list(self._lines(ev, path))
        if not isinstance(ev, ChildEvent):
            self.last[path] = ev
        return lines

    def _lines(self, ev: Event, path: Path) -> Iterator[Line]:
        line = partial(Line, agent=self.agents.setdefault(path, "agent"), path=path, at=ev.at)
        match ev:
            case Token() | ToolStarted():
                return  # streamed text is told whole by its reply, a call's start by the call
            case RunStarted():
                if ev.resumed:
                    yield line("resumed")
                for m in ev.messages:
                    yield from _note(m, line)
            case ModelReplied():
                yield from _note(ev.message, line)
            case ToolFinished():
                yield from _note(ev.result, line)
            case ApprovalRequested():
                yield line("approval", tool=ev.call.name, call_id=ev.call.id, text=ev.note)
            case QuestionAsked():
                yield line("question", tool=ev.call.name, call_id=ev.call.id, text=ev.question)
            case ApprovalDecided():
                d = ev.decision
                yield line("decided", call_id=d.call_id, value=d.verdict, by=d.by, text=d.message)
            case ChildStopped():
                child, ended = ev.state.agent or "sub-agent", self._ended((*path, ev.call_id))
                yield line("child-stopped", tool=child, call_id=ev.call_id, value=ev.state.status, echo=ended)
            case ChildEvent():
                self.agents.setdefault((*path, ev.call_id), ev.agent)
                yield from self._tell(ev.event, (*path, ev.call_id))
            case HandedOff():
                yield line("handed-off", value=ev.agent)
                self.agents[path] = ev.agent
            case Paused():
                yield line("paused", value=ev.reason)
            case Compacted():
                yield line("compacted")
            case Noted():
                yield line("noted", text=ev.message.text, error=ev.message.is_error)
            case Finished():
                yield line("finished", text=ev.output, echo=self._answered(path, ev.output))
            case Failed():
                yield line("failed", text=ev.error, value=ev.error_type, error=True)
            case Cancelled():
                yield line("cancelled", text=ev.reason, value="final" if ev.final else "")
            case LimitReached():
                yield line("limit-reached", value=ev.limit, text=f"the {ev.limit} limit of {ev.value:g} was reached")
            case _:
                assert_never(ev)

    def _answered(self, path: Path, output: str) -> bool:
        """Whether the run at ``path`` just told ``output`` as its text reply."""
        last = self.last.get(path)
        return isinstance(last, ModelReplied) and not last.message.tool_calls and last.message.text == output

    def _ended(self, path: Path) -> bool:
        """Whether the run at ``path`` just told how it stopped."""
        last = self.last.get(path)
        return last is not None and last.kind in TERMINAL


def _note(m: Message, line: partial[Line]) -> Iterator[Line]:
    if m.role == "user":
        yield line("asked", text=m.text)
    elif m.role == "assistant":
        if m.tool_calls and m.content:
            yield line("thought", text=m.text)
        for c in m.tool_calls:
            yield line("call", tool=c.name, call_id=c.id, text=c.arguments)
        if not m.tool_calls:
            yield line("answer", text=m.text)
    elif m.role == "tool":
        yield line("result", tool=m.name or "tool", call_id=m.tool_call_id or "", text=m.text, error=m.is_error)


def story(run: Iterable[Event] | Context | Iterable[Message], *, agent: str = "agent") -> list[Line]:
    """The story of a run's events (or of a notebook), the root run driven by ``agent`` at first.

    >>> from tether.events import Finished
    >>> [(l.kind, l.text) for l in story([Finished("done")])]
    [('finished', 'done')]
    """
    teller = Story(agent)
    return [line for item in run for line in teller.tell(item)]


# -- the text trace ---------------------------------------------------------------------------


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def render(run: Iterable[Event] | Context | Iterable[Message], *, name: str = "agent", width: int = 200) -> str:
    """The trace of a run's events, a Context, or a list of messages, as text.

    A child run's events (an agent used as a tool) are told under the call that
    delegated to it, indented, in the child agent's name.
    """
    told = (text_of(line, width) for line in story(run, agent=name))
    return "\n".join(text for text in told if text is not None)


def text_of(line: Line, width: int = 200) -> str | None:
    """One story line as a line of the trace (``None``: the trace does not tell it).

    >>> text_of(Line("result", "support", text="refunded  $79", tool="refund"))
    '    -> refund returned: refunded $79'
    """
    indent, who, kind = "    " * len(line.path), line.agent, line.kind
    short = _short(line.text, width)
    match kind:
        case "asked":
            return f'{indent}{f"{who} was asked" if indent else "you asked"}: "{short}"'
        case "resumed":
            return f"{indent}  ({who} resumes)" if indent else None
        case "thought":
            return f"{indent}  {who} thought: {short}"
        case "call":
            return f"{indent}  {who} calls: {line.tool}({short})"
        case "answer" | "finished":
            return None if line.echo else f"{indent}  {f'{who} ' if indent else ''}final answer: {short}"
        case "result":
            return f"{indent}    -> {line.tool} {'failed' if line.error else 'returned'}: {short}"
        case "approval":
            return f"{indent}    ?? {line.tool} waits for a human decision"
        case "question":
            return f'{indent}    ?? {line.tool} asks a person: "{short}"'
        case "decided":
            return f"{indent}    !! {line.by or 'a human'} said {line.value} to {line.call_id}"
        case "handed-off":
            return f"{indent}  {who} hands off to {line.value}"
        case "child-stopped":
            return None if line.echo else f"{indent}    -> {line.tool} stopped before it finished ({line.value})"
        case "compacted":
            return f"{indent}  (older notes were summarised)"
        case "noted":
            return f"{indent}    !! the model was told: {short}"
        case "paused":
            return f"{indent}  (paused: {line.value})"
        case "failed":
            return f"{indent}  (failed: {short})"
        case "cancelled":
            return f"{indent}  (cancelled)"
        case "limit-reached":
            return f"{indent}  (stopped: {line.text})"
        case _:
            assert_never(kind)
