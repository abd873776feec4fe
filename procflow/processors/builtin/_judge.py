"""Model-as-judge and what the injection and moderation detectors share: asking a model
for a JSON verdict, option checks, parsing the verdict, and how it is reported.

The judge is asked for ``{"flagged", "score", "categories", "reason", ...}``; models
answer loosely, so the parsing is tolerant where the meaning is clear (a category
list instead of a score map, a score given as a string, a missing score next to
``"flagged": true``) and strict where it is not (a non-number score, a category map
that is not a map) — then it raises ``ProcessorError`` and the caller treats it like
any other judge failure.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from procflow.errors import ProcessorError
from procflow.models.base import LanguageModel, complete_text
from procflow.processors.builtin._detection import DetectionResult

__all__ = [
    "JudgeVerdict",
    "check_choice",
    "check_instructions",
    "check_model",
    "check_threshold",
    "check_types",
    "judge_json",
    "parse_verdict",
    "violation_detail",
]

_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


async def judge_json(model: LanguageModel, *, processor_id: str, instructions: str,
                     text: str, shape: str) -> dict[str, Any]:
    """Ask ``model`` to judge ``text`` and return its JSON answer as a dict.

    Args:
        model: The judge.
        processor_id: For error messages.
        instructions: The judge's task (system prompt).
        text: The text to judge (sent as the user message, never mixed into
            the instructions).
        shape: A description of the JSON object expected, e.g.
            ``{"flagged": bool, "score": number, "categories": {...}}``.

    Raises:
        ProcessorError: The answer holds no JSON object.
    """
    prompt = [
        {"role": "system", "content": f"{instructions}\n\nAnswer with one JSON object only, "
                                      f"shaped like: {shape}. No prose."},
        {"role": "user", "content": text},
    ]
    answer = await complete_text(model, prompt, temperature=0)
    match = _OBJECT.search(answer)
    if match is not None:
        try:
            parsed = json.loads(match.group(0))
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    shown = answer if len(answer) <= 200 else answer[:197] + "..."
    raise ProcessorError(f"processor '{processor_id}': the judge model "
                         f"{model.provider}/{model.model_id} did not answer with a JSON object: "
                         f"{shown!r}", processor_id=processor_id)


def check_model(model: object, *, processor: str) -> LanguageModel | None:
    """``model`` as a ``LanguageModel``: ``None``, a model, or a "provider/model-id" string.

    Raises:
        ValueError: Anything else, or a string naming no known provider.
    """
    if model is None:
        return None
    from procflow.models.resolve import resolve_model

    try:
        return resolve_model(model)  # type: ignore[arg-type]
    except ValueError as exc:
        raise ValueError(f"{processor}: {exc}") from None


def check_threshold(value: object, *, processor: str) -> float:
    """``value`` as a float in [0, 1].

    Raises:
        ValueError: Not a number, or out of range.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ValueError(f"{processor}: threshold must be a number between 0 and 1, "
                         f"got {value!r}")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{processor}: threshold must be between 0 and 1, got {value!r}")
    return float(value)


def check_choice(value: object, choices: Sequence[str], *, option: str, processor: str) -> str:
    """``value`` if it is one of ``choices``.

    Raises:
        ValueError: Naming the choices.
    """
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{processor}: {option} must be one of "
                         f"{', '.join(repr(c) for c in choices)}; got {value!r}")
    return value


def check_types(values: object, known: Sequence[str], *, option: str, processor: str,
                has_model: bool) -> tuple[str, ...]:
    """The requested categories, de-duplicated, in order.

    Categories the offline rules do not know are accepted only with a model (the
    judge can score them; the rules cannot).

    Raises:
        ValueError: Not a non-empty list of non-empty strings, or an unknown name
            without a model.
    """
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise ValueError(f"{processor}: {option} must be a list of names, got {values!r}")
    out: list[str] = []
    for item in values:
        if not isinstance(item, str) or not item.strip():
            raise ValueError(f"{processor}: {option} must hold non-empty strings, got {item!r}")
        if item not in out:
            out.append(item)
    if not out:
        raise ValueError(f"{processor}: {option} is empty; give at least one of "
                         f"{', '.join(known)}")
    unknown = [item for item in out if item not in known]
    if unknown and not has_model:
        raise ValueError(f"{processor}: {option} {unknown} are not known to the offline rules "
                         f"(known: {', '.join(known)}); pass model= to have a judge score them")
    return tuple(out)


def check_instructions(value: object, *, processor: str, has_model: bool) -> str | None:
    """``value`` if it is ``None`` or a non-empty string, given together with a model.

    Raises:
        ValueError: Not a string, empty, or given without a model (the offline rules
            take no instructions).
    """
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{processor}: instructions must be a non-empty string, got {value!r}")
    if not has_model:
        raise ValueError(f"{processor}: instructions are for the judge model; pass model= "
                         "too, or drop instructions to use the offline rules")
    return value


@dataclass(frozen=True, slots=True)
class JudgeVerdict:
    """The judge's answer, checked.

    Attributes:
        score: 0..1.
        categories: Category -> score, only the categories asked for.
        reason: The judge's explanation.
        extra: Other string fields it returned (e.g. "rewritten").
    """

    score: float
    categories: dict[str, float]
    reason: str
    extra: dict[str, str]


def _number(value: object, *, what: str, processor: str) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            value = None
    if not isinstance(value, int | float) or math.isnan(value):
        raise ProcessorError(f"processor '{processor}': the judge's {what} is not a number: "
                             f"{value!r}", processor_id=processor)
    return min(max(float(value), 0.0), 1.0)


def parse_verdict(raw: Mapping[str, Any], categories: Sequence[str], *,
                  processor: str) -> JudgeVerdict:
    """Check the judge's JSON answer.

    Raises:
        ProcessorError: The answer cannot be read as a verdict.
    """
    flagged = raw.get("flagged")
    cats_raw = raw.get("categories", {})
    cats: dict[str, float] = {}
    if isinstance(cats_raw, Mapping):
        for name, value in cats_raw.items():
            if name in categories:
                cats[str(name)] = _number(value, what=f"score for {name!r}", processor=processor)
    elif isinstance(cats_raw, list):
        named = [c for c in cats_raw if isinstance(c, str) and c in categories]
        fallback = 1.0 if flagged is True else 0.5
        base = _number(raw["score"], what="score", processor=processor) \
            if raw.get("score") is not None else fallback
        cats = dict.fromkeys(named, base)
    elif cats_raw is not None:
        raise ProcessorError(f"processor '{processor}': the judge's categories must be an "
                             f"object or a list, got {cats_raw!r}", processor_id=processor)
    if raw.get("score") is not None:
        score = _number(raw["score"], what="score", processor=processor)
    elif cats:
        score = max(cats.values())
    elif isinstance(flagged, bool):
        score = 1.0 if flagged else 0.0
    else:
        raise ProcessorError(f"processor '{processor}': the judge gave neither a score, "
                             f"category scores nor a flagged verdict: {dict(raw)!r}",
                             processor_id=processor)
    extra = {k: v for k, v in raw.items()
             if isinstance(k, str) and isinstance(v, str) and k not in ("reason",)}
    reason = raw.get("reason")
    return JudgeVerdict(score, cats, reason if isinstance(reason, str) else "", extra)


DETAIL_EVIDENCE: Final = 5
"""How many pieces of evidence a tripwire's metadata or a warning's detail carries."""


def violation_detail(result: DetectionResult, *, threshold: float,
                     include_scores: bool) -> dict[str, Any]:
    """What goes into a tripwire's metadata or a warning's detail.

    ``categories`` lists the categories at or over the threshold, strongest first;
    ``score`` is the overall score; ``evidence`` the strongest pieces of evidence
    (up to ``DETAIL_EVIDENCE``: rule or classifier, view, span in the original text and
    snippet), so a stored trace shows what fired where (``procflow trace RUN --step
    processor:ID``). With ``include_scores`` every scored category is added under
    ``scores``. A detector that stopped reading once the verdict was certain adds
    ``"complete": False`` (the scores are lower bounds, see ``DetectionResult``).
    """
    over = sorted((c for c, s in result.categories.items() if s >= threshold),
                  key=lambda c: result.categories[c], reverse=True)
    detail: dict[str, Any] = {"categories": over, "score": round(result.score, 3),
                              "reason": result.reason}
    if result.evidence:
        detail["evidence"] = [dataclasses.asdict(e) for e in result.evidence[:DETAIL_EVIDENCE]]
    if include_scores:
        detail["scores"] = {c: round(s, 3) for c, s in result.categories.items()}
    if not result.complete:
        detail["complete"] = False
    return detail
