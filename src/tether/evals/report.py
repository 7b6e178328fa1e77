"""Reports: every trial's result, per-case and overall figures, and the files they go to.

A :class:`Report` holds one :class:`TrialResult` per (case, trial). From them
it computes a :class:`CaseSummary` per case (pass rate, pass@k, means) and a
:class:`Summary` (accuracy with its spread across trial rounds, pass@k, steps,
tokens, cost when a price is known, latency percentiles, accuracy per tag).
It renders as a terminal table (:meth:`Report.table`), JSON
(:meth:`Report.to_json`) and a self-contained HTML page with inline SVG plots
(:meth:`Report.html`); :meth:`Report.save` picks by the file's suffix and
:func:`load_report` reads a JSON report back (for :func:`~tether.evals.compare`).

>>> r = Report("demo", [TrialResult("a", 0, "eval:demo:a:0", True, 1.0, "finished", "hi")])
>>> r.summary().accuracy
1.0
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..exceptions import UserError
from ..parts import safe_text
from . import _html, _render, _stats
from .results import CaseSummary, Summary, TrialResult, by_tag, case_summary

__all__ = ["CaseSummary", "Report", "Summary", "TrialResult", "load_report"]

SCHEMA_VERSION = 1


class Report:
    """The results of one evaluation (see the module docstring)."""

    def __init__(
        self,
        name: str,
        results: Iterable[TrialResult],
        *,
        label: str = "",
        created_at: float | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.label = label
        given = list(results)
        first = {cid: i for i, cid in enumerate(dict.fromkeys(r.case_id for r in given))}
        self.results = tuple(sorted(given, key=lambda r: (first[r.case_id], r.trial)))  # cases in dataset order
        self.created_at = time.time() if created_at is None else created_at
        self.meta = dict(meta or {})

    def __repr__(self) -> str:
        s = self.summary()
        return f"Report({self.name!r}, {s.cases} cases, {s.trials} trials, accuracy {s.accuracy:.0%})"

    def by_case(self) -> dict[str, list[TrialResult]]:
        """Trial results grouped by case, in case order."""
        groups: dict[str, list[TrialResult]] = {}
        for r in self.results:
            groups.setdefault(r.case_id, []).append(r)
        return groups

    def cases(self) -> list[CaseSummary]:
        """One :class:`CaseSummary` per case."""
        return [case_summary(cid, trials) for cid, trials in self.by_case().items()]

    def summary(self) -> Summary:
        """The overall figures."""
        rs = self.results
        groups = self.by_case()
        k_max = min((len(t) for t in groups.values()), default=0)
        rounds: dict[int, list[float]] = {}
        for r in rs:
            rounds.setdefault(r.trial, []).append(float(r.passed))
        costs = [r.cost for r in rs if r.cost is not None]
        seconds = [r.seconds for r in rs]
        cases = self.cases()
        return Summary(
            cases=len(groups),
            trials=len(rs),
            accuracy=_stats.mean([float(r.passed) for r in rs]),
            accuracy_spread=_stats.spread([_stats.mean(v) for v in rounds.values()]),
            pass_at={k: _stats.mean([c.pass_at[k] for c in cases]) for k in range(1, k_max + 1)},
            replies=_stats.mean([r.replies for r in rs]),
            tool_calls=_stats.mean([r.tool_calls for r in rs]),
            input_tokens=sum(r.input_tokens for r in rs),
            output_tokens=sum(r.output_tokens for r in rs),
            cost=sum(costs) if costs else None,
            seconds_mean=_stats.mean(seconds),
            seconds_p50=_stats.percentile(seconds, 50),
            seconds_p95=_stats.percentile(seconds, 95),
            errors=sum(r.error is not None for r in rs),
            read_back=sum(r.read_back for r in rs),
            by_tag=by_tag(rs),
        )

    # -- files --------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data: results, per-case figures and the summary."""
        summary = asdict(self.summary())
        return {
            "schema_version": SCHEMA_VERSION,
            "name": self.name,
            "label": self.label,
            "created_at": self.created_at,
            "meta": self.meta,
            "summary": summary,
            "cases": [asdict(c) for c in self.cases()],
            "results": [r.to_dict() for r in self.results],
        }

    def to_json(self, indent: int | None = 2) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False, ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Report:
        """A report from :meth:`to_dict` data (figures are recomputed from the results)."""
        if not isinstance(data, Mapping) or data.get("schema_version") != SCHEMA_VERSION:
            raise UserError(f"not a tether eval report (schema_version {SCHEMA_VERSION} expected)")
        results = [TrialResult.from_dict(r) for r in data.get("results", ())]
        return cls(
            str(data.get("name", "")),
            results,
            label=str(data.get("label", "")),
            created_at=float(data.get("created_at", 0.0)),
            meta=data.get("meta") or {},
        )

    def table(self, *, width: int = 100) -> str:
        """A plain-text table: one line per case, then the summary."""
        return _render.table(self, width=width)

    def html(self) -> str:
        """A self-contained HTML page (inline CSS and SVG; no scripts, nothing fetched)."""
        return safe_text(_html.page(self))  # a lone surrogate in an output or a reason is shown as U+FFFD

    def save(self, path: str | Path) -> Path:
        """Write the report as ``.json``, ``.html`` or ``.txt`` (by the suffix)."""
        path = Path(path)
        writers = {".json": self.to_json, ".html": self.html, ".txt": self.table}
        writer = writers.get(path.suffix.lower())
        if writer is None:
            raise UserError(f"cannot tell the report format of {str(path)!r}: use .json, .html or .txt")
        path.parent.mkdir(parents=True, exist_ok=True)
        text = safe_text(writer())  # every format can be written, whatever text the runs held
        path.write_text(text + ("\n" if path.suffix != ".html" else ""), encoding="utf-8")
        return path


def load_report(path: str | Path) -> Report:
    """A report saved as JSON by :meth:`Report.save`."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read report {str(path)!r}: {exc.strerror}") from None
    except ValueError as exc:
        raise UserError(f"report {str(path)!r} is not JSON: {exc}") from None
    return Report.from_dict(data)
