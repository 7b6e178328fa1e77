"""Each grader passes what it should and fails what it should, with a reason a person can read."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether import Context, Message, UserError
from tether.evals import Call, ExpectedCall, Grade, Outcome
from tether.evals import graders as g
from tether.testing import ScriptedModel


def outcome(output: str | None = "", calls: tuple[Call, ...] = (), **kw: object) -> Outcome:
    return Outcome("run", str(kw.pop("status", "finished")), output, calls, **kw)  # type: ignore[arg-type]


async def grade(grader: g.FunctionGrader, o: Outcome) -> Grade:
    return await grader.grade(o)


async def test_exact_ignores_surrounding_space_and_case_unless_asked() -> None:
    assert (await grade(g.exact("Paris"), outcome(" paris\n"))).passed
    assert not (await grade(g.exact("Paris", case_sensitive=True), outcome("paris"))).passed
    failed = await grade(g.exact("Paris"), outcome("Lyon"))
    assert not failed.passed and "expected 'Paris', got 'Lyon'" in failed.reason


async def test_contains_needs_every_needle_or_any_of_them() -> None:
    assert (await grade(g.contains("79", "refund"), outcome("I refunded $79"))).passed
    partial = await grade(g.contains(["79", "card"]), outcome("I refunded $79"))
    assert not partial.passed and partial.score == 0.5 and "card" in partial.reason
    assert (await grade(g.contains("card", "79", any_of=True), outcome("$79"))).passed


async def test_excludes_fails_on_a_forbidden_claim() -> None:
    assert (await grade(g.excludes("I refunded"), outcome("Sorry, the refund was denied."))).passed
    assert not (await grade(g.excludes("i refunded"), outcome("I refunded $79."))).passed


async def test_json_match_finds_json_in_fences_and_compares_type_tolerantly() -> None:
    text = 'Here you go:\n```json\n{"amount": "79", "ok": "true", "extra": 1}\n```'
    assert (await grade(g.json_match({"amount": 79, "ok": True}), outcome(text))).passed
    assert not (await grade(g.json_match({"amount": 79}, subset=False), outcome(text))).passed
    assert (await grade(g.json_match([1, 2]), outcome("the list is [1, 2]"))).passed
    missing = await grade(g.json_match({"a": 1}), outcome("no json here"))
    assert not missing.passed and "no JSON" in missing.reason


def test_same_is_type_tolerant_but_not_sloppy() -> None:
    assert g.same(79, "79") and g.same(79, 79.0) and g.same("$79", 79)
    assert g.same(True, "true") and g.same("Paris", " paris ")
    assert not g.same(79, "80") and not g.same(True, "maybe") and not g.same(None, "")
    assert g.same({"a": [1, "2"]}, {"a": ["1", 2], "b": 0})
    assert not g.same({"a": 1}, {"a": 1, "b": 0}, subset=False)
    assert not g.same([1], [1, 2])


WEATHER = (
    Call("get_weather", {"city": "Paris"}, 0),
    Call("get_weather", {"city": "Tokyo", "unit": "c"}, 0),
    Call("send_email", {"to": "boss@example.com"}, 1),
)


async def test_tool_calls_in_any_order_by_name_and_listed_arguments() -> None:
    want = [ExpectedCall("send_email"), ExpectedCall("get_weather", {"city": "tokyo"})]
    assert (await grade(g.tool_calls(want), outcome(calls=WEATHER))).passed
    wrong = await grade(g.tool_calls([ExpectedCall("get_weather", {"city": "Rome"})]), outcome(calls=WEATHER))
    assert not wrong.passed and "missing" in wrong.reason and "Rome" in wrong.reason


async def test_tool_calls_ordered_and_exact() -> None:
    ordered = [ExpectedCall("get_weather"), ExpectedCall("send_email")]
    assert (await grade(g.tool_calls(ordered, order="ordered"), outcome(calls=WEATHER))).passed
    backwards = list(reversed(ordered))
    assert not (await grade(g.tool_calls(backwards, order="ordered"), outcome(calls=WEATHER))).passed
    too_many = await grade(g.tool_calls(ordered, order="exact"), outcome(calls=WEATHER))
    assert not too_many.passed and too_many.score == 2 / 3
    assert too_many.reason.startswith("expected exactly 2 call(s), made 3: get_weather(")
    every = [ExpectedCall("get_weather"), ExpectedCall("get_weather"), ExpectedCall("send_email")]
    assert (await grade(g.tool_calls(every, order="exact"), outcome(calls=WEATHER))).passed


async def test_tool_calls_same_reply_needs_them_together() -> None:
    two_cities = [ExpectedCall("get_weather", {"city": "Paris"}), ExpectedCall("get_weather", {"city": "Tokyo"})]
    assert (await grade(g.tool_calls(two_cities, same_reply=True), outcome(calls=WEATHER))).passed
    split = (Call("get_weather", {"city": "Paris"}, 0), Call("get_weather", {"city": "Tokyo"}, 1))
    apart = await grade(g.tool_calls(two_cities, same_reply=True), outcome(calls=split))
    assert not apart.passed and apart.score == 0.5 and "in one reply" in apart.reason


async def test_no_expected_calls_means_no_tool_at_all() -> None:
    assert (await grade(g.tool_calls([]), outcome("1945"))).passed
    called = await grade(g.tool_calls([]), outcome("1945", calls=WEATHER[:1]))
    assert not called.passed and "expected no tool call" in called.reason


async def test_status_is() -> None:
    assert (await grade(g.status_is("paused"), outcome(None, status="paused"))).passed
    assert not (await grade(g.status_is("finished"), outcome(None, status="paused"))).passed


async def test_file_contains_reads_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "hello.txt").write_text("Hello, world!\n")
    assert (await grade(g.file_contains("hello.txt", "Hello"), outcome(workdir=tmp_path))).passed
    assert not (await grade(g.file_contains("hello.txt", "Bye"), outcome(workdir=tmp_path))).passed
    assert not (await grade(g.file_contains("nope.txt"), outcome(workdir=tmp_path))).passed
    assert (await grade(g.file_contains("nope.txt", exists=False), outcome(workdir=tmp_path))).passed
    assert not (await grade(g.file_contains("hello.txt", exists=False), outcome(workdir=tmp_path))).passed
    assert not (await grade(g.file_contains("hello.txt"), outcome())).passed


async def test_function_grader_takes_bool_score_tuple_grade_or_async() -> None:
    assert (await g.function(lambda o: True).grade(outcome())).passed
    score = await g.function(lambda o: 0.25, name="quarter").grade(outcome())
    assert not score.passed and score.score == 0.25 and score.grader == "quarter"
    told = await g.function(lambda o: (False, "too long")).grade(outcome())
    assert told.reason == "too long"

    async def slow(o: Outcome) -> Grade:
        return Grade(o.output == "ok", reason="checked")

    assert (await g.function(slow).grade(outcome("ok"))).passed
    with pytest.raises(UserError, match="returned 'yes'"):
        await g.function(lambda o: "yes").grade(outcome())


async def test_judge_asks_any_policy_with_the_task_answer_and_criteria() -> None:
    model = ScriptedModel(["PASS - it names the amount", "FAIL: no amount", "I am not sure", '{"pass": true}'])
    judge = g.judge(model, "the answer names the refunded amount")
    task = Outcome("r", "finished", "I refunded $79.", context=Context([Message.user("Refund A1?")]))
    first = await judge.grade(task)
    assert first.passed and "names the amount" in first.reason
    prompt = model.requests[0].last().content
    assert "Refund A1?" in prompt and "I refunded $79." in prompt and "refunded amount" in prompt
    assert not (await judge.grade(task)).passed
    unsure = await judge.grade(task)
    assert not unsure.passed and "neither PASS nor FAIL" in unsure.reason
    assert (await judge.grade(task)).passed
    model.assert_consumed()
