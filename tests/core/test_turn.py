"""turn.plan: what happens to one open call, decided without side effects."""

from __future__ import annotations

from typing import Any

import pytest

from tether import Decision, PendingCall, StateError, ToolCall, tool
from tether._loop.turn import Execute, Note, Wait, plan
from tether.state import args_hash


@tool(effect="none")
def add(a: int, b: int = 0) -> int:
    """Add two numbers."""
    return a + b


@tool(effect="once")
def send(to: str) -> str:
    """Send a message."""
    return f"sent to {to}"


@tool(effect="idempotent")
def put(key: str) -> str:
    """Store a key."""
    return key


TOOLS = {t.name: t for t in (add, send, put)}


def never(tool: Any, args: dict[str, Any]) -> bool:
    return False


def always(tool: Any, args: dict[str, Any]) -> bool:
    return True


def open_call(name: str, arguments: str, status: str = "proposed", attempts: int = 0) -> PendingCall:
    return PendingCall(ToolCall("c1", name, arguments), status, attempts)  # type: ignore[arg-type]


def decided(verdict: str, p: PendingCall, **kw: Any) -> Decision:
    return Decision("r1", p.call.id, verdict, args_hash(p.call.arguments), 1, **kw)  # type: ignore[arg-type]


def test_a_free_call_executes_with_validated_coerced_arguments_and_defaults() -> None:
    step = plan(open_call("add", '{"a": "2"}'), TOOLS, None, never)
    assert isinstance(step, Execute)
    assert step.args == {"a": 2, "b": 0} and step.attempt == 1 and step.tool is add


def test_an_unknown_tool_is_a_note_that_lists_the_tools() -> None:
    step = plan(open_call("mul", "{}"), TOOLS, None, never)
    assert isinstance(step, Note) and step.event.error == "unknown-tool"
    assert "available tools: add, put, send" in step.event.result.content
    assert step.event.result.is_error and step.event.call_id == "c1"


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]", '"text"'])
def test_arguments_that_are_not_a_json_object_are_a_note_with_the_schema(arguments: str) -> None:
    step = plan(open_call("add", arguments), TOOLS, None, never)
    assert isinstance(step, Note) and step.event.error == "bad-json"
    assert '"required": ["a"]' in step.event.result.content


def test_arguments_that_fail_validation_are_a_note_naming_the_field() -> None:
    step = plan(open_call("add", '{"a": "two"}'), TOOLS, None, never)
    assert isinstance(step, Note) and step.event.error == "invalid-arguments"
    assert "field 'a'" in step.event.result.content


def test_a_gated_call_without_a_decision_waits_for_approval() -> None:
    step = plan(open_call("send", '{"to": "ann"}'), TOOLS, None, always)
    assert step == Wait(ToolCall("c1", "send", '{"to": "ann"}'), "approval")


def test_a_call_already_asked_about_stays_gated_whatever_the_gate_says() -> None:
    step = plan(open_call("send", '{"to": "ann"}', "awaiting-approval"), TOOLS, None, never)
    assert isinstance(step, Wait) and step.reason == "approval"


def test_a_denial_is_a_note_carrying_the_humans_message() -> None:
    p = open_call("send", '{"to": "ann"}', "awaiting-approval")
    step = plan(p, TOOLS, decided("deny", p, message="not today"), always)
    assert isinstance(step, Note) and step.event.error == "denied"
    assert step.event.result.content == "a human denied this call: not today"


def test_an_approval_executes_the_call_as_shown() -> None:
    p = open_call("send", '{"to": "ann"}', "awaiting-approval")
    step = plan(p, TOOLS, decided("approve", p), always)
    assert isinstance(step, Execute) and step.call == p.call and step.prefix == ""


def test_an_approval_with_edited_arguments_records_them_on_the_call() -> None:
    p = open_call("send", '{"to": "ann"}', "awaiting-approval")
    step = plan(p, TOOLS, decided("approve", p, args={"to": "bob"}), always)
    assert isinstance(step, Execute)
    assert step.call == ToolCall("c1", "send", '{"to": "bob"}') and step.args == {"to": "bob"}
    assert step.prefix == '(a human edited the arguments to {"to": "bob"})\n'


def test_edited_arguments_that_fail_validation_are_refused() -> None:
    p = open_call("add", '{"a": 1}', "awaiting-approval")
    with pytest.raises(StateError, match="edited arguments for call 'c1' are invalid"):
        plan(p, TOOLS, decided("approve", p, args={"a": "x"}), always)


@pytest.mark.parametrize("name", ["add", "put"])
def test_an_interrupted_repeatable_call_runs_again_as_the_next_attempt(name: str) -> None:
    args = '{"a": 1}' if name == "add" else '{"key": "k"}'
    step = plan(open_call(name, args, "started", attempts=1), TOOLS, None, never)
    assert isinstance(step, Execute) and step.attempt == 2


def test_an_interrupted_once_call_waits_for_a_human_even_when_approved_before() -> None:
    p = open_call("send", '{"to": "ann"}', "started", attempts=1)
    assert plan(p, TOOLS, None, never) == Wait(p.call, "outcome-unknown")
    assert plan(p, TOOLS, decided("approve", p), always) == Wait(p.call, "outcome-unknown")


def test_an_interrupted_once_call_is_retried_or_skipped_as_decided() -> None:
    p = open_call("send", '{"to": "ann"}', "started", attempts=1)
    retried = plan(p, TOOLS, decided("retry", p), never)
    assert isinstance(retried, Execute) and retried.attempt == 2
    skipped = plan(p, TOOLS, decided("skip", p, message="sent by hand"), never)
    assert isinstance(skipped, Note) and skipped.event.error == "skipped"
    assert skipped.event.result.content.endswith("a human chose not to run it again: sent by hand")


def test_the_gate_sees_the_validated_arguments_the_tool_would_receive() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    def gate(tool: Any, args: dict[str, Any]) -> bool:
        seen.append((tool.name, args))
        return False

    plan(open_call("add", '{"a": "5"}'), TOOLS, None, gate)
    assert seen == [("add", {"a": 5, "b": 0})]  # coerced, defaults filled


def test_a_gate_that_raises_makes_the_call_wait_for_a_human_with_the_reason() -> None:
    def gate(tool: Any, args: dict[str, Any]) -> bool:
        raise KeyError("amount")

    step = plan(open_call("add", '{"a": 1}'), TOOLS, None, gate)
    assert isinstance(step, Wait) and step.reason == "approval"
    assert step.note == "the approval gate of 'add' raised KeyError: 'amount'; a human must decide"


def test_duplicate_keys_in_arguments_are_a_note_not_a_guess() -> None:
    step = plan(open_call("send", '{"to": "ann", "to": "eve"}'), TOOLS, None, never)
    assert isinstance(step, Note) and step.event.error == "bad-json"
    assert "duplicate key 'to'" in step.event.result.content


def test_a_verdict_the_loop_does_not_know_raises_instead_of_denying() -> None:
    p = open_call("send", '{"to": "ann"}', "awaiting-approval")
    with pytest.raises(StateError, match="unknown verdict 'shrug'"):
        plan(p, TOOLS, decided("shrug", p), always)


def test_a_verdict_that_does_not_fit_what_the_call_waits_for_keeps_it_waiting() -> None:
    asked = open_call("send", '{"to": "ann"}', "awaiting-approval")
    interrupted = open_call("send", '{"to": "ann"}', "started", attempts=1)
    assert plan(asked, TOOLS, decided("retry", asked), always) == Wait(asked.call, "approval")  # not a denial
    assert plan(interrupted, TOOLS, decided("approve", interrupted), never) == Wait(interrupted.call, "outcome-unknown")
