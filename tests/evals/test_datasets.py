"""The shipped task set: every case is solvable as written, and a brain that does nothing fails it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tether import Action, FunctionPolicy, UserError
from tether.evals import Case, evaluate, load_dataset, load_jsonl, reference_brain
from tether.evals.datasets import load, names
from tether.evals.datasets.brains import refund_desk_brain

NO_SANDBOX = [n for n in names() if n not in ("workspace", "tether-tasks")]


@pytest.mark.parametrize("name", NO_SANDBOX)
async def test_the_reference_replies_pass_every_case(name: str) -> None:
    report = await evaluate(load(name), brain=reference_brain)
    failed = {c.case_id: c.reasons for c in report.cases() if c.passes < c.trials}
    assert failed == {}


@pytest.mark.sandbox
async def test_the_workspace_cases_pass_with_their_reference_replies_in_real_folders() -> None:
    report = await evaluate(load("workspace"), brain=reference_brain)
    assert {c.case_id: c.reasons for c in report.cases() if c.passes < c.trials} == {}


@pytest.mark.sandbox
async def test_the_workspace_graders_look_at_the_files_the_agent_left() -> None:
    # Approving a write of the wrong text leaves a file that fails the file grader.
    def sloppy(ctx, tools):  # type: ignore[no-untyped-def]
        if ctx.last().role == "tool":
            return "done"
        return Action("write_file", {"path": "hello.txt", "content": "Hi"})

    report = await evaluate(load("workspace").select(ids=["ws-write-approved"]), brain=FunctionPolicy(sloppy))
    (grade,) = [g for g in report.results[0].grades if g.grader == "file:hello.txt"]
    assert not grade.passed and "does not contain 'Hello, world!'" in grade.reason


async def test_a_brain_that_never_acts_fails_nearly_everything() -> None:
    cases = [c for n in NO_SANDBOX if n != "support-phrasings" for c in load(n).cases]
    from tether.evals import Dataset
    from tether.evals.datasets import make_agent

    report = await evaluate(Dataset("lazy", cases, make_agent), brain=FunctionPolicy(lambda c, t: "I can't help."))
    passed = sorted(r.case_id for r in report.results if r.passed)
    assert passed == ["no-tool-greeting"]  # the one case that only asks for an answer without a tool


async def test_the_refund_desk_function_brain_solves_the_seed_desk() -> None:
    report = await evaluate(load("refund-desk"), brain=refund_desk_brain(), trials=2)
    assert report.summary().accuracy == 1.0 and report.summary().pass_at[2] == 1.0


def test_every_shipped_case_is_tagged_and_has_a_body() -> None:
    for case in load("tether-tasks").cases:
        assert case.tags and case.data.get("body"), case.id
    assert len(load("tether-tasks")) == sum(len(load(n)) for n in names()[:-1])


def test_tags_and_ids_select_cases() -> None:
    ds = load("tether-tasks")
    assert {c.id for c in ds.select(tags=["several-calls"]).cases} == {
        "several-weather",
        "several-currency",
        "several-stocks",
        "several-math",
    }
    assert [c.id for c in ds.select(ids=["ws-read"]).cases] == ["ws-read"]


@pytest.mark.parametrize("name", ["refund-desk", "toolbox", "workspace"])
def test_cases_round_trip_through_json_lines(tmp_path: Path, name: str) -> None:
    path = tmp_path / "cases.jsonl"
    cases = load(name).cases
    path.write_text("// a comment\n\n" + "\n".join(json.dumps(c.to_dict()) for c in cases) + "\n")
    back = load_jsonl(path)
    assert [c.to_dict() for c in back.cases] == [c.to_dict() for c in cases]  # Python graders are not carried
    assert [c.reference for c in back.cases] == [c.reference for c in cases]
    assert back.name == "cases"


def test_json_lines_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "a", "input": "x", "expected": "y"}\n{"id": "b", "input": "x", "colour": 1}\n')
    with pytest.raises(UserError, match=r"bad.jsonl:2: unknown case field\(s\) \['colour'\]"):
        load_jsonl(path)
    path.write_text("{not json\n")
    with pytest.raises(UserError, match=r"bad\.jsonl:1: not JSON"):
        load_jsonl(path)
    with pytest.raises(UserError, match="cannot read dataset"):
        load_jsonl(tmp_path / "missing.jsonl")


def test_load_dataset_takes_a_name_a_jsonl_or_a_python_file(tmp_path: Path) -> None:
    assert load_dataset("toolbox").name == "toolbox"
    py = tmp_path / "mine.py"
    py.write_text(
        "from tether.evals import Case, Dataset\ndataset = Dataset('mine', [Case('a', 'hi', expected='hello')])\n"
    )
    assert [c.id for c in load_dataset(str(py)).cases] == ["a"]
    with pytest.raises(UserError, match="unknown dataset"):
        load_dataset("nope")
    with pytest.raises(UserError, match="no shipped dataset"):
        load("nope")


def test_reference_brain_needs_references() -> None:
    with pytest.raises(UserError, match="no reference replies"):
        reference_brain(Case("a", "hi", expected="x"))


async def test_the_phrasings_grade_what_ran_not_only_what_was_said() -> None:
    """A brain that claims refunds without calling the tool fails every refund case (and its answer
    fails the claim grader); one that refunds whatever is asked fails the refunds outside policy."""
    ds = load("support-phrasings")
    assert len(ds) >= 40 and {"refund", "outside-policy", "look-up", "no-tool"} <= {t for c in ds.cases for t in c.tags}
    liar = FunctionPolicy(lambda c, t: "Done: your order has been refunded.")
    report = await evaluate(ds, brain=liar)
    by_id = {r.case_id: r for r in report.results}
    for case in ds.cases:
        claim = next(g for g in by_id[case.id].grades if g.grader == "claims_grounded")
        assert not claim.passed and "refunded" in claim.reason, case.id

    def eager(ctx, tools):  # type: ignore[no-untyped-def]
        import re

        oid = re.search(r"[A-Za-z]\d{4}", ctx.messages[-1].text if ctx.last().role == "user" else "")
        if ctx.last().role == "user" and oid:
            return Action("issue_refund", {"order_id": oid.group(0).upper(), "amount": 1})
        return "I asked for the refund."

    report = await evaluate(ds.select(tags=["outside-policy"]), brain=FunctionPolicy(eager))
    assert report.summary().accuracy == 0.0
    assert all(any(g.grader == "not_called(issue_refund)" and not g.passed for g in r.grades) for r in report.results)
