"""The constrained tool-calling protocol: schema, prompt, parsing, streaming and the guard.

All pure functions, tested without a model; ``ConstrainedOpenAI`` is tested
against the scripted fake provider server on 127.0.0.1.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from providers.fakeserver import FakeServer, Reply
from providers.fakeserver import turn as reply
from support import add
from tether import Agent, Context, Message, ToolCall, Usage, UserError, tool
from tether.exceptions import ModelRequestsBlocked, ProviderError
from tether.providers._tool_choice import DECIDE, DECIDE_AGAIN, DECIDE_NEXT, decision_request
from tether.providers.constrained import (
    DENIED_NUDGE,
    ERROR_NUDGE,
    FINAL_ONLY,
    MAX_CALLS_PER_REPLY,
    MAX_RESULT_CHARS,
    NUDGE,
    AnswerStream,
    Completion,
    ConstrainedOpenAI,
    calls_this_task,
    choice_schema,
    drive,
    offered,
    parse_reply,
    render,
    repeats_a_call,
    request,
    system_prompt,
    tool_line,
    turn,
)
from tether.providers.local import LocalModel


@tool(effect="none")
def shout(text: str) -> str:
    """Make text loud."""
    return text.upper()


def call(name: str, args: dict[str, Any]) -> str:
    return json.dumps({"name": name, "arguments": args})


def final(text: str) -> str:
    return call("final_answer", {"text": text})


# -- schema ------------------------------------------------------------------


def _calls(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return schema["anyOf"][0]["items"]["anyOf"]


def test_the_schema_is_a_list_of_calls_of_the_tools_or_the_final_answer() -> None:
    schema = choice_schema([add, shout])
    assert offered(schema) == ["add", "shout", "final_answer"]
    listed, answer = schema["anyOf"]
    assert listed["type"] == "array" and listed["minItems"] == 1 and listed["maxItems"] == MAX_CALLS_PER_REPLY
    first = _calls(schema)[0]
    assert first["required"] == ["name", "arguments"]
    assert first["additionalProperties"] is False
    assert first["properties"]["name"] == {"const": "add"}
    assert first["properties"]["arguments"] == add.parameters
    assert answer["properties"]["name"] == {"const": "final_answer"}
    assert answer["properties"]["arguments"] == {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": False,
    }


def test_final_only_leaves_just_final_answer() -> None:
    schema = choice_schema([add, shout], final_only=True)
    assert offered(schema) == ["final_answer"]


def test_hand_written_schemas_get_no_extra_properties() -> None:
    from tether import Tool

    loose = Tool("loose", "A tool.", {"type": "object", "properties": {"x": {"type": "string"}}}, fn=lambda x: x)
    args = _calls(choice_schema([loose]))[0]["properties"]["arguments"]
    assert args["additionalProperties"] is False
    assert "additionalProperties" not in loose.parameters  # the tool itself is untouched


class Point(pydantic.BaseModel):
    x: int
    y: int


def test_nested_model_definitions_move_to_the_root_and_refs_follow() -> None:
    @tool(effect="none")
    def plot(where: Point) -> str:
        """Plot a point."""
        return "ok"

    schema = choice_schema([plot])
    assert "plot__Point" in schema["$defs"]
    assert _calls(schema)[0]["properties"]["arguments"]["properties"]["where"] == {"$ref": "#/$defs/plot__Point"}
    assert "$defs" not in _calls(schema)[0]["properties"]["arguments"]


def test_a_tool_named_final_answer_is_refused() -> None:
    @tool(effect="none")
    def final_answer(text: str) -> str:
        """Clash."""
        return text

    with pytest.raises(UserError, match=r"'final_answer'.*reserves"):
        choice_schema([final_answer])


# -- prompt ------------------------------------------------------------------


def test_the_system_prompt_lists_one_line_per_tool_after_the_instructions() -> None:
    lines = system_prompt([add, shout], "Be brief.").splitlines()
    assert lines[0] == "Be brief."
    assert "- add(a: integer, b: integer): Add two integers. a: the first number; b: the second number." in lines
    assert "- shout(text: string): Make text loud." in lines
    assert any(line.startswith("2. To answer the user:") and "final_answer" in line for line in lines)


def test_the_prompt_shows_types_enums_defaults_and_which_arguments_are_optional() -> None:
    @tool(effect="none")
    def wait(seconds: int, unit: Literal["s", "ms"] = "s", note: str | None = None) -> str:
        """Wait a while.

        Args:
            seconds: how long.
            unit: the unit.
            note: why.
        """
        return "ok"

    assert tool_line(wait) == (
        'wait(seconds: integer, unit?: "s" | "ms" = "s", note?: string | null = null): Wait a while. '
        "seconds: how long; unit: the unit; note: why."
    )
    assert 'optional ones (marked "?")' in system_prompt([wait])


def test_the_prompt_shows_answering_without_a_tool_as_a_choice() -> None:
    prompt = system_prompt([shout])
    assert "Answer directly, without a tool, only when no tool is about the question" in prompt
    assert "never guess what a tool would tell you" in prompt


def _conversation() -> Context:
    return Context(
        [
            Message.system("Be brief."),
            Message.user("2+3?"),
            Message.assistant("", [ToolCall.of("add", {"a": 2, "b": 3}, id="c1")]),
            Message.tool_result("c1", "5", name="add"),
        ]
    )


def test_the_notebook_is_rendered_as_plain_chat() -> None:
    out = render(_conversation(), [add])
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert out[0]["content"].startswith("Be brief.\n")
    assert json.loads(out[2]["content"]) == [{"name": "add", "arguments": {"a": 2, "b": 3}}]
    assert out[3]["content"] == f"add returned: 5\n{NUDGE}"


def test_errors_and_several_results_share_one_user_turn() -> None:
    ctx = Context(
        [
            Message.user("go"),
            Message.assistant(
                "", [ToolCall.of("add", {"a": 1}, id="c1"), ToolCall.of("shout", {"text": "x"}, id="c2")]
            ),
            Message.tool_result("c1", "field 'b' missing", name="add", is_error=True),
            Message.tool_result("c2", "X", name="shout"),
        ]
    )
    out = render(ctx, [add, shout])
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert out[3]["content"] == f"add failed: field 'b' missing\n\nshout returned: X\n{ERROR_NUDGE}"


def test_a_denied_call_is_shown_as_not_done_with_no_invitation_to_retry() -> None:
    ctx = _conversation().add(
        Message.assistant("", [ToolCall.of("shout", {"text": "x"}, id="c2")]),
        Message.tool_result("c2", "a human denied this call: not now", name="shout", is_error=True),
    )
    text = render(ctx, [add, shout])[-1]["content"]
    assert text == f"shout was not run: a human denied this call: not now\n{DENIED_NUDGE}"
    assert "final_answer" not in text and "try again" not in text


def test_nudges_say_nothing_a_user_should_not_read() -> None:
    for nudge in (NUDGE, ERROR_NUDGE, DENIED_NUDGE):
        assert "final_answer" not in nudge and "call another tool" not in nudge


def test_long_results_are_cut_and_say_so() -> None:
    ctx = Context([Message.user("read"), Message.assistant("", [ToolCall.of("shout", {}, id="c")])])
    ctx = ctx.add(Message.tool_result("c", "y" * (MAX_RESULT_CHARS + 50), name="shout"))
    text = render(ctx, [shout])[-1]["content"]
    assert f"[... cut: {MAX_RESULT_CHARS + 50:,} characters in all]" in text
    assert "y" * (MAX_RESULT_CHARS + 1) not in text


def test_an_iso_time_in_a_result_is_spelled_out_beside_it() -> None:
    """The 1.5B read 07:33:58+09:00 as "PM": the result now says which part of the day it is."""
    ctx = Context([Message.user("time in Tokyo?"), Message.assistant("", [ToolCall.of("shout", {}, id="c")])])
    ctx = ctx.add(Message.tool_result("c", '{"timezone": "Asia/Tokyo", "datetime": "2026-12-02T07:33:58+09:00"}'))
    text = render(ctx, [shout])[-1]["content"]
    said = "(2026-12-02T07:33:58+09:00 is Wednesday 2 December 2026, 7:33 in the morning (07:33:58), at UTC+09:00)"
    assert said in text.splitlines()
    late = Message.tool_result("c", "at 2026-12-02T19:05:00Z", name="shout")
    assert (
        "7:05 in the evening (19:05:00), at UTC)" in render(Context([*ctx.messages[:2], late]), [shout])[-1]["content"]
    )
    plain = Message.tool_result("c", "no time in this one", name="shout")
    assert " is " not in render(Context([*ctx.messages[:2], plain]), [shout])[-1]["content"]


def test_each_request_is_a_prefix_of_the_next() -> None:
    first = _conversation()
    later = first.add(
        Message.assistant("5"),
        Message.user("and 4+4?"),
        Message.assistant("", [ToolCall.of("add", {"a": 4, "b": 4}, id="c2")]),
        Message.tool_result("c2", "8", name="add"),
    )
    a, b = request(first, [add]), request(later, [add])
    assert b["messages"][: len(a["messages"])] == a["messages"]
    assert a["response_format"] == b["response_format"]
    assert json.loads(b["messages"][4]["content"]) == {"name": "final_answer", "arguments": {"text": "5"}}
    assert json.loads(b["messages"][6]["content"]) == [{"name": "add", "arguments": {"a": 4, "b": 4}}]


def test_without_tools_it_is_a_plain_chat_request() -> None:
    body = request(Context([Message.user("hi")]), [])
    assert body == {"messages": [{"role": "user", "content": "hi"}]}


# -- parsing -----------------------------------------------------------------


def test_a_tool_call_reply_becomes_one_tool_call() -> None:
    message = parse_reply('{\n  "name": "add",\n  "arguments": {"a": 1, "b": 2}\n}', call_id="c9")
    assert message.tool_calls == (ToolCall("c9", "add", '{"a": 1, "b": 2}'),)
    assert message.content == ""


def test_a_final_answer_reply_becomes_plain_text() -> None:
    message = parse_reply(final("It is 5."))
    assert message == Message.assistant("It is 5.")


def test_a_cut_off_tool_call_keeps_its_raw_arguments_for_the_loop_to_report() -> None:
    message = parse_reply('{"name": "add", "arguments": {"a": 1, "b"')
    assert message.tool_calls[0].name == "add"
    assert message.tool_calls[0].arguments == '{"a": 1, "b"'


def test_a_cut_off_answer_keeps_the_text_so_far() -> None:
    assert parse_reply('{"name": "final_answer", "arguments": {"text": "The ans').content == "The ans"


def calls(*pairs: tuple[str, dict[str, Any]]) -> str:
    return json.dumps([{"name": n, "arguments": a} for n, a in pairs], indent=2)


def test_a_list_reply_becomes_several_tool_calls_in_order() -> None:
    message = parse_reply(calls(("add", {"a": 1, "b": 2}), ("shout", {"text": "hi"})), call_id="c1")
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        ("add", {"a": 1, "b": 2}),
        ("shout", {"text": "hi"}),
    ]
    assert message.tool_calls[0].id == "c1" and message.tool_calls[1].id != "c1"


def test_a_cut_off_list_keeps_the_whole_calls_and_the_raw_arguments_of_the_cut_one() -> None:
    text = calls(("add", {"a": 1, "b": 2}), ("shout", {"text": "hello"}))
    message = parse_reply(text[: text.index("hello")])
    assert [c.name for c in message.tool_calls] == ["add", "shout"]
    assert json.loads(message.tool_calls[0].arguments) == {"a": 1, "b": 2}
    assert message.tool_calls[1].arguments.startswith('{\n      "text": "')


def test_a_streamed_list_of_calls_shows_nothing() -> None:
    stream = AnswerStream()
    raw = calls(("shout", {"text": "not for the user"}))
    assert "".join(stream.feed(raw[i : i + 4]) for i in range(0, len(raw), 4)) == ""


@pytest.mark.parametrize("text", ["Sure! 5", "[1, 2]", "[]", '{"arguments": {}}'])
def test_replies_that_are_no_call_at_all_are_provider_errors(text: str) -> None:
    with pytest.raises(ProviderError, match="reply is not"):
        parse_reply(text)


@given(st.text(), st.lists(st.integers(min_value=0, max_value=400), max_size=12), st.booleans())
def test_a_streamed_answer_comes_out_exactly_however_it_is_split(text: str, cuts: list[int], ascii: bool) -> None:
    raw = json.dumps({"name": "final_answer", "arguments": {"text": text}}, indent=2, ensure_ascii=ascii)
    stream = AnswerStream()
    points = sorted({min(c, len(raw)) for c in cuts})
    pieces = [raw[i:j] for i, j in zip([0, *points], [*points, len(raw)], strict=True)]
    assert "".join(stream.feed(p) for p in pieces) == text


def test_a_streamed_tool_call_shows_nothing() -> None:
    stream = AnswerStream()
    raw = call("shout", {"text": "not for the user"})
    assert [stream.feed(raw[i : i + 5]) for i in range(0, len(raw), 5)] == [""] * len(range(0, len(raw), 5))


# -- the guard and the turn ----------------------------------------------------


async def _run_turn(context: Context, tools: list[Any], replies: list[str], **options: Any) -> tuple[Message, list]:
    sent: list[dict[str, Any]] = []
    queue = list(replies)

    async def complete(body: dict[str, Any]) -> Completion:
        sent.append(body)
        return Completion(queue.pop(0), Usage(10, 3, 1))

    message = await drive(turn(context, tools, **options), complete)
    assert queue == [], "every scripted reply is used"
    return message, sent


def _names(body: dict[str, Any]) -> list[str]:
    return offered(body["response_format"]["json_schema"]["schema"])


async def test_one_request_per_decision_normally() -> None:
    message, sent = await _run_turn(Context([Message.user("2+3?")]), [add], [call("add", {"a": 2, "b": 3})])
    assert message.tool_calls[0].name == "add"
    assert message.usage == Usage(10, 3, 1)
    assert _names(sent[0]) == ["add", "final_answer"]


async def test_repeating_a_call_asks_again_for_the_final_answer_only() -> None:
    repeat = call("add", {"b": 3, "a": 2})  # same call, other key order
    message, sent = await _run_turn(_conversation(), [add], [repeat, final("5")])
    assert message == Message.assistant("5")
    assert message.usage == Usage(20, 6, 2)
    assert _names(sent[1]) == ["final_answer"]
    first, second = sent[0]["messages"], sent[1]["messages"]
    assert second[:-1] == first[:-1]
    assert second[-1]["content"] == first[-1]["content"] + "\n\n" + FINAL_ONLY


async def test_going_round_in_circles_counts_as_repeating() -> None:
    ctx = _conversation().add(
        Message.assistant("", [ToolCall.of("shout", {"text": "x"}, id="c2")]),
        Message.tool_result("c2", "X", name="shout"),
    )
    assert repeats_a_call(ctx, parse_reply(call("add", {"a": 2, "b": 3})))
    assert not repeats_a_call(ctx, parse_reply(call("add", {"a": 2, "b": 4})))
    assert not repeats_a_call(ctx.add(Message.user("again please")), parse_reply(call("add", {"a": 2, "b": 3})))


async def test_several_calls_in_one_reply_come_back_as_one_message() -> None:
    reply_text = calls(("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4}))
    message, sent = await _run_turn(Context([Message.user("1+2 and 3+4?")]), [add], [reply_text])
    assert [json.loads(c.arguments) for c in message.tool_calls] == [{"a": 1, "b": 2}, {"a": 3, "b": 4}]
    assert len(sent) == 1


async def test_repeated_calls_in_a_list_are_dropped_and_the_new_ones_kept() -> None:
    reply_text = calls(("add", {"a": 2, "b": 3}), ("add", {"a": 9, "b": 9}), ("add", {"a": 9, "b": 9}))
    message, sent = await _run_turn(_conversation(), [add], [reply_text])
    assert [json.loads(c.arguments) for c in message.tool_calls] == [{"a": 9, "b": 9}]
    assert len(sent) == 1


async def test_a_list_of_only_repeated_calls_asks_for_the_final_answer() -> None:
    message, sent = await _run_turn(_conversation(), [add], [calls(("add", {"a": 2, "b": 3})), final("5")])
    assert message == Message.assistant("5")
    assert _names(sent[1]) == ["final_answer"]


async def test_calls_past_the_budget_are_dropped() -> None:
    many = calls(*[("add", {"a": i, "b": i}) for i in range(5)])
    message, _ = await _run_turn(_conversation(), [add], [many], max_tool_calls=3)
    assert len(message.tool_calls) == 2  # one call made already, two left


async def test_answering_without_a_tool_is_offered_and_taken_in_one_request() -> None:
    message, sent = await _run_turn(Context([Message.user("Who wrote Hamlet?")]), [add], [final("Shakespeare.")])
    assert message == Message.assistant("Shakespeare.") and not message.tool_calls
    assert len(sent) == 1 and _names(sent[0]) == ["add", "final_answer"]


async def test_deciding_first_that_no_tool_fits_allows_only_the_answer() -> None:
    ctx = Context([Message.user("Who wrote Hamlet?")])
    message, sent = await _run_turn(ctx, [add], ['{"tool": "none"}', final("Shakespeare.")], decide_first=True)
    assert message == Message.assistant("Shakespeare.")
    assert message.usage == Usage(20, 6, 2)
    decision = sent[0]["response_format"]["json_schema"]["schema"]["properties"]["tool"]
    assert decision == {"enum": ["add", "none"]}
    assert sent[0]["messages"][-1]["content"].endswith(DECIDE)
    assert _names(sent[1]) == ["final_answer"]
    assert sent[1]["messages"][:-1] == sent[0]["messages"][:-1]  # the same prefix: the prompt cache hits


async def test_deciding_first_that_a_tool_fits_allows_only_calls() -> None:
    ctx = Context([Message.user("1+2 and 3+4?")])
    both = calls(("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4}))
    message, sent = await _run_turn(ctx, [add, shout], ['{"tool": "add"}', both], decide_first=True)
    assert len(message.tool_calls) == 2
    assert _names(sent[1]) == ["add", "shout"]


async def test_once_tools_answered_the_decision_asks_what_is_left_naming_the_task_and_the_calls() -> None:
    ctx = _conversation()
    message, sent = await _run_turn(ctx, [add, shout], ['{"tool": "none"}', final("5")], decide_first=True)
    asked = sent[0]["messages"][-1]["content"]
    assert asked.endswith(DECIDE_NEXT.format(task="2+3?", done="add")) and DECIDE not in asked
    assert message == Message.assistant("5") and _names(sent[1]) == ["final_answer"]


async def test_without_what_is_left_the_first_question_is_asked_again_as_the_0_5b_needs() -> None:
    _, sent = await _run_turn(
        _conversation(), [add], ['{"tool": "none"}', final("5")], decide_first=True, what_is_left=False
    )
    assert sent[0]["messages"][-1]["content"].endswith(DECIDE_AGAIN)
    assert LocalModel("qwen2.5-coder-0.5b").what_is_left is False and LocalModel().what_is_left is True


async def test_the_next_step_is_a_call_when_the_model_names_a_tool_for_what_is_left() -> None:
    ctx = _conversation()
    message, sent = await _run_turn(
        ctx, [add, shout], ['{"tool": "shout"}', calls(("shout", {"text": "five"}))], decide_first=True
    )
    assert [c.name for c in message.tool_calls] == ["shout"]
    assert _names(sent[1]) == ["add", "shout"]  # calls only


def test_the_next_step_question_quotes_a_long_task_cut_and_on_one_line() -> None:
    long_task = "word\n" * 400
    ctx = Context([Message.user(long_task), Message.assistant("", [ToolCall.of("add", {"a": 1, "b": 1}, id="c1")]),
                   Message.tool_result("c1", "2", name="add")])  # fmt: skip
    asked = decision_request(ctx, [add])["messages"][-1]["content"]
    quoted = asked.split('The user asked: "', 1)[1].split('" Done so far:', 1)[0]
    assert "\n" not in quoted and quoted.endswith("...") and len(quoted) == 603


async def test_no_decision_is_asked_once_only_the_answer_is_allowed() -> None:
    _, sent = await _run_turn(_conversation(), [add], [final("5")], max_tool_calls=1, decide_first=True)
    assert len(sent) == 1 and _names(sent[0]) == ["final_answer"]


async def test_a_used_up_budget_allows_only_the_final_answer() -> None:
    ctx = _conversation()
    assert calls_this_task(ctx) == 1
    message, sent = await _run_turn(ctx, [add], [final("5")], max_tool_calls=1)
    assert message.content == "5"
    assert len(sent) == 1 and _names(sent[0]) == ["final_answer"]


async def test_a_new_user_message_starts_a_new_budget() -> None:
    ctx = _conversation().add(Message.assistant("5"), Message.user("and 1+1?"))
    assert calls_this_task(ctx) == 0
    _, sent = await _run_turn(ctx, [add], [call("add", {"a": 1, "b": 1})], max_tool_calls=1)
    assert _names(sent[0]) == ["add", "final_answer"]


# -- over HTTP: ConstrainedOpenAI ----------------------------------------------


@pytest.fixture
def server() -> Any:
    with FakeServer() as fake:
        yield fake


async def _no_sleep(delay: float) -> None:
    return None


async def test_an_agent_run_over_http_sends_json_schema_instead_of_tools(server: FakeServer) -> None:
    server.push(reply(call("add", {"a": 2, "b": 3})), reply(final("2 + 3 = 5")))
    model = ConstrainedOpenAI("qwen", base_url=server.openai_url, api_key="k", decide_first=False)
    result = await Agent(model, [add]).run("2+3?")
    await model.aclose()
    assert result.output == "2 + 3 = 5"
    assert [m.role for m in result.context] == ["user", "assistant", "tool", "assistant"]
    first = server.requests[0]
    body = first.json()
    assert first.headers["authorization"] == "Bearer k"
    assert "tools" not in body
    assert body["model"] == "qwen" and body["temperature"] == 0.0 and body["max_tokens"] == 512
    assert body["response_format"]["type"] == "json_schema"
    assert list(body)[-1] == "messages"
    assert server.requests[1].body.startswith(first.body[: first.body.index(b'"messages"')])
    server.assert_consumed()


async def test_streaming_over_http_shows_only_the_answer_text(server: FakeServer) -> None:
    server.push(reply(call("add", {"a": 2, "b": 3}), chunk=3), reply(final("It is 5."), chunk=3))
    model = ConstrainedOpenAI("qwen", base_url=server.openai_url, stream=True, decide_first=False)
    tokens = [ev.text async for ev in Agent(model, [add]).stream("2+3?") if ev.kind == "token"]
    await model.aclose()
    assert "".join(tokens) == "It is 5."
    assert len(tokens) > 1
    assert all(r.streaming for r in server.requests)


async def test_over_http_the_model_first_decides_whether_a_tool_fits(server: FakeServer) -> None:
    server.push(reply('{"tool": "none"}'), reply(final("Shakespeare wrote it.")))
    model = ConstrainedOpenAI("qwen", base_url=server.openai_url)
    result = await Agent(model, [add]).run("Who wrote Hamlet?")
    await model.aclose()
    assert result.output == "Shakespeare wrote it." and result.usage.requests == 2
    first, second = (r.json() for r in server.requests)
    assert first["response_format"]["json_schema"]["name"] == "decision"
    assert offered(second["response_format"]["json_schema"]["schema"]) == ["final_answer"]
    server.assert_consumed()


async def test_transient_server_errors_are_retried(server: FakeServer) -> None:
    server.push(Reply.error(503), reply(final("ok")))
    model = ConstrainedOpenAI(base_url=server.openai_url, sleep=_no_sleep, decide_first=False)
    message = await model.decide(Context([Message.user("hi")]), [add])
    await model.aclose()
    assert message.content == "ok"
    assert len(server.requests) == 2
    assert "model" not in server.requests[1].json()


async def test_a_bad_request_is_a_provider_error(server: FakeServer) -> None:
    server.push(Reply.error(400, "json_schema not supported"))
    model = ConstrainedOpenAI(base_url=server.openai_url, decide_first=False)
    with pytest.raises(ProviderError, match="json_schema not supported") as err:
        await model.decide(Context([Message.user("hi")]), [add])
    await model.aclose()
    assert err.value.status_code == 400


async def test_no_key_is_taken_from_the_environment(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-local-servers")
    server.push(reply(final("ok")))
    model = ConstrainedOpenAI(base_url=server.openai_url, decide_first=False)
    await model.decide(Context([Message.user("hi")]), [add])
    await model.aclose()
    assert "authorization" not in server.requests[0].headers


async def test_real_network_requests_are_blocked_in_tests() -> None:
    model = ConstrainedOpenAI(base_url="https://models.example.com/v1")
    with pytest.raises(ModelRequestsBlocked):
        await model.decide(Context([Message.user("hi")]), [add])
