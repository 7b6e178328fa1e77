"""Answers checked against what ran: output validators that see the run's journal.

A validator on ``T`` alone cannot tell ``RefundOutcome(refunded=True)`` from
the truth: the value looks fine whether or not a refund ran. Here a validator
is ``check(value, ran)``. ``value`` is the run's answer (the typed value with
``output_type``, else the text), and ``ran`` is a read-only :class:`Ran`: every call
the run made, with its arguments and how it ended (finished, failed, denied,
skipped, unknown, waiting). A validator that raises :class:`Refuse` sends its
message back to the model as a note; the answer does not reach the caller,
and after ``output_retries`` refusals the run fails with ``OutputInvalid``.

Two shorthands cover the common cases:

* :func:`requires`: ``requires("issue_refund", when="refunded", same=["order_id"])``:
  an output whose ``refunded`` is true needs a *finished* ``issue_refund``
  call with the output's ``order_id``;
* :func:`no_unbacked_claims`: a text answer that says a gated or ``once`` tool's
  action happened ("refunded", "deleted", "sent") while no call of it finished.

>>> from tether.messages import ToolCall
>>> ran = Ran((RanCall(ToolCall("c1", "issue_refund", '{"order_id": "A1"}'), "denied", "no"),))
>>> check = requires("issue_refund", when="refunded", same=["order_id"])
>>> check({"order_id": "A1", "refunded": False}, ran)   # claims nothing: fine
>>> try:
...     check({"order_id": "A1", "refunded": True}, ran)
... except Refuse as no:
...     print(no)
the output says refunded, but no issue_refund call with order_id='A1' finished in this run \
(issue_refund calls made: 1, denied); make the call and wait for its result, or answer without claiming it
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .messages import ToolCall
from .tools import Tool

__all__ = ["Outcome", "Ran", "RanCall", "Refuse", "Validator", "no_unbacked_claims", "requires"]

Outcome = Literal["finished", "failed", "denied", "skipped", "unknown", "waiting"]
"""How a call ended: ``unknown`` started and never finished (a crash); ``waiting`` waits for a person."""


class Refuse(Exception):
    """Raised by a validator: the answer is refused, and this message is the note the model reads."""


@dataclass(frozen=True, slots=True)
class RanCall:
    """One call of the run: the call (with the arguments it ran with), how it ended, its result text."""

    call: ToolCall
    outcome: Outcome
    result: str = ""

    @property
    def name(self) -> str:
        return self.call.name

    @property
    def args(self) -> dict[str, Any]:
        """The call's arguments as JSON (``{}`` when they are not a JSON object)."""
        try:
            args = json.loads(self.call.arguments or "{}")
        except ValueError:
            return {}
        return args if isinstance(args, dict) else {}


@dataclass(frozen=True)
class Ran:
    """What a run did, as a validator sees it: its calls in order, and the tools the agent has."""

    calls: tuple[RanCall, ...]
    tools: Mapping[str, Tool] = field(default_factory=dict)

    def of(self, name: str) -> list[RanCall]:
        """Every call of tool ``name``, in order."""
        return [c for c in self.calls if c.name == name]

    def finished(self, name: str, **args: Any) -> list[RanCall]:
        """The calls of ``name`` that finished (ran without error) with these argument values."""
        return [c for c in self.of(name) if c.outcome == "finished" and _matches(c.args, args)]


Validator = Callable[[Any, Ran], None]
"""``check(value, ran)``: return to accept the answer, raise :class:`Refuse` to send it back."""


def requires(
    tool: str, *, when: str | Callable[[Any], bool] | None = None, same: Sequence[str] | Mapping[str, str] = ()
) -> Validator:
    """A validator: an output that claims ``tool``'s effect needs a finished call of it behind it.

    ``when`` says when the output claims it: a field name (its value is truthy) or a
    function of the value; None means always. ``same`` names the fields that must
    equal the call's arguments: ``["order_id"]``, or ``{"field": "argument"}`` when
    the names differ.
    """
    pairs = dict(same) if isinstance(same, Mapping) else {name: name for name in same}

    def check(value: Any, ran: Ran) -> None:
        claims = when(value) if callable(when) else (when is None or bool(_field(value, when)))
        if not claims:
            return
        wanted = {arg: _field(value, name) for name, arg in pairs.items()}
        if ran.finished(tool, **wanted):
            return
        what = f"the output says {when}" if isinstance(when, str) else f"the output claims {tool} ran"
        with_args = " with " + ", ".join(f"{a}={v!r}" for a, v in wanted.items()) if wanted else ""
        made = ran.of(tool)
        seen = f"{tool} calls made: {len(made)}" + "".join(f", {c.outcome}" for c in made)
        raise Refuse(
            f"{what}, but no {tool} call{with_args} finished in this run ({seen}); "
            "make the call and wait for its result, or answer without claiming it"
        )

    check.requires = (tool, when, pairs)  # type: ignore[attr-defined]  # checked against the agent when built
    return check


def no_unbacked_claims(words: Mapping[str, Iterable[str]] | None = None) -> Validator:
    """A validator for text answers: refuse one that says an acting tool's action happened
    while no call of that tool finished.

    The acting tools are those with ``effect="once"`` or an approval rule. Each is
    known by the words its name gives (``issue_refund``: "refunded", "issued", "the
    refund has been processed", ...), or by the phrases in ``words`` (tool name ->
    phrases), which replace them. A clause that negates, asks or makes a condition
    ("not", "cannot", "if", "once", "needs", "?") claims nothing. It is a guard
    against the plain false claim, not a reader of every sentence: see docs/grounding.md.
    """
    given = {name: tuple(p.lower() for p in phrases) for name, phrases in (words or {}).items()}

    def check(value: Any, ran: Ran) -> None:
        if not isinstance(value, str):
            return
        sentences = [s for s in re.split(_SENTENCE, value.lower()) if not re.search(_CONDITION, s)]
        clauses = [c for s in sentences for c in re.split(_CLAUSE, s) if c.strip() and not re.search(_HEDGE, c)]
        for name, tool in ran.tools.items():
            if not (tool.effect == "once" or tool.approval) or tool.is_question or ran.finished(name):
                continue
            found = _claim(clauses, given.get(name), name)
            if found:
                raise Refuse(
                    f"your answer says that {name}'s action happened ({found!r}), but no {name} call finished "
                    "in this run; call the tool and wait for its result (it may need a person's approval), "
                    "or answer without saying it happened"
                )

    return check


def refusal(checks: Sequence[Validator], value: Any, ran: Ran) -> str | None:
    """The first refusal among ``checks`` of ``value``, or None: the answer stands.

    A validator that raises anything but :class:`Refuse` is a bug of the
    validator, not of the answer: it propagates and fails the run.
    """
    for check in checks:
        try:
            check(value, ran)
        except Refuse as no:
            return str(no) or f"the answer was refused by {getattr(check, '__name__', 'a validator')}"
    return None


def check_validators(
    validators: Iterable[Any], retries: Any, tools: Mapping[str, Tool], output: Any
) -> tuple[Validator, ...]:
    """The agent's ``output_validators`` as a tuple, each callable, and ``output_retries`` a whole
    number >= 0 (else a UserError naming what is wrong). A :func:`requires` must name one of the
    agent's tools and, when it reads fields, fields of its output type: a typo would otherwise
    turn the guard off (a field never set) or refuse every answer (a tool never called)."""
    from .exceptions import UserError

    if not (isinstance(retries, int) and not isinstance(retries, bool) and retries >= 0):
        raise UserError(f"output_retries must be a whole number >= 0, got {retries!r}")
    out = tuple(validators)
    if bad := [v for v in out if not callable(v)]:
        raise UserError(f"output_validators must be functions of (value, ran), got {bad!r}")
    for v in out:
        if (spec := getattr(v, "requires", None)) is not None:
            tool, when, pairs = spec
            _check_requires(tool, when, pairs, tools, output)
    return out


def _check_requires(tool: str, when: Any, pairs: Mapping[str, str], tools: Mapping[str, Tool], output: Any) -> None:
    from .exceptions import UserError

    if tool not in tools:
        raise UserError(f"requires({tool!r}): the agent has no tool {tool!r}; its tools: {', '.join(sorted(tools))}")
    fields = [*([when] if isinstance(when, str) else []), *pairs]
    if not fields:
        return
    if output is None:
        raise UserError(f"requires({tool!r}) reads the fields {fields} of a typed output: give the agent output_type=")
    known = output.schema.get("properties", {}) if not output.wrapped else {}
    if missing := [f for f in fields if f not in known]:
        raise UserError(f"requires({tool!r}): the output type has no field {missing[0]!r}; its fields: {sorted(known)}")
    for name, arg in pairs.items():
        if arg not in tools[tool].parameters.get("properties", {}):
            raise UserError(f"requires({tool!r}): the tool has no argument {arg!r} to compare with {name!r}")


# -- how a text claims an action ----------------------------------------------------------------

# The patterns are compiled on first use: ``import tether`` compiles no regex of this module.
_SENTENCE = r"[.;!\n]"
_CONDITION = r"\?|\b(if|once|unless|until|after|when|whenever|before)\b"  # holds for the whole sentence
_CLAUSE = r",| and | but |:"
_HEDGE = (
    r"\b(not|no|never|cannot|can't|won't|unable|need|needs|requires?|required|pending|awaiting|waiting|"
    r"would|could|should|can|may|might|request|requested|ask|asked|approve|approval)\b|n't\b"
)
_GENERIC = {"get", "list", "read", "find", "search", "look", "lookup", "check", "show", "fetch", "tool", "do", "run"}
_IRREGULAR = {"send": "sent", "pay": "paid", "make": "made", "buy": "bought", "write": "written", "put": "put"}
_DONE = (
    r"((has|have|was|were|is|are|will be|'s|'ve)( now)?( been)? )?(issued|processed|sent|made|completed|done|"
    r"submitted|initiated|placed|created|deleted|cancelled|canceled|executed|transferred|paid)"
)


def _claim(clauses: list[str], phrases: tuple[str, ...] | None, name: str) -> str:
    """The first words in ``clauses`` that claim tool ``name`` acted ("" when none do)."""
    if phrases is not None:
        patterns = [re.compile(r"\b" + re.escape(p) + r"\b") for p in phrases]
    else:
        stems = [w for w in name.lower().split("_") if len(w) > 2 and w not in _GENERIC]
        patterns = [re.compile(rf"\b({_past(w)})\b") for w in stems]
        patterns += [re.compile(rf"\b{re.escape(w)}s? {_DONE}\b") for w in stems]
    for clause in clauses:
        for pattern in patterns:
            if m := pattern.search(clause):
                return m.group(0)
    return ""


def _past(word: str) -> str:
    """The past forms of a verb, as a regex alternation (``refund``: refunded; ``stop``: stopped)."""
    forms = {word + "d" if word.endswith("e") else word + "ed", _IRREGULAR.get(word, word + "ed")}
    if re.fullmatch(r".*[^aeiou][aeiou][bdgklmnprt]", word):
        forms.add(word + word[-1] + "ed")  # stop -> stopped, transfer -> transferred
    if word.endswith("y") and len(word) > 3 and word[-2] not in "aeiou":
        forms.add(word[:-1] + "ied")  # apply -> applied
    return "|".join(re.escape(f) for f in sorted(forms))


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)


def _matches(args: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether ``args`` has each wanted value (compared as text too: "79" matches 79)."""
    return all(k in args and (args[k] == v or str(args[k]) == str(v)) for k, v in wanted.items())
