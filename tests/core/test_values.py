"""Messages, contexts and events are values: immutable, append-only, JSON round-trips."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether import Context, Decision, Message, PendingCall, RunState, ToolCall, Usage
from tether.events import EVENT_TYPES, from_dict, to_dict
from tether.journal import replay

text = st.text(max_size=40)
ids = st.text(alphabet="abcdefghij0123456789_", min_size=1, max_size=12)
tool_calls = st.builds(ToolCall, id=ids, name=st.from_regex(r"[a-z_]{1,10}", fullmatch=True), arguments=text)
usages = st.builds(Usage, st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 100))
messages = st.one_of(
    st.builds(Message.system, text),
    st.builds(Message.user, text),
    st.builds(
        lambda c, calls, u: Message("assistant", c, tuple(calls), usage=u),
        text,
        st.lists(tool_calls, max_size=3),
        st.none() | usages,
    ),
    st.builds(
        lambda i, c, n, e: Message.tool_result(i, c, name=n, is_error=e), ids, text, st.none() | text, st.booleans()
    ),
)


@given(messages)
def test_a_message_round_trips_through_json_exactly(m: Message) -> None:
    back = Message.from_dict(json.loads(json.dumps(m.to_dict())))
    assert back == m and back.usage == m.usage


@given(st.lists(messages, max_size=20), st.lists(st.integers(0, 30), max_size=10))
def test_context_is_append_only_whatever_branch_is_extended(msgs: list[Message], cuts: list[int]) -> None:
    # Build a tree of contexts: each step extends some earlier context.
    contexts = [Context()]
    expected = [()]
    for i, m in enumerate(msgs):
        base = cuts[i % len(cuts)] % len(contexts) if cuts else len(contexts) - 1
        contexts.append(contexts[base].add(m))
        expected.append((*expected[base], m))
    for ctx, exp in zip(contexts, expected, strict=True):
        assert ctx.messages == exp
        assert len(ctx) == len(exp)
        assert Context.from_list(json.loads(json.dumps(ctx.to_list()))) == ctx


def test_adding_to_the_tip_shares_storage_instead_of_copying() -> None:
    ctx = Context()
    for i in range(1000):
        ctx = ctx.add(Message.user(str(i)))
    bigger = ctx.add(Message.user("x"))
    assert bigger._items is ctx._items  # no copy of the 1,000 earlier notes
    branch = ctx.add(Message.user("y"))  # ctx is no longer the tip: one copy, then shared again
    assert branch._items is not ctx._items
    assert [m.content for m in (bigger.last(), branch.last())] == ["x", "y"]
    assert len(ctx) == 1000


def test_context_rejects_non_messages_and_supports_indexing() -> None:
    ctx = Context([Message.user("a"), Message.user("b")])
    with pytest.raises(TypeError, match="Message values"):
        ctx.add("not a message")  # type: ignore[arg-type]
    assert ctx[-1].content == "b" and ctx[0:1].messages == (Message.user("a"),)
    with pytest.raises(IndexError):
        ctx[2]


@pytest.mark.parametrize(
    "bad, error",
    [
        ({"role": "wizard", "content": ""}, "unknown message role"),
        ({"role": "user", "content": 5}, "'content' must be a string"),
        ({"role": "tool", "content": "x"}, "needs the tool_call_id"),
        (
            {"role": "user", "content": "x", "tool_calls": [{"id": "1", "name": "a", "arguments": "{}"}]},
            "only assistant",
        ),
        ([], "must be a JSON object"),
    ],
)
def test_malformed_messages_are_refused_with_a_clear_error(bad: object, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        Message.from_dict(bad)  # type: ignore[arg-type]


def _events_of_every_kind() -> list:
    from tether import events as ev

    call = ToolCall("c1", "add", '{"a": 1}')
    return [
        ev.RunStarted("r", (Message.system("s"), Message.user("u")), False, "fp"),
        ev.Token("he"),
        ev.ModelReplied(Message("assistant", "t", (call,), usage=Usage(3, 4, 1))),
        ev.ToolStarted(call, 2),
        ev.ToolFinished(Message.tool_result("c1", "2", name="add"), None),
        ev.ApprovalRequested(call, "abc"),
        ev.QuestionAsked(call, "abc", "Which size?"),
        ev.ApprovalDecided(Decision("r", "c1", "approve", "0" * 32, 5)),
        ev.ApprovalDecided(Decision("r", "c1", "answer", "0" * 32, 5, answer={"size": "L"})),
        ev.ChildStopped("c1", RunState("r/c1", (Message.user("task"),), (PendingCall(call),), parent_call="c1")),
        ev.ChildEvent("c1", "billing", ev.ChildEvent("c2", "ledger", ev.Token("hi"))),
        ev.HandedOff("billing", (Message.system("You handle money."),)),
        ev.Paused("approval", ("c1",), RunState("r", (Message.user("u"),), (PendingCall(call),), seq=5)),
        ev.Compacted((Message.user("summary"),)),
        ev.Noted(Message("user", "call final_result", name="final_result", is_error=True)),
        ev.Finished("done", Usage(1, 2, 3)),
        ev.Failed("boom", "ProviderError"),
        ev.Cancelled("stop", final=True),
        ev.LimitReached("steps", 20),
    ]


def test_every_event_kind_round_trips_through_json() -> None:
    events = _events_of_every_kind()
    assert {e.kind for e in events} == set(EVENT_TYPES)
    for e in events:
        d = to_dict(e)
        assert next(iter(d)) == "kind"
        assert from_dict(json.loads(json.dumps(d))) == e


@pytest.mark.parametrize(
    "bad",
    [
        {"kind": "nope"},
        {"kind": "finished", "bogus": 1},
        "finished",
        {"kind": "model-replied", "message": {"role": "x"}},
    ],
)
def test_malformed_events_are_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        from_dict(bad)  # type: ignore[arg-type]


def test_replay_places_results_in_call_order_even_across_a_pause() -> None:
    from tether import events as ev

    a, b = ToolCall("a", "t"), ToolCall("b", "t")
    events = [
        ev.RunStarted("r", (Message.user("u"),)),
        ev.ModelReplied(Message.assistant("", [a, b])),
        ev.ToolFinished(Message.tool_result("b", "B")),
        ev.ToolFinished(Message.tool_result("a", "A")),
        ev.ModelReplied(Message.assistant("", [a, b])),
        ev.ToolFinished(Message.tool_result("b", "B2")),
        ev.Paused("approval", ("a",), {}),
        ev.RunStarted("r", (), True),
        ev.ToolFinished(Message.tool_result("a", "A2")),
        ev.ModelReplied(Message.assistant("end")),
    ]
    assert [m.content for m in replay(events)] == ["u", "", "A", "B", "", "B2", "A2", "end"]
