"""The harness: run every case of a dataset, some number of times, and grade each run.

:func:`evaluate` builds a fresh Agent for each trial (through the dataset's
body or your factory, given a :class:`Setup`: the case, the trial number, the
run id, the store and a fresh working directory), runs the case's input,
answers approval requests as the case's scripted human says, grades the
outcome and keeps the result in the store.

Run ids are ``eval:<name>:<case id>:<trial>``, so evaluating again with the
same name and store resumes: a trial already graded is read back; one that
was interrupted is run again from the start (``unfinished="restart"``, the
default: a fresh working directory and a fresh agent cannot continue a half
done run faithfully) or continued from the store (``unfinished="resume"``,
for agents whose world survives the interruption). A case whose definition
changed since it was graded is run again.

>>> from tether.testing import ScriptedModel
>>> from tether.evals import Case, Dataset, evaluate_sync
>>> ds = Dataset("hello", [Case("hi", "Say hello", expected="hello")])
>>> evaluate_sync(ds, lambda s: Agent(ScriptedModel(["hello"]), store=s.store)).summary().accuracy
1.0
"""

from __future__ import annotations

import asyncio
import inspect
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..agent import Agent
from ..events import ApprovalDecided
from ..exceptions import UserError
from ..state import Choice
from ..store import load_tree, record_decisions
from ..toolkits._walk import remove_tree
from . import _records
from ._pool import Runner, run_bounded
from .cases import AgentFactory, Case, Dataset, Setup, parse_verdict
from .outcome import Outcome, outcome_of, with_child_calls
from .progress import Progress, make_progress
from .report import Report, TrialResult

if TYPE_CHECKING:
    from ..policy import Policy
    from ..store import RunStore

Price = tuple[float, float]
"""Dollars per million input tokens and per million output tokens."""
Unfinished = Literal["restart", "resume"]


def run_id_for(name: str, case_id: str, trial: int) -> str:
    """The run id of one trial: derived, so an interrupted evaluation finds its runs again.

    >>> run_id_for("refunds", "approved", 2)
    'eval:refunds:approved:2'
    """
    return f"eval:{name}:{case_id}:{trial}"


async def evaluate(
    dataset: Dataset | Sequence[Case],
    agent: AgentFactory | Agent | None = None,
    *,
    brain: Policy | Callable[[Setup], Policy] | None = None,
    name: str | None = None,
    store: RunStore | None = None,
    trials: int = 1,
    concurrency: int = 4,
    unfinished: Unfinished = "restart",
    price: Price | None = None,
    label: str = "",
    progress: bool | Progress | None = None,
    workdir: str | Path | None = None,
    runner: Runner[TrialResult] = run_bounded,
) -> Report:
    """Run and grade every case ``trials`` times; return the :class:`~tether.evals.Report`.

    ``agent`` builds the agent of each trial (``Setup -> Agent``, sync or
    async); without it the dataset's own body is used with ``brain`` (a
    policy, or a function of the Setup giving one: e.g. a ScriptedModel per
    case). ``store`` defaults to the agent's store or a new MemoryStore.
    ``progress``: a bar on stderr when it is a terminal (None), always
    (True), never (False). ``workdir`` is where trial directories are made
    (default: the system's temporary directory). ``runner`` runs the trials
    (default: a bounded asyncio pool of ``concurrency``).
    """
    ds = dataset if isinstance(dataset, Dataset) else Dataset(name or "cases", dataset)
    _check(trials, concurrency, unfinished)
    factory = _factory(ds, agent, brain)
    if store is None:
        store = agent.store if isinstance(agent, Agent) and agent.store is not None else _memory_store()
    eval_name = name or ds.name
    jobs = [(case, t) for t in range(trials) for case in ds.cases]
    bar = progress if isinstance(progress, Progress) else make_progress(len(jobs), eval_name, enabled=progress)
    trial = _Trials(eval_name, store, factory, brain, unfinished, price, workdir, bar)
    try:
        results = await runner([trial.job(case, t) for case, t in jobs], concurrency)
    finally:
        bar.close()
    meta = {"dataset": ds.name, "trials": trials, "price": list(price) if price else None}
    return Report(eval_name, results, label=label, meta=meta)


def evaluate_sync(dataset: Dataset | Sequence[Case], agent: AgentFactory | Agent | None = None, **kw: Any) -> Report:
    """:func:`evaluate` for synchronous code (starts its own event loop)."""
    return asyncio.run(evaluate(dataset, agent, **kw))


def _check(trials: int, concurrency: int, unfinished: str) -> None:
    if not isinstance(trials, int) or trials < 1:
        raise UserError(f"trials must be a positive integer, got {trials!r}")
    if not isinstance(concurrency, int) or concurrency < 1:
        raise UserError(f"concurrency must be a positive integer, got {concurrency!r}")
    if unfinished not in ("restart", "resume"):
        raise UserError(f"unfinished must be 'restart' or 'resume', not {unfinished!r}")


def _memory_store() -> RunStore:
    from ..stores.memory import MemoryStore

    return MemoryStore()


def _factory(ds: Dataset, agent: AgentFactory | Agent | None, brain: Any) -> AgentFactory:
    if isinstance(agent, Agent):
        fixed = agent
        return lambda setup: fixed
    if agent is not None:
        return agent
    if ds.agent is None:
        raise UserError(f"dataset {ds.name!r} has no agent body: pass agent=(setup -> Agent)")
    if brain is None:
        raise UserError(f"evaluating dataset {ds.name!r} with its own body needs brain= (a policy)")
    return ds.agent


class _Trials:
    """Runs one trial at a time: find it in the store, or run it, grade it and keep the grade."""

    def __init__(
        self,
        name: str,
        store: RunStore,
        factory: AgentFactory,
        brain: Any,
        unfinished: Unfinished,
        price: Price | None,
        workdir: str | Path | None,
        bar: Progress,
    ) -> None:
        self.name, self.store, self.factory, self.brain = name, store, factory, brain
        self.unfinished, self.price, self.workdir, self.bar = unfinished, price, workdir, bar

    def job(self, case: Case, trial: int) -> Callable[[], Any]:
        async def run() -> TrialResult:
            result = await self.one(case, trial)
            self.bar.advance(result)
            return result

        return run

    async def one(self, case: Case, trial: int) -> TrialResult:
        run_id = run_id_for(self.name, case.id, trial)
        saved = await _records.load(self.store, run_id)
        if saved is not None and saved.get("digest") == case.digest():
            return TrialResult.from_dict(saved, read_back=True)
        info = await self.store.get(run_id)
        if info is not None and (self.unfinished == "restart" or saved is not None):
            await _records.forget(self.store, run_id)
            info = None
        root = tempfile.mkdtemp(prefix="tether-eval-", dir=self.workdir)
        try:
            workdir = Path(root)
            _lay_out(workdir, case.files)
            setup = Setup(case, trial, run_id, self.store, workdir, self._brain(case, trial, run_id, workdir))
            result = await self._run(setup, None if info is None else info.status)
        finally:
            await asyncio.to_thread(_remove, root)
        await _records.save(self.store, run_id, result.to_dict())
        return result

    def _brain(self, case: Case, trial: int, run_id: str, workdir: Path) -> Policy | None:
        brain = self.brain
        if brain is None or callable(getattr(brain, "decide", None)):
            return brain  # type: ignore[no-any-return]
        return brain(Setup(case, trial, run_id, self.store, workdir))  # type: ignore[no-any-return]

    async def _run(self, setup: Setup, status: str | None) -> TrialResult:
        """Run the trial (``status`` None) or carry on with its stored run, then grade it."""
        agent = self.factory(setup)
        if inspect.isawaitable(agent):
            agent = await agent
        if not callable(getattr(agent, "run", None)) or getattr(agent, "store", None) is not setup.store:
            raise UserError(
                f"the agent factory must return an Agent built with store=setup.store (case {setup.case.id!r})"
            )
        started = time.monotonic()
        error = None
        try:
            if status is None:
                await agent.run(setup.case.input, run_id=setup.run_id)
            elif status in _CONTINUE:
                await agent.run(run_id=setup.run_id)
            await _answer_humans(agent, setup)
        except Exception as exc:  # the run is in the store as failed; the trial records why
            error = f"{type(exc).__name__}: {exc}"
        seconds = time.monotonic() - started
        events = await setup.store.load(setup.run_id)
        outcome = outcome_of(events, workdir=setup.workdir, case_id=setup.case.id, data=setup.case.data)
        outcome = await with_child_calls(outcome, setup.store)
        return await self._grade(setup.case, setup.trial, outcome, seconds, error)

    async def _grade(self, case: Case, trial: int, o: Outcome, seconds: float, error: str | None) -> TrialResult:
        grades = []
        for grader in case.graders():
            grade = await grader.grade(o)
            grades.append(grade if grade.grader else _named(grade, grader.name))
        passed = error is None and all(g.passed for g in grades)
        score = sum(g.score or 0.0 for g in grades) / len(grades) if grades else 0.0
        tokens_in, tokens_out = o.usage.input_tokens, o.usage.output_tokens
        cost = None if self.price is None else (tokens_in * self.price[0] + tokens_out * self.price[1]) / 1e6
        return TrialResult(
            case_id=case.id,
            trial=trial,
            run_id=o.run_id,
            passed=passed,
            score=score,
            status=o.status,
            output=o.output,
            grades=tuple(grades),
            replies=o.replies,
            tool_calls=len(o.calls),
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            seconds=round(seconds, 6),
            cost=cost,
            error=error or (o.error if o.status == "failed" else None),
            tags=case.tags,
            digest=case.digest(),
        )


_CONTINUE = frozenset(("running", "cancelled"))  # interrupted: resume; ended or waiting: grade or ask the human


def _named(grade: Any, name: str) -> Any:
    from .graders import Grade

    return Grade(grade.passed, grade.score, grade.reason, name)


def _remove(root: str) -> None:
    """Remove a trial's directory, whatever the agent left in it (10,000 nested folders, links)."""
    try:
        remove_tree(root)
    except OSError as exc:  # say so: a leftover directory is not silently forgotten
        warnings.warn(f"the trial directory {root!r} could not be removed: {exc}", RuntimeWarning, stacklevel=2)


def _lay_out(workdir: Path, files: dict[str, str] | Any) -> None:
    for rel, text in dict(files).items():
        target = (workdir / rel).resolve()
        if not target.is_relative_to(workdir.resolve()):
            raise UserError(f"case file {rel!r} is outside the working directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


async def _answer_humans(agent: Agent, setup: Setup) -> None:
    """While the run waits for people, answer with the case's scripted verdicts, in order.

    What waits may be anywhere in the run tree (a pattern's child run asking
    for approval): items are addressed from the root, and verdicts already
    used are counted over every run of the tree. An item decided before an
    interruption (the decision recorded, the run not yet resumed) is not
    decided again: the run resumes to take it up. A round that records no new
    decision and finds the same items waiting ends the loop, so a run that
    pauses again without taking one is graded as it stands instead of being
    resumed forever.
    """
    store, run_id = setup.store, setup.run_id
    key = getattr(agent, "signing_key", None)
    last: tuple[int, tuple[str, ...]] | None = None
    while True:
        info = await store.get(run_id)
        if info is None or info.status not in ("paused", "needs-decision"):
            return
        used = await _decisions_in_tree(store, run_id)
        state = await load_tree(store, run_id)
        open_items = [p for p in state.items() if p.status in ("awaiting-approval", "started")]
        seen = (used, tuple(p.id for p in open_items))
        if seen == last:
            return  # the last round changed nothing (its decisions were not taken up): stop asking
        last = seen
        waiting = [p for p in open_items if state.decision(p.id) is None]
        verdicts = [parse_verdict(v, setup.case.id) for v in setup.case.human[used:]]
        if not open_items or len(verdicts) < len(waiting):
            return  # the script has no more answers: the run stays paused, and the graders see it
        if waiting:  # each item by its id from the root: the delegating calls, then the call
            scripted = zip(waiting, verdicts, strict=False)
            choices = [Choice(verdict, p.id, message=said) for p, (verdict, said) in scripted]
            await record_decisions(store, run_id, choices, by="eval", key=key)
        await agent.run(run_id=run_id)


async def _decisions_in_tree(store: RunStore, run_id: str) -> int:
    """How many decisions the journals of ``run_id`` and of every child run under it hold."""
    events = await store.load(run_id)
    count = sum(isinstance(ev, ApprovalDecided) for ev in events)
    for child in await _records.child_runs(store, run_id, events):
        count += await _decisions_in_tree(store, child)
    return count
