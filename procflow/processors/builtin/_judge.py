"""Model-as-judge: ask a language model for a JSON verdict on a text."""

from __future__ import annotations

import json
import re
from typing import Any

from procflow.errors import ProcessorError
from procflow.models.base import LanguageModel, complete_text

__all__ = ["judge_json"]

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
