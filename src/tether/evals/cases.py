"""Cases and datasets: what an evaluation asks, and how each answer is graded.

A :class:`Case` is one task: the ``input`` given to the agent, and what makes
the run right — an ``expected`` output (compared ``exact``, by ``contains`` or
as ``json``), the ``tool_calls`` the agent should make, the run's final
``status``, text the answer must not contain (``forbidden``), extra
:mod:`~tether.evals.graders`, or any mix. ``files`` are laid
out in the trial's fresh working directory before the agent is built;
``human`` scripts the person who answers approval requests (``"approve"``,
``"deny: too much"``, ...). ``reference`` holds the ideal replies, which
:func:`reference_brain` plays back (a check that a case is solvable as written).

A :class:`Dataset` is a named list of cases, optionally with the agent's body
(``agent``: a function of a :class:`~tether.evals.Setup` that builds the
Agent around whatever brain is being evaluated). Datasets load from JSON Lines
(:func:`load_jsonl`) or are written in Python.

>>> case = Case("greet", "Say hi", expected="hi", match="contains", tags=("smoke",))
>>> [g.name for g in case.graders()]
['contains']
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from ..exceptions import UserError
from ..messages import Message
from ..pending import VERBS, Verdict
from ..policy import Action, Move
from ..testing import ScriptedModel
from .graders import ExpectedCall, Grader, contains, exact, excludes, json_match, status_is, tool_calls

if TYPE_CHECKING:
    from .. import Agent
    from ..policy import Policy
    from ..store import RunStore

Match = Literal["exact", "contains", "json"]
Order = Literal["any", "ordered", "exact"]
AgentFactory = Callable[["Setup"], "Agent | Awaitable[Agent]"]
"""Builds the agent of one trial from its :class:`Setup` (sync or async)."""


@dataclass(frozen=True, slots=True)
class Setup:
    """What an agent factory gets for one trial.

    Build the Agent with ``store=setup.store`` (the harness reads the run
    back from it) and, for workspace tasks, point its tools at ``workdir``: a
    fresh directory holding the case's ``files``, removed after the trial.
    ``brain`` is the policy being evaluated, when one was given.

    Anything shaped like an Agent will do: a ``store`` attribute and
    ``async run(task, *, run_id=...)`` / ``run(run_id=...)`` that journal the
    run under ``run_id`` (a pattern such as plan-and-execute wrapped that way).
    """

    case: Case
    trial: int
    run_id: str
    store: RunStore
    workdir: Path
    brain: Policy | None = None


@dataclass(frozen=True, slots=True)
class Case:
    """One task of an evaluation (see the module docstring for each field).

    ``order`` says how ``tool_calls`` are matched: ``"any"`` (each expected
    call made, in any order, others allowed), ``"ordered"`` (in this order,
    others allowed between) or ``"exact"`` (exactly these, in this order).
    ``same_reply`` requires all of them in one model reply. An empty
    ``tool_calls`` tuple means "no tool at all".
    """

    id: str
    input: str
    expected: str | Any | None = None
    match: Match = "exact"
    tool_calls: tuple[ExpectedCall, ...] | None = None
    order: Order = "any"
    same_reply: bool = False
    status: str | None = None
    forbidden: tuple[str, ...] = ()
    extra: tuple[Grader, ...] = ()
    tags: tuple[str, ...] = ()
    files: Mapping[str, str] = field(default_factory=dict)
    human: tuple[str, ...] = ()
    reference: tuple[Move, ...] = ()
    data: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.id or not isinstance(self.id, str):
            raise UserError(f"a case needs a non-empty string id, got {self.id!r}")
        if self.match not in get_args(Match):
            raise UserError(f"case {self.id!r}: match must be one of {get_args(Match)}, not {self.match!r}")
        if self.order not in get_args(Order):
            raise UserError(f"case {self.id!r}: order must be one of {get_args(Order)}, not {self.order!r}")
        for verdict in self.human:
            parse_verdict(verdict, self.id)

    def graders(self) -> list[Grader]:
        """Every grader this case implies, in a stable order."""
        out: list[Grader] = []
        if self.expected is not None:
            makers: dict[str, Callable[[Any], Grader]] = {"exact": exact, "contains": contains, "json": json_match}
            out.append(makers[self.match](self.expected))
        if self.tool_calls is not None:
            out.append(tool_calls(self.tool_calls, order=self.order, same_reply=self.same_reply))
        if self.status is not None:
            out.append(status_is(self.status))
        if self.forbidden:
            out.append(excludes(*self.forbidden))
        out.extend(self.extra)
        return out

    def digest(self) -> str:
        """A short hash of what the case asks and expects: a stored grade for another digest is stale."""
        data = {k: v for k, v in self.to_dict().items() if k not in ("tags", "reference")}
        data["extra"] = [g.name for g in self.extra]
        text = json.dumps(data, sort_keys=True, default=repr)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """The case as a JSON Lines record (Python graders are named, not serialised)."""
        data: dict[str, Any] = {"id": self.id, "input": self.input}
        if self.expected is not None:
            data["expected"], data["match"] = self.expected, self.match
        if self.tool_calls is not None:
            data["tool_calls"] = [c.to_dict() for c in self.tool_calls]
            data["order"], data["same_reply"] = self.order, self.same_reply
        optional: dict[str, Any] = {"status": self.status, "forbidden": list(self.forbidden), "tags": list(self.tags)}
        optional |= {"files": dict(self.files), "human": list(self.human), "data": dict(self.data)}
        data |= {k: v for k, v in optional.items() if v}
        if self.reference:
            data["reference"] = [_move_to_json(m) for m in self.reference]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "case") -> Case:
        """A case from a JSON Lines record; a clear UserError for anything malformed."""
        if not isinstance(data, Mapping):
            raise UserError(f"{where}: a case must be a JSON object, got {type(data).__name__}")
        unknown = set(data) - _CASE_KEYS
        if unknown:
            raise UserError(f"{where}: unknown case field(s) {sorted(unknown)}; known: {sorted(_CASE_KEYS)}")
        for key in ("id", "input"):
            if not isinstance(data.get(key), str):
                raise UserError(f"{where}: field {key!r} must be a string")
        calls = data.get("tool_calls")
        return cls(
            id=data["id"],
            input=data["input"],
            expected=data.get("expected"),
            match=data.get("match", "exact"),
            tool_calls=None if calls is None else tuple(_expected_call(c, where) for c in calls),
            order=data.get("order", "any"),
            same_reply=bool(data.get("same_reply", False)),
            status=data.get("status"),
            forbidden=tuple(data.get("forbidden", ())),
            tags=tuple(data.get("tags", ())),
            files=dict(data.get("files", {})),
            human=tuple(data.get("human", ())),
            reference=tuple(_move_from_json(m, where) for m in data.get("reference", ())),
            data=dict(data.get("data", {})),
        )


_CASE_KEYS = frozenset(
    (
        "id",
        "input",
        "expected",
        "match",
        "tool_calls",
        "order",
        "same_reply",
        "status",
        "forbidden",
        "tags",
        "files",
        "human",
        "reference",
        "data",
    )
)


@dataclass(frozen=True, slots=True)
class Dataset:
    """A named list of cases, and optionally the body of the agent that takes them.

    >>> ds = Dataset("demo", [Case("a", "hi", expected="hello")])
    >>> ds.select(tags=["none"]).cases
    ()
    """

    name: str
    cases: tuple[Case, ...]
    agent: AgentFactory | None = None
    description: str = ""

    def __init__(
        self, name: str, cases: Iterable[Case], agent: AgentFactory | None = None, description: str = ""
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "cases", tuple(cases))
        object.__setattr__(self, "agent", agent)
        object.__setattr__(self, "description", description)
        seen: set[str] = set()
        for case in self.cases:
            if case.id in seen:
                raise UserError(f"dataset {name!r} has two cases with id {case.id!r}")
            if not case.graders():
                raise UserError(f"case {case.id!r} of dataset {name!r} has nothing to grade it by")
            seen.add(case.id)

    def select(self, *, tags: Sequence[str] = (), ids: Sequence[str] = ()) -> Dataset:
        """The cases carrying any of ``tags`` and/or named in ``ids`` (no filter: all)."""
        keep = [c for c in self.cases if (not tags or set(tags) & set(c.tags)) and (not ids or c.id in ids)]
        return Dataset(self.name, keep, self.agent, self.description)

    def __len__(self) -> int:
        return len(self.cases)


def load_jsonl(path: str | Path, *, name: str | None = None, agent: AgentFactory | None = None) -> Dataset:
    """A dataset from a JSON Lines file: one case per line (blank lines and ``//`` comments skipped).

    >>> load_jsonl("cases.jsonl", agent=make_agent)  # doctest: +SKIP
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UserError(f"cannot read dataset {str(path)!r}: {exc.strerror}") from None
    cases = []
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        where = f"{path.name}:{n}"
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise UserError(f"{where}: not JSON ({exc})") from None
        cases.append(Case.from_dict(record, where))
    return Dataset(name or path.stem, cases, agent)


def reference_brain(case: Case | Setup) -> ScriptedModel:
    """A brain that plays back ``case.reference`` (UserError if the case has none).

    Takes a Case or a :class:`~tether.evals.Setup`, so ``brain=reference_brain``
    gives each trial its case's script.

    >>> reference_brain(Case("a", "hi", expected="hello", reference=("hello",))).replies
    ['hello']
    """
    case = case if isinstance(case, Case) else case.case
    if not case.reference:
        raise UserError(f"case {case.id!r} has no reference replies to play back")
    return ScriptedModel(list(case.reference))


SCRIPTED: dict[str, Verdict] = {v: v for v, verb in VERBS.items() if verb.takes != "answer"}
"""The verdicts a case's scripted human gives: every one of :data:`tether.pending.VERBS` but a question's answer."""


def parse_verdict(text: str, case_id: str = "?") -> tuple[Verdict, str]:
    """``"approve"``, ``"deny: message"``, ``"retry"`` or ``"skip: message"`` as (verdict, message).

    The message is kept for a verdict that takes one (and dropped for the others).

    >>> parse_verdict("deny: too much"), parse_verdict("approve")
    (('deny', 'too much'), ('approve', ''))
    """
    word, _, message = str(text).partition(":")
    verdict = SCRIPTED.get(word.strip().lower())
    if verdict is None:
        said = ", ".join(v + ("[: why]" if VERBS[v].takes == "message" else "") for v in SCRIPTED.values())
        raise UserError(f"case {case_id!r}: unknown human verdict {text!r} ({said})")
    return verdict, message.strip() if VERBS[verdict].takes == "message" else ""


def _expected_call(data: Any, where: str) -> ExpectedCall:
    if isinstance(data, str):
        return ExpectedCall(data)
    if not isinstance(data, Mapping) or not isinstance(data.get("name"), str):
        raise UserError(f"{where}: each expected tool call needs a 'name' (and optional 'arguments')")
    args = data.get("arguments", {})
    if not isinstance(args, Mapping):
        raise UserError(f"{where}: 'arguments' of expected call {data['name']!r} must be an object")
    return ExpectedCall(data["name"], dict(args))


def _move_to_json(move: Move) -> Any:
    if isinstance(move, str):
        return move
    message = move if isinstance(move, Message) else _as_message(move)
    calls = [{"name": c.name, "arguments": json.loads(c.arguments or "{}")} for c in message.tool_calls]
    return {"content": message.content, "calls": calls}


def _as_message(move: Move) -> Message:
    from ..policy import to_message

    return to_message(move)


def _move_from_json(data: Any, where: str) -> Move:
    if isinstance(data, str):
        return data
    if not isinstance(data, Mapping) or not isinstance(data.get("calls", []), list):
        raise UserError(f"{where}: a reference reply is a string or {{'content': ..., 'calls': [...]}}")
    content, calls = str(data.get("content", "")), data.get("calls", [])
    if not calls:
        return content
    return [Action(c["name"], dict(c.get("arguments", {})), content if i == 0 else "") for i, c in enumerate(calls)]
