"""What an experiment gives: one ``CaseResult`` per case run, gathered in an
``EvaluationReport`` (averages, failures, a plain table), and ``compare`` of two."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CaseResult", "EvaluationReport", "Failure", "ScoreChange", "compare"]


class CaseResult(BaseModel):
    """One run of one case, scored (stored as the experiment's item result).

    Attributes:
        name: The case's name.
        index: The case's position in the dataset, from 0.
        repeat: Which of the ``repeat`` runs of the case this is, from 0.
        input: The case's input.
        expected: The case's expected answer.
        output: What the target gave, as JSON-ready data (``None`` when it failed).
        scores: Scorer name -> value in [0, 1]; ``None`` for a skip or a scorer error.
        reasons: Scorer name -> why, where the scorer said.
        errors: Scorer name -> the error it raised (the experiment went on).
        error: Why the target failed, if it did (every score is then 0).
        duration: Seconds the target took.
        usage: Tokens spent (``Usage.to_dict()``), when a model was called.
        cost: US dollars, when known.
        run_id: The case's own stored run (an agent's or a workflow's), if any.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    index: int
    repeat: int = 0
    input: Any = None
    expected: Any = None
    output: Any = None
    scores: dict[str, float | None] = Field(default_factory=dict)
    reasons: dict[str, str] = Field(default_factory=dict)
    errors: dict[str, str] = Field(default_factory=dict)
    error: str | None = None
    duration: float = 0.0
    usage: dict[str, int] | None = None
    cost: float | None = None
    run_id: str | None = None

    @property
    def label(self) -> str:
        """The case's name, with ``#<n>`` for the repeats after the first."""
        return self.name if self.repeat == 0 else f"{self.name}#{self.repeat + 1}"


@dataclass(frozen=True, slots=True)
class Failure:
    """A case whose target failed (``scorer`` is ``None``) or one of whose scorers raised.

    Attributes:
        case: The case's label.
        scorer: The scorer that raised, or ``None`` when the target failed.
        error: The error, one line.
    """

    case: str
    scorer: str | None
    error: str


@dataclass(frozen=True, slots=True)
class EvaluationReport:
    """The result of an experiment (``await dataset.evaluate(...)``, or a stored one
    read with ``load_report``).

    Attributes:
        dataset: The dataset's id.
        scorers: The scorers' names, in the dataset's order.
        run_id: The experiment's stored run.
        status: The run's status ("success" once every case ran; "running" or
            "failed" for an experiment that stopped part way).
        cases: One ``CaseResult`` per case run, in dataset order (repeats together).
    """

    dataset: str
    scorers: list[str]
    run_id: str
    status: str
    cases: list[CaseResult] = field(default_factory=list)

    @property
    def workflow_id(self) -> str:
        """The workflow the experiment is a run of: ``eval:<dataset>``."""
        return f"eval:{self.dataset}"

    @property
    def averages(self) -> dict[str, float | None]:
        """Scorer name -> the mean of its scores over the cases (skips and scorer errors
        left out; ``None`` when it has no score at all)."""
        out: dict[str, float | None] = {}
        for name in self.scorers:
            values = [v for c in self.cases if (v := c.scores.get(name)) is not None]
            out[name] = sum(values) / len(values) if values else None
        return out

    @property
    def failures(self) -> list[Failure]:
        """Every failed target and every scorer that raised, case by case."""
        out: list[Failure] = []
        for case in self.cases:
            if case.error is not None:
                out.append(Failure(case.label, None, case.error))
            out.extend(Failure(case.label, name, err) for name, err in case.errors.items())
        return out

    def below(self, thresholds: dict[str | None, float]) -> list[str]:
        """The averages under their threshold, as lines ("Contains: 0.5 < 0.9").

        Args:
            thresholds: Scorer name -> minimum average; the key ``None`` applies to
                every scorer without its own.

        Raises:
            KeyError: A threshold names a scorer the dataset does not have.
        """
        for name in thresholds:
            if name is not None and name not in self.scorers:
                raise KeyError(f"no scorer {name!r} in dataset {self.dataset!r}; its "
                               f"scorers are {', '.join(self.scorers) or 'none'}")
        out: list[str] = []
        for name, average in self.averages.items():
            limit = thresholds.get(name, thresholds.get(None))
            if limit is not None and (average is None or average < limit):
                shown = "no score" if average is None else f"{average:.3g}"
                out.append(f"{name}: {shown} < {limit:g}")
        return out

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return {"dataset": self.dataset, "workflow_id": self.workflow_id,
                "run_id": self.run_id, "status": self.status, "scorers": list(self.scorers),
                "averages": self.averages,
                "failures": [{"case": f.case, "scorer": f.scorer, "error": f.error}
                             for f in self.failures],
                "cases": [c.model_dump(mode="json") for c in self.cases]}

    def table(self) -> str:
        """A plain-text table: a row per case run (its scores), then the averages."""
        header = ["case", *self.scorers]
        rows = [[c.label, *(_cell(c, n) for n in self.scorers)] for c in self.cases]
        rows.append(["average", *(_number(a) for a in self.averages.values())])
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
                 for r in [header, *rows]]
        return "\n".join(lines)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _cell(case: CaseResult, name: str) -> str:
    if name in case.errors:
        return "error"
    return _number(case.scores.get(name))


@dataclass(frozen=True, slots=True)
class ScoreChange:
    """A case's score that differs between two experiments.

    Attributes:
        case: The case's label.
        scorer: The scorer.
        before: Its value in the first experiment (``None``: no score).
        after: Its value in the second.
    """

    case: str
    scorer: str
    before: float | None
    after: float | None

    @property
    def delta(self) -> float:
        """``after - before`` (a missing score counts as 0)."""
        return (self.after or 0.0) - (self.before or 0.0)

    @property
    def regression(self) -> bool:
        """Whether the score dropped (or disappeared)."""
        return self.delta < 0 or (self.before is not None and self.after is None)


def compare(before: EvaluationReport, after: EvaluationReport) -> list[ScoreChange]:
    """The per-case score changes from ``before`` to ``after``, regressions first
    (largest drop first), then improvements; cases are matched by label.
    """
    old = {c.label: c for c in before.cases}
    changes: list[ScoreChange] = []
    for case in after.cases:
        previous = old.get(case.label)
        if previous is None:
            continue
        for name in after.scorers:
            a, b = previous.scores.get(name), case.scores.get(name)
            if a != b:
                changes.append(ScoreChange(case.label, name, a, b))
    return sorted(changes, key=lambda c: (not c.regression, c.delta))
