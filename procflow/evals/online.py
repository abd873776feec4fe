"""Scoring what already ran: ``score_runs`` grades stored agent runs (production
traffic) with scorers, as an experiment of its own.

The experiment is a run of ``eval:runs-<agent>`` (``eval:runs`` for every agent) whose
cases are the stored runs, each named by its run id and linked to it (``run_id``), so
the scores are stored, listed and compared like any experiment's. Sampling is stable:
a run is in the sample or not by a hash of its id, so two scorings of one period with
the same ``sample`` pick the same runs.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from procflow.evals.dataset import Case, Dataset
from procflow.evals.experiment import (
    WORKFLOW_PREFIX,
    Outcome,
    StoredOutcomes,
    run_experiment,
)
from procflow.evals.report import CaseResult, EvaluationReport
from procflow.evals.scoring import Scorer

if TYPE_CHECKING:
    from procflow.records import RunSnapshot
    from procflow.storage.base import Storage

__all__ = ["score_runs"]

_AGENT_PREFIX = "agent:"
_SCORED = ("success", "tripwire")


def in_sample(run_id: str, sample: float) -> bool:
    """Whether ``run_id`` falls in a ``sample`` (0..1) of runs, by a hash of the id."""
    digest = hashlib.sha256(run_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < sample


async def score_runs(scorers: Sequence[Scorer], *, agent: str | None = None,
                     since: float | None = None, sample: float = 1.0,
                     limit: int | None = None, storage: Storage | None = None,
                     concurrency: int = 8, run_id: str | None = None,
                     on_case: Callable[[CaseResult], Any] | None = None) -> EvaluationReport:
    """Score stored agent runs that finished (success or tripwire), as an experiment.

    Each case's input is the run's first user message, its output the run's final
    text; scorers also see its tool calls and usage. Runs made by experiments are left
    out.

    Args:
        scorers: The scorers.
        agent: Only runs of this agent (its id, as in ``agent:<id>``).
        since: Only runs updated in the last ``since`` seconds.
        sample: The share of runs scored, 0..1 (stable: by a hash of the run id).
        limit: At most this many runs, newest first.
        storage: Where the runs are, and where the experiment is stored.
        concurrency: Runs scored at once.
        run_id: The experiment's run id (a stopped one is continued).
        on_case: Called with each ``CaseResult`` as it finishes.

    Raises:
        ValueError: ``sample`` outside 0..1, no scorer, or no stored run matches.
    """
    from procflow.agent.agent import stored_output
    from procflow.runtime.defaults import current_storage

    if not 0.0 <= sample <= 1.0:
        raise ValueError(f"score_runs(): sample must be between 0 and 1, got {sample!r}")
    if not scorers:
        raise ValueError("score_runs(): give at least one scorer")
    store = storage if storage is not None else current_storage()
    headers = await _chosen(store, agent=agent, since=since, sample=sample, limit=limit)
    cases: list[Case[Any, Any]] = []
    outcomes: dict[str, Outcome] = {}
    for header in headers:
        loaded = await store.load_snapshot(header.workflow_id, header.run_id)
        if loaded is None or loaded[0].result is None:
            continue
        out = stored_output(loaded[0].result, header.run_id)
        first = next((m.text for m in out.messages if m.role == "user"), "")
        cases.append(Case(input=first, name=header.run_id,
                          metadata={"agent": header.workflow_id.removeprefix(_AGENT_PREFIX)}))
        outcomes[header.run_id] = Outcome(out.text, out.text, out.usage,
                                          tuple(out.tool_calls), header.run_id)
    if not cases:
        raise ValueError(f"no stored agent run to score ({_described(agent, since, sample)})")
    dataset = Dataset(f"runs-{agent}" if agent else "runs", cases, scorers=scorers)
    return await run_experiment(dataset, StoredOutcomes(outcomes), concurrency=concurrency,
                                repeat=1, run_id=run_id, storage=store, on_case=on_case)


async def _chosen(store: Storage, *, agent: str | None, since: float | None, sample: float,
                  limit: int | None) -> list[RunSnapshot]:
    headers = await store.list_runs(workflow_id=f"{_AGENT_PREFIX}{agent}" if agent else None)
    experiments = {h.run_id for h in headers if h.workflow_id.startswith(WORKFLOW_PREFIX)}
    if agent:  # the experiments are not in a listing filtered by workflow
        experiments = {h.run_id for h in await store.list_runs()
                       if h.workflow_id.startswith(WORKFLOW_PREFIX)}
    oldest = time.time() - since if since is not None else None
    chosen = [h for h in headers
              if h.workflow_id.startswith(_AGENT_PREFIX) and h.status in _SCORED
              and (oldest is None or h.updated_at >= oldest)
              and h.run_id.partition(".")[0] not in experiments
              and in_sample(h.run_id, sample)]
    return chosen[:limit] if limit is not None else chosen


def _described(agent: str | None, since: float | None, sample: float) -> str:
    parts = [f"agent {agent}" if agent else "any agent"]
    if since is not None:
        parts.append(f"updated in the last {since:g}s")
    if sample < 1.0:
        parts.append(f"sample {sample:g}")
    return ", ".join(parts)
