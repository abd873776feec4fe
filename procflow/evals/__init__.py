"""Evals: datasets of cases, scorers, and experiments that are stored, durable runs.

::

    from procflow.evals import Case, Contains, Dataset

    capitals = Dataset("capitals", cases=[Case(input="Capital of France?", expected="Paris")],
                       scorers=[Contains()])
    report = await capitals.evaluate(agent, concurrency=8)
    report.cases[0].scores      # {"Contains": 1.0}
    report.averages             # {"Contains": 1.0}

From the terminal: ``procflow eval ev.py:capitals --target ev.py:agent --fail-under 0.9``.
"""

from __future__ import annotations

from procflow.evals.dataset import Case, Dataset
from procflow.evals.experiment import load_report
from procflow.evals.guards import NoInjection, NoPII
from procflow.evals.judge import LLMJudge
from procflow.evals.online import score_runs
from procflow.evals.report import CaseResult, EvaluationReport, Failure, ScoreChange, compare
from procflow.evals.scorers import (
    Contains,
    ExactMatch,
    IsInstance,
    MatchesSchema,
    MaxCost,
    MaxLatency,
    Regex,
    ToolArgs,
    ToolCalled,
)
from procflow.evals.scoring import Score, ScoreContext, Scorer, scorer

__all__ = [
    "Case",
    "CaseResult",
    "Contains",
    "Dataset",
    "EvaluationReport",
    "ExactMatch",
    "Failure",
    "IsInstance",
    "LLMJudge",
    "MatchesSchema",
    "MaxCost",
    "MaxLatency",
    "NoInjection",
    "NoPII",
    "Regex",
    "Score",
    "ScoreChange",
    "ScoreContext",
    "Scorer",
    "ToolArgs",
    "ToolCalled",
    "compare",
    "load_report",
    "score_runs",
    "scorer",
]
