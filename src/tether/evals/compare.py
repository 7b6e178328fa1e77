"""Comparing two reports: which cases got worse, which got better.

A case *regressed* when its pass rate fell (all trials passed before and not
now, or fewer passed), *improved* when it rose. Cases only in one report are
listed as added or removed.

>>> from tether.evals import Report, TrialResult
>>> old = Report("e", [TrialResult("a", 0, "r", True, 1.0, "finished")])
>>> new = Report("e", [TrialResult("a", 0, "r", False, 0.0, "finished")])
>>> compare(old, new).regressed
('a',)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..exceptions import UserError
from .report import Report


@dataclass(frozen=True, slots=True)
class Change:
    """One case in both reports: pass rates before and after."""

    case_id: str
    before: float
    after: float


@dataclass(frozen=True, slots=True)
class Comparison:
    """What changed between two reports (see the module docstring)."""

    changes: tuple[Change, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]
    accuracy_before: float
    accuracy_after: float

    @property
    def regressed(self) -> tuple[str, ...]:
        """Cases whose pass rate fell."""
        return tuple(c.case_id for c in self.changes if c.after < c.before)

    @property
    def improved(self) -> tuple[str, ...]:
        """Cases whose pass rate rose."""
        return tuple(c.case_id for c in self.changes if c.after > c.before)

    def table(self) -> str:
        """The comparison as text: the accuracy line, then each case that moved."""
        lines = [f"accuracy {self.accuracy_before:.0%} -> {self.accuracy_after:.0%}"]
        for c in self.changes:
            if c.after != c.before:
                word = "REGRESSED" if c.after < c.before else "improved"
                lines.append(f"  {word:<9}  {c.case_id}: {c.before:.0%} -> {c.after:.0%}")
        lines += [f"  added      {cid}" for cid in self.added]
        lines += [f"  removed    {cid}" for cid in self.removed]
        if len(lines) == 1:
            lines.append("  no case changed")
        return "\n".join(lines)


def compare(before: Report, after: Report) -> Comparison:
    """How ``after`` differs from ``before``, case by case.

    Reports of two different datasets, or with no case in common, are refused
    (:class:`UserError`): their accuracies do not measure the same thing.
    """
    sets = (before.meta.get("dataset"), after.meta.get("dataset"))
    if all(sets) and sets[0] != sets[1]:
        raise UserError(
            f"the reports are of different datasets ({sets[0]!r} and {sets[1]!r}): compare two runs of one dataset"
        )
    old = {c.case_id: c.pass_rate for c in before.cases()}
    new = {c.case_id: c.pass_rate for c in after.cases()}
    if old and new and not old.keys() & new.keys():
        names = f"{before.name!r} and {after.name!r}"
        raise UserError(f"the reports {names} share no case: compare two runs of one dataset")
    changes = tuple(Change(cid, old[cid], new[cid]) for cid in new if cid in old)
    return Comparison(
        changes=changes,
        added=tuple(cid for cid in new if cid not in old),
        removed=tuple(cid for cid in old if cid not in new),
        accuracy_before=before.summary().accuracy,
        accuracy_after=after.summary().accuracy,
    )
