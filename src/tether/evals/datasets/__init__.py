"""The task set we ship: small, honest, deterministic, for agents written with tether.

=================  ==========================================================
``refund-desk``    the first seed's support desk; a human approves or denies
``weather-desk``   the second seed's weather look-ups and an email that waits
``toolbox``        tool choice among six tools; several calls in one reply
``no-tool``        questions none of the offered (finance) tools fits
``workspace``      file tasks on the built-in workspace toolkit, fresh folder
``support-phrasings`` 45 support requests worded as customers word them, graded
                   on the journal: the gated refund called when it should be, never
                   claimed without its call
``tether-tasks``   all of the above (select parts with tags)
=================  ==========================================================

Tags: ``seed``, ``refund``, ``weather``, ``tool-choice``, ``several-calls``,
``no-tool``, ``workspace``, ``approval``, ``denial``, ``error``, ``phrasing``,
``outside-policy``, ``look-up``. Cases are JSON
Lines files beside this module (the format of :func:`~tether.evals.load_jsonl`);
each carries reference replies, so ``reference_brain`` solves every case.
The body around the brain is :func:`~tether.evals.datasets.bodies.make_agent`.

>>> ds = load("toolbox")
>>> sorted({t for c in ds.cases for t in c.tags})
['several-calls', 'tool-choice']
"""

from __future__ import annotations

import dataclasses
from importlib import resources

from ...exceptions import UserError
from ..cases import Case, Dataset, load_jsonl
from ..graders import claims_grounded, file_contains, not_called
from .bodies import BODIES, make_agent

__all__ = ["load", "make_agent", "names"]

FILES = {
    "refund-desk": "refund_desk.jsonl",
    "weather-desk": "weather_desk.jsonl",
    "toolbox": "toolbox.jsonl",
    "no-tool": "no_tool.jsonl",
    "workspace": "workspace.jsonl",
    "support-phrasings": "support_phrasings.jsonl",
}
ALL = "tether-tasks"


def names() -> list[str]:
    """The names :func:`load` knows.

    >>> names()[-1]
    'tether-tasks'
    """
    return [*FILES, ALL]


def load(name: str) -> Dataset:
    """A shipped dataset by name, with its body (``Dataset.agent``) ready for a brain."""
    if name == ALL:
        cases = [c for n in FILES for c in load(n).cases]
        return Dataset(ALL, cases, make_agent, "every shipped task")
    fname = FILES.get(name)
    if fname is None:
        raise UserError(f"no shipped dataset {name!r}; known: {', '.join(names())}")
    with resources.as_file(resources.files(__package__) / fname) as path:
        ds = load_jsonl(path, name=name, agent=make_agent)
        about = _description(path)
    return Dataset(name, [_with_journal_graders(_with_file_graders(c)) for c in ds.cases], make_agent, about)


def _with_file_graders(case: Case) -> Case:
    """Cases that change a file say which in ``data``; grade the file the agent left."""
    path = case.data.get("file")
    if path is None:
        return case
    if case.data.get("file_absent"):
        grader = file_contains(path, exists=False)
    else:
        grader = file_contains(path, case.data.get("file_contains"))
    return dataclasses.replace(case, extra=(*case.extra, grader))


def _with_journal_graders(case: Case) -> Case:
    """Cases that say whether a refund is due (``data.refund``) are graded on what ran: no refund
    called when none is due, and no answer that claims an action whose call did not finish."""
    if "refund" not in case.data:
        return case
    graders = [claims_grounded(BODIES["refund"][0](None))]  # type: ignore[arg-type]
    if not case.data["refund"]:
        graders.append(not_called("issue_refund"))
    return dataclasses.replace(case, extra=(*case.extra, *graders))


def _description(path: object) -> str:
    with open(str(path), encoding="utf-8") as f:
        first = f.readline()
    return first[2:].strip() if first.startswith("//") else ""
