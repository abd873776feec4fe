"""Pluggable classifiers for the injection and moderation detectors, and how their
score combines with the rules.

A classifier is any callable ``text -> score`` (sync or async), the score a number in
0..1 or a mapping category -> score. Combination: a strong rule hit (weight at least
``STRONG_RULE``) decides alone; otherwise the classifier's score decides. Both appear
in the detection's evidence.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable, Mapping

import anyio.to_thread

from procflow.errors import ProcessorError
from procflow.processors.builtin._detection import Evidence

__all__ = ["STRONG_RULE", "TextClassifier", "check_classifier", "classifier_name",
           "run_classifier"]

Score = float | Mapping[str, float]
TextClassifier = Callable[[str], Score | Awaitable[Score]]
"""``text -> score`` (0..1) or ``text -> {category: score}``, sync or async."""

STRONG_RULE = 0.85
"""A rule score at least this blocks on its own, whatever the classifier says."""


def check_classifier(classifier: object, *, processor: str) -> TextClassifier | None:
    """``classifier`` if callable (or ``None``).

    Raises:
        ValueError: Not callable.
    """
    if classifier is None or callable(classifier):
        return classifier
    raise ValueError(f"{processor}: classifier must be a callable text -> score (sync or "
                     f"async), got {type(classifier).__name__}")


def classifier_name(classifier: object) -> str:
    """A readable name for evidence: its ``name`` attribute, or its type/function name."""
    name = getattr(classifier, "name", None)
    if isinstance(name, str) and name:
        return name
    return getattr(classifier, "__name__", type(classifier).__name__)


def _score(value: object, where: str, processor: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value) \
            or not 0.0 <= value <= 1.0:
        raise ProcessorError(f"processor '{processor}': classifier {where} must return a "
                             f"score between 0 and 1, got {value!r}", processor_id=processor)
    return float(value)


async def run_classifier(classifier: TextClassifier, text: str, *, processor: str,
                         default_category: str) -> tuple[dict[str, float], Evidence]:
    """Run ``classifier`` on ``text``: a sync one in a worker thread (models are slow),
    an async one awaited. Returns category -> score and the strongest as evidence.

    Raises:
        ProcessorError: The classifier returned something other than a score in 0..1
            or a mapping of them.
    """
    name = classifier_name(classifier)
    if inspect.iscoroutinefunction(classifier) or inspect.iscoroutinefunction(
            type(classifier).__call__):
        raw: object = await classifier(text)  # type: ignore[misc]
    else:
        raw = await anyio.to_thread.run_sync(classifier, text)
        if inspect.isawaitable(raw):
            raw = await raw
    if isinstance(raw, Mapping):
        scores = {str(k): _score(v, f"{name!r} (category {k!r})", processor)
                  for k, v in raw.items()}
    else:
        scores = {default_category: _score(raw, repr(name), processor)}
    top = max(scores, key=lambda c: scores[c], default=default_category)
    return scores, Evidence("classifier", name, top, round(scores.get(top, 0.0), 4))
