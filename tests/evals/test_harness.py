"""The harness on scripted and function brains: trials, pass@k, concurrency, humans, the store."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from tether import Action, Agent, FunctionPolicy, UserError, tool
from tether.evals import Case, Dataset, ExpectedCall, Setup, evaluate, reference_brain, run_id_for
from tether.evals._stats import pass_at_k
from tether.store import record_decisions
from tether.stores.memory import MemoryStore
from tether.stores.sqlite import SQLiteStore
from tether.testing import ScriptedModel

sent: list[str] = []


@tool(effect="none")
def get_weather(city: str) -> str:
    """The weather.

    Args:
        city: the city.
    """
    return f"{city}: 18C"


@tool(approval=True)
def send_email(to: str, body: str) -> str:
    """Send an email (a human must approve)."""
    sent.append(to)
    return f"sent to {to}"


TOOLS = [get_weather, send_email]


def agent_for(brain_of):  # type: ignore[no-untyped-def]
    return lambda s: Agent(brain_of(s), TOOLS, store=s.store)


def by_reference(s: Setup) -> Agent:
    return Agent(reference_brain(s.case), TOOLS, store=s.store)


WEATHER = Case(
    "weather",
    "Weather in Paris?",
    expected="18C",
    match="contains",
    tool_calls=(ExpectedCall("get_weather", {"city": "paris"}),),
    reference=(Action("get_weather", {"city": "Paris"}), "Paris: 18C"),
)


async def test_a_passing_and_a_failing_case() -> None:
    wrong = Case("wrong", "Weather in Rome?", expected="sunny", reference=("It rains.",))
    report = await evaluate([WEATHER, wrong], by_reference)
    assert [r.passed for r in report.results] == [True, False]
    assert report.summary().accuracy == 0.5
    reason = report.cases()[1].reasons[0]
    assert "expected 'sunny', got 'It rains.'" in reason
    assert report.results[0].replies == 2 and report.results[0].tool_calls == 1


def test_pass_at_k_is_the_unbiased_estimator() -> None:
    assert pass_at_k(4, 2, 1) == 0.5
    assert pass_at_k(4, 2, 2) == pytest.approx(1 - 1 / 6)
    assert pass_at_k(4, 0, 4) == 0.0 and pass_at_k(4, 1, 4) == 1.0
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


async def test_repeated_trials_give_pass_at_k_mean_and_spread() -> None:
    # The brain is right on even trials only: pass@1 0.5, pass@2 (of 4) 5/6, spread across rounds.
    def brain(s: Setup) -> ScriptedModel:
        return ScriptedModel(["18C" if s.trial % 2 == 0 else "no idea"])

    cases = [Case("a", "weather?", expected="18C"), Case("b", "weather again?", expected="18C")]
    report = await evaluate(cases, agent_for(brain), trials=4)
    s = report.summary()
    assert s.trials == 8 and s.accuracy == 0.5
    assert s.pass_at[1] == 0.5 and s.pass_at[2] == pytest.approx(5 / 6) and s.pass_at[4] == 1.0
    assert s.accuracy_spread == pytest.approx(0.57735, abs=1e-4)  # rounds: 1, 0, 1, 0
    assert report.cases()[0].passes == 2 and report.cases()[0].score_spread > 0


async def test_trials_run_concurrently_up_to_the_bound() -> None:
    running, peak = 0, 0

    async def slow(context, tools):  # type: ignore[no-untyped-def]
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.02)
        running -= 1
        return "done"

    cases = [Case(f"c{i}", "go", expected="done") for i in range(9)]
    report = await evaluate(cases, agent_for(lambda s: FunctionPolicy(slow)), concurrency=3)
    assert report.summary().accuracy == 1.0 and peak == 3


async def test_each_trial_gets_a_fresh_working_directory_with_the_case_files() -> None:
    seen: list[Path] = []

    def brain(s: Setup) -> FunctionPolicy:
        seen.append(s.workdir)
        return FunctionPolicy(lambda ctx, tools: (s.workdir / "notes.txt").read_text())

    case = Case("files", "read it", expected="hello", files={"notes.txt": "hello", "sub/x.txt": "x"})
    report = await evaluate([case], agent_for(brain), trials=2)
    assert report.summary().accuracy == 1.0
    assert len(set(seen)) == 2 and not any(p.exists() for p in seen)


async def test_the_scripted_human_approves_denies_or_leaves_the_run_paused() -> None:
    sent.clear()
    email = [Action("send_email", {"to": "boss@example.com", "body": "hi"})]
    approved = Case("yes", "email", status="finished", human=("approve",), reference=(email[0], "Sent."))
    denied = Case("no", "email", status="finished", human=("deny: not today",), reference=(email[0], "Not sent."))
    waiting = Case("wait", "email", status="paused", reference=(email[0],))
    report = await evaluate([approved, denied, waiting], by_reference)
    assert report.summary().accuracy == 1.0
    assert sent == ["boss@example.com"]  # only the approved one ran


async def test_the_model_reads_a_denial_with_its_message() -> None:
    seen = []

    def brain(ctx, tools):  # type: ignore[no-untyped-def]
        if ctx.last().role == "tool":
            seen.append(ctx.last().content)
            return "ok"
        return Action("send_email", {"to": "a@b.c", "body": "x"})

    case = Case("deny", "email", status="finished", human=("deny: too late",))
    await evaluate([case], agent_for(lambda s: FunctionPolicy(brain)))
    assert seen == ["a human denied this call: too late"]


def _delegating(s: Setup) -> Agent:
    """A desk that hands the task to a mailer child run, which sends two emails (each approved)."""
    mailer = Agent(
        ScriptedModel([Action("send_email", {"to": "a@x.y", "body": "1"}), Action("send_email", {"to": "b@x.y", "body": "2"}), "Both sent."]),
        TOOLS,
        name="mailer",
    )  # fmt: skip
    desk = ScriptedModel([Action("mailer", {"task": "send both"}), "The mailer sent both."])
    return Agent(desk, [mailer.as_tool("mailer", "Sends emails.")], store=s.store, name="desk")


async def test_the_scripted_human_answers_approvals_asked_inside_a_child_run() -> None:
    sent.clear()
    case = Case(
        "nested", "send both", status="finished", human=("approve", "approve"), expected="sent both", match="contains"
    )
    (result,) = (await asyncio.wait_for(evaluate([case], _delegating), 30)).results
    assert result.passed and result.status == "finished", result
    assert sent == ["a@x.y", "b@x.y"]
    assert result.tool_calls == 2  # the child run's calls, graded as the desk's


async def test_a_child_run_left_waiting_by_the_script_is_graded_paused_and_never_resumed_forever() -> None:
    sent.clear()
    case = Case("half", "send both", status="paused", human=("approve",))
    (result,) = (await asyncio.wait_for(evaluate([case], _delegating), 30)).results
    assert result.passed and result.status == "paused", result
    assert sent == ["a@x.y"]


async def test_an_agent_that_never_takes_up_a_decision_ends_the_loop() -> None:
    sent.clear()

    class Stubborn:  # resumes nothing: the run stays paused whatever is decided
        def __init__(self, s: Setup) -> None:
            self.agent, self.store = _delegating(s), s.store

        async def run(self, task: str | None = None, **kw):  # type: ignore[no-untyped-def]
            return await self.agent.run(task, **kw) if task is not None else None

    case = Case("stuck", "send both", status="finished", human=("approve", "approve", "approve"))
    (result,) = (await asyncio.wait_for(evaluate([case], Stubborn), 30)).results  # type: ignore[arg-type]
    assert not result.passed and result.status == "paused"
    assert sent == []


async def test_approvals_work_with_a_signing_key() -> None:
    key = b"k" * 32
    case = Case(
        "signed",
        "email",
        status="finished",
        human=("approve",),
        reference=(Action("send_email", {"to": "x@y.z", "body": "b"}), "Sent."),
    )
    report = await evaluate([case], lambda s: Agent(reference_brain(s.case), TOOLS, store=s.store, signing_key=key))
    assert report.results[0].passed, report.results[0]


async def test_a_run_that_raises_is_a_failed_trial_not_a_crashed_evaluation() -> None:
    short = Case("short", "weather?", expected="x", reference=(Action("get_weather", {"city": "Oslo"}),))
    report = await evaluate([short, WEATHER], by_reference)
    first = report.results[0]
    assert not first.passed and first.status == "failed" and "ScriptExhausted" in (first.error or "")
    assert report.results[1].passed and report.summary().errors == 1


async def test_finished_trials_are_read_back_from_the_store(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "evals.db")
    first = await evaluate([WEATHER], by_reference, name="w", store=store, trials=2)
    assert first.summary().read_back == 0
    # A brain with no replies would fail if asked: nothing runs again.
    again = await evaluate([WEATHER], agent_for(lambda s: ScriptedModel([])), name="w", store=store, trials=2)
    assert again.summary().read_back == 2 and again.summary().accuracy == 1.0
    assert [r.to_dict() for r in again.results] == [r.to_dict() for r in first.results]
    assert await store.get(run_id_for("w", "weather", 1)) is not None


async def test_a_changed_case_is_run_again() -> None:
    store = MemoryStore()
    await evaluate([WEATHER], by_reference, name="w", store=store)
    changed = Case(
        "weather",
        "Weather in Oslo?",
        expected="Oslo",
        match="contains",
        reference=(Action("get_weather", {"city": "Oslo"}), "Oslo: 18C"),
    )
    report = await evaluate([changed], by_reference, name="w", store=store)
    assert report.summary().read_back == 0 and report.results[0].passed


async def _interrupted(store: MemoryStore, name: str) -> None:
    """A trial whose run paused for approval and was never graded (as if killed right then)."""
    agent = Agent(ScriptedModel([Action("send_email", {"to": "b@c.d", "body": "x"})]), TOOLS, store=store)
    await agent.run("email", run_id=run_id_for(name, "mail", 0))


MAIL = Case("mail", "email", status="finished", human=("approve",))


async def test_unfinished_runs_restart_by_default() -> None:
    store = MemoryStore()
    await _interrupted(store, "m")
    again = ScriptedModel([Action("send_email", {"to": "b@c.d", "body": "x"}), "Sent."])
    report = await evaluate([MAIL], agent_for(lambda s: again), name="m", store=store)
    assert report.results[0].passed and again.remaining == 0  # the whole run again


async def test_unfinished_runs_can_resume_from_the_store() -> None:
    store = MemoryStore()
    await _interrupted(store, "m")
    rest = ScriptedModel(["Sent."])  # only the reply after the approval
    report = await evaluate([MAIL], agent_for(lambda s: rest), name="m", store=store, unfinished="resume")
    assert report.results[0].passed and rest.remaining == 0


async def test_a_trial_run_again_runs_its_child_runs_again_too() -> None:
    # A changed case (or a restarted trial) runs from the start: the child runs the old
    # run left under the same ids are not resumed (their emails went out in another run).
    store = MemoryStore()
    nested = Case(
        "nested", "send both", status="finished", human=("approve", "approve"), expected="sent both", match="contains"
    )
    await evaluate([nested], _delegating, name="d", store=store)
    sent.clear()
    changed = dataclasses.replace(nested, expected="both")
    (result,) = (await asyncio.wait_for(evaluate([changed], _delegating, name="d", store=store), 30)).results
    assert result.passed and result.read_back is False, result
    assert sent == ["a@x.y", "b@x.y"]  # run again, not read back from the old child run


async def test_a_restarted_trial_does_not_inherit_decisions_of_the_interrupted_child_run() -> None:
    store = MemoryStore()
    rid = run_id_for("d", "nested", 0)
    setup = Setup(Case("nested", "send both", status="finished"), 0, rid, store, Path("."))
    await _delegating(setup).run("send both", run_id=rid)  # the child waits for the first approval
    await record_decisions(store, rid, lambda s: s.approve(s.items()[0].id, by="eval"))  # killed right then
    sent.clear()
    case = Case(
        "nested", "send both", status="finished", human=("deny: no", "approve"), expected="sent", match="contains"
    )
    (result,) = (await asyncio.wait_for(evaluate([case], _delegating, name="d", store=store), 30)).results
    assert result.error is None and result.status == "finished", result
    assert sent == ["b@x.y"]  # the script's deny went to the first email, in the restarted run


async def test_decisions_recorded_before_an_interruption_are_taken_up_when_resuming() -> None:
    # Killed after the scripted human's decision was recorded, before the run resumed:
    # resuming takes that decision up, and the next verdict goes to the next call.
    store = MemoryStore()
    rid = run_id_for("d", "nested", 0)
    setup = Setup(Case("nested", "send both", status="finished"), 0, rid, store, Path("."))
    await _delegating(setup).run("send both", run_id=rid)
    await record_decisions(store, rid, lambda s: s.approve(s.items()[0].id, by="eval"))
    sent.clear()
    case = Case(
        "nested", "send both", status="finished", human=("approve", "deny: no"), expected="sent", match="contains"
    )

    def rest(s: Setup) -> Agent:  # the scripts from where the interrupted run stopped
        mailer = Agent(ScriptedModel([Action("send_email", {"to": "b@x.y", "body": "2"}), "One sent."]), TOOLS,
                       name="mailer")  # fmt: skip
        desk = ScriptedModel(["The mailer sent one."])
        return Agent(desk, [mailer.as_tool("mailer", "Sends emails.")], store=s.store, name="desk")

    report = await asyncio.wait_for(evaluate([case], rest, name="d", store=store, unfinished="resume"), 30)
    (result,) = report.results
    assert result.error is None and result.status == "finished", result
    assert sent == ["a@x.y"]  # approved before the kill; the second email denied by the script


async def test_a_price_gives_the_cost() -> None:
    from tether import Message, Usage

    reply = Message("assistant", "18C", usage=Usage(input_tokens=1000, output_tokens=100, requests=1))
    case = Case("cost", "weather?", expected="18C")
    report = await evaluate([case], agent_for(lambda s: ScriptedModel([reply])), price=(1.0, 10.0))
    r = report.results[0]
    assert (r.input_tokens, r.output_tokens) == (1000, 100)
    assert r.cost == pytest.approx(0.002) and report.summary().cost == pytest.approx(0.002)


async def test_the_tokens_of_child_runs_count_in_the_trial() -> None:
    from tether import Message, ToolCall, Usage

    def build(s: Setup) -> Agent:
        said = Message("assistant", "18C", usage=Usage(input_tokens=700, output_tokens=70, requests=1))
        helper = Agent(ScriptedModel([said]), name="helper")
        ask = Message("assistant", "", (ToolCall.of("helper", {"task": "weather?"}, id="c1"),), usage=Usage(300, 30, 1))
        desk = ScriptedModel([ask, Message("assistant", "18C", usage=Usage(0, 0, 1))])
        return Agent(desk, [helper.as_tool("helper", "Asks the helper.")], store=s.store)

    case = Case("nested-cost", "weather?", expected="18C")
    (r,) = (await evaluate([case], build, price=(1.0, 10.0))).results
    assert (r.input_tokens, r.output_tokens) == (1000, 100)  # the desk's 300/30 and the helper's 700/70
    assert r.cost == pytest.approx(0.002)


async def test_misuse_is_a_clear_user_error() -> None:
    with pytest.raises(UserError, match=r"store=setup\.store"):
        await evaluate([WEATHER], lambda s: Agent(reference_brain(s.case), TOOLS))
    with pytest.raises(UserError, match="has no agent body"):
        await evaluate(Dataset("bare", [WEATHER]), brain=ScriptedModel([]))
    with pytest.raises(UserError, match="trials must be a positive integer"):
        await evaluate([WEATHER], by_reference, trials=0)
    with pytest.raises(UserError, match="two cases with id"):
        Dataset("dup", [WEATHER, WEATHER])
    with pytest.raises(UserError, match="nothing to grade"):
        Dataset("empty", [Case("x", "hi")])
    with pytest.raises(UserError, match="unknown human verdict"):
        Case("x", "hi", status="finished", human=("maybe",))


async def test_an_agent_instance_with_a_store_is_used_for_every_case() -> None:
    store = MemoryStore()
    agent = Agent(FunctionPolicy(lambda ctx, tools: "18C"), TOOLS, store=store)
    report = await evaluate([Case("a", "x", expected="18C"), Case("b", "y", expected="18C")], agent)
    assert report.summary().accuracy == 1.0
    assert await store.get(run_id_for("cases", "b", 0)) is not None


async def test_resuming_grades_a_run_that_ended_before_its_grade_was_kept() -> None:
    store = MemoryStore()
    agent = Agent(ScriptedModel(["18C"]), TOOLS, store=store)
    await agent.run("weather?", run_id=run_id_for("m", "done", 0))
    case = Case("done", "weather?", expected="18C")
    never = ScriptedModel([])  # the run is over: the brain is not asked again
    report = await evaluate([case], agent_for(lambda s: never), name="m", store=store, unfinished="resume")
    assert report.results[0].passed and report.results[0].error is None
