"""Evaluating agents: datasets of cases, graders, repeated trials, reports.

* :class:`Case`, :class:`Dataset`, :func:`load_jsonl`: what to ask and how to
  grade it; :mod:`tether.evals.datasets` ships a small task set.
* :mod:`~tether.evals.graders`: exact, contains, JSON, tool calls, status,
  files, a Python function, an LLM judge.
* :func:`evaluate` / :func:`evaluate_sync`: run each case ``trials`` times
  (in parallel, bounded), record every run in a store (run ids
  ``eval:<name>:<case>:<trial>``, so an interrupted evaluation resumes), grade.
* :class:`Report`: per-case and summary figures; a terminal table, JSON and an
  HTML page with plots; :func:`compare` says which cases regressed.

>>> from tether import Agent
>>> from tether.testing import ScriptedModel
>>> cases = [Case("capital", "Capital of France?", expected="Paris", match="contains")]
>>> report = evaluate_sync(cases, lambda s: Agent(ScriptedModel(["It is Paris."]), store=s.store))
>>> report.summary().accuracy
1.0
"""

from __future__ import annotations

from . import graders
from ._loading import load_dataset
from .cases import Case, Dataset, Setup, load_jsonl, reference_brain
from .compare import Comparison, compare
from .graders import ExpectedCall, Grade, Grader
from .harness import Price, evaluate, evaluate_sync, run_id_for
from .outcome import Call, Outcome
from .report import Report, load_report
from .results import CaseSummary, Summary, TrialResult

__all__ = [
    "Call",
    "Case",
    "CaseSummary",
    "compare",
    "Comparison",
    "Dataset",
    "evaluate",
    "evaluate_sync",
    "ExpectedCall",
    "Grade",
    "Grader",
    "graders",
    "load_dataset",
    "load_jsonl",
    "load_report",
    "Outcome",
    "Price",
    "reference_brain",
    "Report",
    "run_id_for",
    "Setup",
    "Summary",
    "TrialResult",
]
