"""One story of a run: every event kind is told, in each face (the trace, the CLI, the inbox).

The events are built from the ``Event`` union itself, so a new kind that no face
tells fails here (and ``mypy --strict`` fails on the story's ``match``).
"""

from __future__ import annotations

import re
import typing
from dataclasses import fields
from io import StringIO
from pathlib import Path
from typing import Any, Literal

import pytest

from tether import Action, Agent, Decision, RunState, tool
from tether.cli._render import PlainRenderer
from tether.events import EVENT_TYPES, ChildEvent, ChildStopped, Event, Finished, Kind, ModelReplied, Paused
from tether.messages import Message, ToolCall, Usage
from tether.serve._html import story as inbox_story
from tether.testing import ScriptedModel
from tether.trace import render, story

ROOT = Path(__file__).resolve().parent.parent
SILENT = {"token": "streamed text is told whole by its reply", "tool-started": "a call is told when it is made"}
CALL = ToolCall.of("refund", {"order": "A1"}, id="c1")
SAMPLES: dict[Any, Any] = {
    str: "x",
    bool: False,
    float: 1.0,
    int: 1,
    dict[str, str]: {},
    tuple[str, ...]: ("c1",),
    tuple[Message, ...]: (Message.user("the task"),),
    Message: Message.tool_result("c1", "refunded", name="refund"),
    ToolCall: CALL,
    Usage: Usage(),
    Decision: Decision("r1", "c1", "approve", "0" * 32, 1, by="ana"),
    RunState: RunState("r1/c1", (), status="paused", agent="billing"),
    Event: ModelReplied(Message.assistant("", (CALL,))),
}


def sample(cls: type[Event]) -> Event:
    """An event of kind ``cls`` with every field filled (``KeyError``: teach SAMPLES the new field's type)."""
    hints = typing.get_type_hints(cls)
    values = {}
    for f in fields(cls):
        hint = hints[f.name]
        if type(None) in typing.get_args(hint):  # an optional field: a value of its type
            [hint] = [h for h in typing.get_args(hint) if h is not type(None)]
        if typing.get_origin(hint) is Literal:  # a closed set: its first value
            values[f.name] = typing.get_args(hint)[0]
        elif f.name != "at":
            values[f.name] = SAMPLES[hint]
    return cls(**values)


EVERY_KIND = [sample(cls) for cls in EVENT_TYPES.values()]
TOLD = [ev for ev in EVERY_KIND if ev.kind not in SILENT]


def cli(events: list[Event], *, name: str = "support") -> str:
    out = StringIO()
    renderer = PlainRenderer(out, name=name)
    renderer.start()
    for ev in events:
        renderer.event(ev)
    return out.getvalue()


def test_every_kind_of_the_event_union_is_built_here() -> None:
    assert sorted(ev.kind for ev in EVERY_KIND) == sorted(typing.get_args(Kind))
    assert set(SILENT) <= set(EVENT_TYPES)


@pytest.mark.parametrize("ev", TOLD, ids=lambda ev: ev.kind)
def test_each_face_tells_every_kind_at_the_root_and_in_a_child_run(ev: Event) -> None:
    nested = ChildEvent("c1", "billing", ev)
    for events in ([ev], [nested]):
        assert story(events), ev.kind
        assert render(events).strip(), ev.kind
        assert cli(events).strip(), ev.kind
        assert "<li " in inbox_story(events, "support"), ev.kind
    assert all(line.path[:1] == ("c1",) for line in story([nested]))


@pytest.mark.parametrize("ev", [ev for ev in EVERY_KIND if ev.kind in SILENT], ids=lambda ev: ev.kind)
def test_the_silent_kinds_are_told_by_no_face(ev: Event) -> None:
    assert story([ev]) == [] and render([ev]) == "" and cli([ev]) == ""
    assert "<li" not in inbox_story([ev], "support")


def test_after_a_handoff_the_calls_are_the_new_agents_in_every_face() -> None:
    @tool(approval=True)
    def issue_refund(amount: int) -> str:
        """Refund (a person approves)."""
        return f"refunded ${amount}"

    billing = Agent(ScriptedModel([Action("issue_refund", {"amount": 79})]), [issue_refund], name="billing")
    triage = Agent(ScriptedModel([Action("transfer_to_billing")]), name="triage", handoffs=[billing])
    events = list(triage.run_sync("refund please").events)
    assert "  triage hands off to billing\n  billing calls: issue_refund" in render(events, name="triage")
    assert "  triage hands off to billing\n  billing calls: issue_refund" in cli(events, name="triage")
    shown = inbox_story(events, "triage")
    assert "⇢ triage hands off</b> to billing" in shown and "<b>billing calls</b> <code>issue_refund(" in shown
    assert "triage calls</b> <code>issue_refund" not in shown


def test_an_ending_already_told_is_an_echo_that_the_trace_skips() -> None:
    reply = ModelReplied(Message.assistant("done"))
    lines = story([reply, Finished("done")])
    assert [(line.kind, line.echo) for line in lines] == [("answer", False), ("finished", True)]
    assert render([reply, Finished("done")]) == "  final answer: done"
    assert cli([reply, Finished("done")]) == "  final answer: done\n"  # the CLI prints the answer when it ends
    child_pause = ChildEvent("c1", "billing", Paused("approval", ("c2",), RunState("r1/c1", ())))
    stopped = ChildStopped("c1", RunState("r1/c1", (), agent="billing"))
    assert [line.echo for line in story([child_pause, stopped])] == [False, True]
    assert render([stopped]) == "    -> billing stopped before it finished (paused)"  # from the store: no child events


# -- the README's event table ------------------------------------------------------------------


def event_tables() -> list[set[str]]:
    """The kinds in each ``| event | when |`` table of the README and the docs."""
    tables = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for table in re.findall(r"^\| event \| when \|\n\|[-| ]+\|\n((?:\|.*\n)+)", page.read_text(), flags=re.M):
            cells = [row.split("|")[1] for row in table.splitlines()]
            kinds = [kind for cell in cells for kind in re.findall(r"`([a-z-]+)`", cell)]
            assert len(kinds) == len(set(kinds)), f"{page.name}: a kind listed twice: {kinds}"
            tables.append(set(kinds))
    return tables


def test_the_event_table_lists_every_kind_and_nothing_else() -> None:
    tables = event_tables()
    assert tables, "no `| event | when |` table in the README or the docs"
    for kinds in tables:
        assert kinds == set(EVENT_TYPES), f"missing {set(EVENT_TYPES) - kinds}, unknown {kinds - set(EVENT_TYPES)}"
