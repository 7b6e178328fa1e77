"""Graders: is a trial's outcome right?

A grader has a ``name`` and ``async grade(outcome) -> Grade``. The built-ins:

* :func:`exact`, :func:`contains`, :func:`excludes`, :func:`json_match`: the final answer;
* :func:`tool_calls`: the calls made, by name and arguments, compared
  type-tolerantly (:func:`same`), in any order, in order, or exactly, and
  optionally all in one reply;
* :func:`status_is`: how the run ended (``finished``, ``paused``, ...);
* :func:`file_contains`: a file the agent left in its working directory;
* :func:`function`: any Python function of the :class:`~tether.evals.Outcome`;
* :func:`judge`: a language model (any tether Policy) reads the task, the
  answer and your criteria and says PASS or FAIL.

>>> import asyncio
>>> from tether.evals import Outcome
>>> asyncio.run(contains("79").grade(Outcome("r", "finished", "I refunded $79."))).passed
True
"""

from __future__ import annotations

import inspect
import json
import math
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ..context import Context
from ..exceptions import UserError
from ..messages import Message, ToolCall
from ..tools import Tool
from .outcome import Call, Outcome

if TYPE_CHECKING:
    from ..policy import Policy


@dataclass(frozen=True, slots=True)
class ExpectedCall:
    """A tool call the agent should make: ``name`` and the arguments that must match.

    Only the arguments listed are checked (others may be present), compared
    type-tolerantly: ``"79"`` matches ``79``, ``" Paris "`` matches ``"paris"``.

    >>> ExpectedCall("get_weather", {"city": "Paris"}).to_dict()
    {'name': 'get_weather', 'arguments': {'city': 'Paris'}}
    """

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """As written in a JSON Lines case."""
        return {"name": self.name, "arguments": dict(self.arguments)}


@dataclass(frozen=True, slots=True)
class Grade:
    """A grader's verdict: ``passed``, a ``score`` in [0, 1] and a ``reason`` a person can read.

    >>> Grade(True).score
    1.0
    """

    passed: bool
    score: float | None = None
    reason: str = ""
    grader: str = ""

    def __post_init__(self) -> None:
        if self.score is None:
            object.__setattr__(self, "score", 1.0 if self.passed else 0.0)


@runtime_checkable
class Grader(Protocol):
    """Anything with a ``name`` and ``async grade(outcome) -> Grade``."""

    @property
    def name(self) -> str:
        """What reports call this grader."""
        ...

    async def grade(self, outcome: Outcome) -> Grade:
        """The verdict on one trial."""
        ...


GradeLike = Grade | bool | float | tuple[bool, str]


@dataclass(frozen=True, slots=True)
class FunctionGrader:
    """A grader made of a function of the outcome (sync or async), see :func:`function`."""

    name: str
    fn: Callable[[Outcome], GradeLike | Awaitable[GradeLike]]

    async def grade(self, outcome: Outcome) -> Grade:
        value = self.fn(outcome)
        if inspect.isawaitable(value):
            value = await value
        return _as_grade(value, self.name)


def function(fn: Callable[[Outcome], GradeLike | Awaitable[GradeLike]], name: str | None = None) -> FunctionGrader:
    """A grader from a Python function returning a Grade, a bool, a score in [0, 1] or (bool, reason).

    >>> g = function(lambda o: (o.replies <= 3, "at most three replies"), name="short")
    >>> g.name
    'short'
    """
    return FunctionGrader(name or str(getattr(fn, "__name__", "function")), fn)


def _as_grade(value: Any, name: str) -> Grade:
    if isinstance(value, Grade):
        return Grade(value.passed, value.score, value.reason, value.grader or name)
    if isinstance(value, bool):
        return Grade(value, grader=name)
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], bool):
        return Grade(value[0], reason=str(value[1]), grader=name)
    if isinstance(value, int | float) and 0 <= value <= 1:
        return Grade(value >= 0.5, float(value), grader=name)
    raise UserError(f"grader {name!r} returned {value!r}; return a Grade, a bool, a score in [0, 1] or (bool, reason)")


# -- the answer ---------------------------------------------------------------------


def exact(expected: str, *, case_sensitive: bool = False) -> FunctionGrader:
    """The answer equals ``expected`` (surrounding whitespace ignored; case too unless asked).

    >>> import asyncio
    >>> asyncio.run(exact("Paris").grade(Outcome("r", "finished", " paris "))).passed
    True
    """

    def check(o: Outcome) -> Grade:
        got = (o.output or "").strip()
        want = str(expected).strip()
        ok = got == want if case_sensitive else got.casefold() == want.casefold()
        return Grade(ok, reason="" if ok else f"expected {want!r}, got {_short(got)!r}")

    return function(check, "exact")


def contains(*needles: str, any_of: bool = False, case_sensitive: bool = False) -> FunctionGrader:
    """The answer contains every needle (or one of them with ``any_of=True``).

    A single expected value that is a list means several needles.
    """
    wanted = [str(n) for item in needles for n in (item if isinstance(item, list | tuple) else [item])]

    def check(o: Outcome) -> Grade:
        got = o.output or ""
        fold = (lambda s: s) if case_sensitive else str.casefold
        missing = [n for n in wanted if fold(n) not in fold(got)]
        found = len(wanted) - len(missing)
        ok = found > 0 if any_of else not missing
        score = (1.0 if found else 0.0) if any_of else found / max(len(wanted), 1)
        return Grade(ok, score, "" if ok else f"missing {missing} in {_short(got)!r}")

    return function(check, "contains")


def excludes(*needles: str, case_sensitive: bool = False) -> FunctionGrader:
    """The answer contains none of the needles (e.g. a claim the agent must not make)."""

    def check(o: Outcome) -> Grade:
        got = o.output or ""
        fold = (lambda s: s) if case_sensitive else str.casefold
        found = [n for n in needles if fold(n) in fold(got)]
        return Grade(not found, reason="" if not found else f"the answer says {found}: {_short(got)!r}")

    return function(check, "excludes")


def json_match(expected: Any, *, subset: bool = True) -> FunctionGrader:
    """The answer holds JSON (bare or in a fenced block) that matches ``expected``.

    With ``subset`` an object may have more keys than expected. Values compare
    type-tolerantly (:func:`same`).
    """

    def check(o: Outcome) -> Grade:
        found = find_json(o.output or "")
        if found is _NOTHING:
            return Grade(False, reason=f"no JSON in the answer {_short(o.output or '')!r}")
        ok = same(expected, found, subset=subset)
        return Grade(ok, reason="" if ok else f"expected {expected!r}, got {found!r}")

    return function(check, "json")


_NOTHING: Any = object()


def find_json(text: str) -> Any:
    """The first JSON value in ``text``: the whole text, a fenced block, or the first {...} / [...]."""
    candidates = [text, *re.findall(r"```(?:json)?\s*(.*?)```", text, flags=re.S)]
    for opener, closer in (("{", "}"), ("[", "]")):
        start, end = text.find(opener), text.rfind(closer)
        if 0 <= start < end:
            candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    return _NOTHING


# -- tool calls ---------------------------------------------------------------------


def same(expected: Any, actual: Any, *, subset: bool = True) -> bool:
    """Type-tolerant equality: ``"79" ~ 79 ~ 79.0``, ``"true" ~ True``, strings by trimmed casefold.

    Objects match when every expected key matches (``subset``) or the keys are
    the same; lists match element by element.

    >>> same({"amount": 79, "city": "Paris"}, {"amount": "79", "city": " paris", "unit": "c"})
    True
    >>> same(79, "80")
    False
    """
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping) or (not subset and set(expected) != set(actual)):
            return False
        return all(k in actual and same(v, actual[k], subset=subset) for k, v in expected.items())
    if isinstance(expected, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(expected) == len(actual)
            and all(same(e, a, subset=subset) for e, a in zip(expected, actual, strict=True))
        )
    if expected is None or actual is None:
        return expected is actual
    if isinstance(expected, bool) or isinstance(actual, bool):
        return _boolean(expected) is not None and _boolean(expected) == _boolean(actual)
    e, a = _number(expected), _number(actual)
    if e is not None and a is not None:
        return math.isclose(e, a, rel_tol=1e-9, abs_tol=1e-9)
    return str(expected).strip().casefold() == str(actual).strip().casefold()


def _boolean(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    return {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}.get(text)


def _number(value: Any) -> float | None:
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value).strip().lstrip("$"))
    except ValueError:
        return None


def tool_calls(
    expected: Sequence[ExpectedCall],
    *,
    order: Literal["any", "ordered", "exact"] = "any",
    same_reply: bool = False,
) -> FunctionGrader:
    """The agent made the expected calls (see :class:`~tether.evals.Case` for ``order`` and ``same_reply``).

    No expected calls means the agent must call no tool at all.
    """
    wanted = list(expected)

    def check(o: Outcome) -> Grade:
        made = list(o.calls)
        if not wanted:
            names = [c.name for c in made]
            return Grade(not made, reason="" if not made else f"expected no tool call, made {names}")
        groups = [[c for c in made if c.reply == r] for r in sorted({c.reply for c in made})] if same_reply else [made]
        best: tuple[int, list[ExpectedCall]] = (-1, wanted)
        for group in groups or [[]]:
            matched, missing = _match(wanted, group, order)
            if matched > best[0]:
                best = (matched, missing)
        matched, missing = best
        extra = order == "exact" and len(made) != len(wanted)
        ok = not missing and not extra
        score = matched / max(len(wanted), len(made) if extra else 0)
        return Grade(ok, score, "" if ok else _calls_reason(missing, made, same_reply, len(wanted) if extra else None))

    return function(check, "tool_calls")


def _match(wanted: list[ExpectedCall], made: list[Call], order: str) -> tuple[int, list[ExpectedCall]]:
    """How many expected calls ``made`` satisfies, and which are missing."""
    used: set[int] = set()
    missing: list[ExpectedCall] = []
    position = 0
    for want in wanted:
        start = position if order != "any" else 0
        hit = next(
            (i for i in range(start, len(made)) if i not in used and _fits(want, made[i])),
            None,
        )
        if hit is None:
            missing.append(want)
            continue
        used.add(hit)
        position = hit + 1
    return len(wanted) - len(missing), missing


def _fits(want: ExpectedCall, call: Call) -> bool:
    return call.name == want.name and same(dict(want.arguments), call.arguments)


def _calls_reason(missing: list[ExpectedCall], made: list[Call], same_reply: bool, exactly: int | None) -> str:
    """Which expected calls are missing (or that there were too many), and what was made (``@reply``)."""
    got = ", ".join(f"{c.name}({json.dumps(c.arguments, sort_keys=True)})@{c.reply}" for c in made) or "none"
    if not missing and exactly is not None:
        return f"expected exactly {exactly} call(s), made {len(made)}: {got}"
    want = ", ".join(f"{c.name}({json.dumps(dict(c.arguments), sort_keys=True)})" for c in missing)
    where = " in one reply" if same_reply else ""
    return f"missing{where}: {want}; made: {got}"


# -- the run and its world ------------------------------------------------------------


def status_is(expected: str) -> FunctionGrader:
    """The run ended with this status (``finished``, ``paused``, ``limit-reached``, ...)."""
    return function(lambda o: (o.status == expected, f"status {o.status!r}, expected {expected!r}"), "status")


def not_called(name: str) -> FunctionGrader:
    """The agent never called tool ``name`` (a refund the request did not warrant, say)."""

    def check(o: Outcome) -> Grade:
        made = [c for c in o.calls if c.name == name]
        return Grade(not made, reason="" if not made else f"called {name} {len(made)} time(s): {made[0].arguments}")

    return function(check, f"not_called({name})")


def claims_grounded(tools: Sequence[Tool]) -> FunctionGrader:
    """The answer claims no action of a gated or ``once`` tool that did not finish in the run
    (the journal's calls, read with :func:`tether.grounding.no_unbacked_claims`)."""
    from ..grounding import Ran, RanCall, Refuse, no_unbacked_claims

    check_text, by_name = no_unbacked_claims(), {t.name: t for t in tools}

    def check(o: Outcome) -> Grade:
        ran = Ran(
            tuple(RanCall(ToolCall(c.id, c.name, json.dumps(c.arguments)), _outcome(c)) for c in o.calls), by_name
        )
        try:
            check_text(o.output or "", ran)
        except Refuse as claim:
            return Grade(False, reason=f"an action claimed with no call behind it: {claim}")
        return Grade(True)

    return function(check, "claims_grounded")


def _outcome(call: Call) -> Literal["finished", "failed", "waiting"]:
    if call.result is None:
        return "waiting"
    return "failed" if call.error else "finished"


def file_contains(path: str, text: str | None = None, *, exists: bool = True) -> FunctionGrader:
    """A file in the trial's working directory exists (or not) and contains ``text``."""

    def check(o: Outcome) -> Grade:
        if o.workdir is None:
            return Grade(False, reason="the trial had no working directory")
        target = o.workdir / path
        if not exists:
            return Grade(not target.exists(), reason=f"{path!r} should not exist")
        if not target.is_file():
            return Grade(False, reason=f"{path!r} does not exist")
        body = target.read_text(encoding="utf-8", errors="replace")
        ok = text is None or text in body
        return Grade(ok, reason="" if ok else f"{path!r} does not contain {text!r}: {_short(body)!r}")

    return function(check, f"file:{path}")


# -- a language model as judge ---------------------------------------------------------

JUDGE_INSTRUCTIONS = (
    "You grade the answer an AI assistant gave to a task. Read the task, the answer and the criteria. "
    "Reply with PASS or FAIL as the first word, then one short sentence saying why."
)


def judge(policy: Policy, criteria: str, *, name: str = "judge") -> FunctionGrader:
    """A grader that asks ``policy`` (any brain: a provider, the local model, a script) for PASS or FAIL.

    >>> from tether.testing import ScriptedModel
    >>> import asyncio
    >>> g = judge(ScriptedModel(["PASS: it names the amount"]), "names the refunded amount")
    >>> asyncio.run(g.grade(Outcome("r", "finished", "I refunded $79."))).passed
    True
    """

    async def check(o: Outcome) -> Grade:
        prompt = f"Task:\n{o.task}\n\nAnswer:\n{o.output or '(no answer)'}\n\nCriteria:\n{criteria}"
        context = Context([Message.system(JUDGE_INSTRUCTIONS), Message.user(prompt)])
        reply = (await policy.decide(context, ())).text.strip()
        verdict = _verdict(reply)
        if verdict is None:
            return Grade(False, reason=f"the judge said neither PASS nor FAIL: {_short(reply)!r}")
        return Grade(verdict, reason=_short(reply, 200))

    return function(check, name)


def _verdict(reply: str) -> bool | None:
    word = re.match(r"\W*(\w+)", reply)
    first = word.group(1).upper() if word else ""
    if first in ("PASS", "PASSED", "YES"):
        return True
    if first in ("FAIL", "FAILED", "NO"):
        return False
    found = find_json(reply)
    if isinstance(found, Mapping) and isinstance(found.get("pass"), bool):
        return bool(found["pass"])
    return None


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
