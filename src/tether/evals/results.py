"""The values a report is made of: one result per trial, and the figures computed from them.

:class:`TrialResult` is what a grade record keeps; :class:`CaseSummary` and
:class:`Summary` are computed (:func:`case_summary`, :func:`summarise`).
:class:`ReportView` is what the renderers read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from ..exceptions import UserError
from . import _stats
from .graders import Grade


@dataclass(frozen=True, slots=True)
class TrialResult:
    """One trial of one case: verdict, grades, and what it cost.

    ``replies`` counts model replies (the run's steps); ``read_back`` says the
    result came from the store (a resumed evaluation) rather than a new run.
    """

    case_id: str
    trial: int
    run_id: str
    passed: bool
    score: float
    status: str
    output: str | None = None
    grades: tuple[Grade, ...] = ()
    replies: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    cost: float | None = None
    error: str | None = None
    tags: tuple[str, ...] = ()
    digest: str = ""
    read_back: bool = field(default=False, compare=False)

    @property
    def tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (what a grade record and a report keep)."""
        data = asdict(self)
        data["grades"] = [asdict(g) for g in self.grades]
        data["tags"] = list(self.tags)
        del data["read_back"]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, read_back: bool = False) -> TrialResult:
        """The result :meth:`to_dict` described; UserError if malformed."""
        try:
            fields = dict(data)
            fields["grades"] = tuple(Grade(**g) for g in fields.get("grades", ()))
            fields["tags"] = tuple(fields.get("tags", ()))
            return cls(**fields, read_back=read_back)
        except TypeError as exc:
            raise UserError(f"malformed trial result: {exc}") from None


@dataclass(frozen=True, slots=True)
class CaseSummary:
    """One case over its trials."""

    case_id: str
    tags: tuple[str, ...]
    trials: int
    passes: int
    pass_at: dict[int, float]
    score: float
    score_spread: float
    replies: float
    tokens: float
    seconds: float
    reasons: tuple[str, ...]

    @property
    def pass_rate(self) -> float:
        """The fraction of this case's trials that passed."""
        return self.passes / self.trials if self.trials else 0.0


@dataclass(frozen=True, slots=True)
class Summary:
    """The whole evaluation: ``accuracy`` is the mean over every trial; ``accuracy_spread``
    the standard deviation of the accuracy of each trial round (0 with one trial)."""

    cases: int
    trials: int
    accuracy: float
    accuracy_spread: float
    pass_at: dict[int, float]
    replies: float
    tool_calls: float
    input_tokens: int
    output_tokens: int
    cost: float | None
    seconds_mean: float
    seconds_p50: float
    seconds_p95: float
    errors: int
    read_back: int
    by_tag: dict[str, float]


class ReportView(Protocol):
    """What the table and the HTML page read from a report."""

    name: str
    label: str
    created_at: float
    results: tuple[TrialResult, ...]

    def summary(self) -> Summary:
        """The overall figures."""
        ...

    def cases(self) -> list[CaseSummary]:
        """One summary per case."""
        ...


def case_summary(case_id: str, trials: list[TrialResult]) -> CaseSummary:
    n, c = len(trials), sum(t.passed for t in trials)
    reasons = [g.reason for t in trials for g in t.grades if not g.passed and g.reason]
    reasons += [t.error for t in trials if t.error]
    return CaseSummary(
        case_id=case_id,
        tags=trials[0].tags,
        trials=n,
        passes=c,
        pass_at={k: _stats.pass_at_k(n, c, k) for k in range(1, n + 1)},
        score=_stats.mean([t.score for t in trials]),
        score_spread=_stats.spread([t.score for t in trials]),
        replies=_stats.mean([t.replies for t in trials]),
        tokens=_stats.mean([t.tokens for t in trials]),
        seconds=_stats.mean([t.seconds for t in trials]),
        reasons=tuple(dict.fromkeys(reasons)),
    )


def by_tag(results: Iterable[TrialResult]) -> dict[str, float]:
    tags: dict[str, list[float]] = {}
    for r in results:
        for tag in r.tags:
            tags.setdefault(tag, []).append(float(r.passed))
    return {tag: _stats.mean(v) for tag, v in sorted(tags.items())}
