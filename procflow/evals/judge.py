"""``LLMJudge``: a model grades the output against a rubric, with a score and a reason."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Final, final

from pydantic_core import to_jsonable_python

from procflow.evals.scoring import Score, ScoreContext, Scorer
from procflow.models.base import complete_text

if TYPE_CHECKING:
    from procflow.models.base import LanguageModel

__all__ = ["LLMJudge"]

_INSTRUCTIONS: Final = """You grade the output of an AI system against a rubric.
Rubric: {rubric}

You are sent the case (its input{expected}) and the output to grade, as JSON. Grade the
output only against the rubric. Answer with one JSON object only, shaped like:
{{"score": <number from 0 to 1>, "reason": "<one sentence>"}}. No prose."""

_OBJECT: Final = re.compile(r"\{.*\}", re.DOTALL)


@final
class LLMJudge(Scorer):
    """A model grades each output against ``rubric`` and answers a score in [0, 1] and
    a reason (``{"score": ..., "reason": ...}``; ``{"pass": true}`` counts as 1).

    Args:
        model: The judge: a ``LanguageModel`` or a "provider/model-id" string.
        rubric: What a good output is ("Answers politely and names the order number").
        include_input: Send the case's input to the judge (default ``True``).
        include_expected: Send the case's expected answer, when it has one.
        name: The score's name (default ``"LLMJudge"``).
    """

    def __init__(self, model: LanguageModel | str, rubric: str, *,
                 include_input: bool = True, include_expected: bool = True,
                 name: str | None = None) -> None:
        super().__init__(name=name)
        from procflow.models.resolve import resolve_model

        if not rubric.strip():
            raise ValueError("LLMJudge: rubric must say what a good output is")
        self.model = resolve_model(model)
        self.rubric = rubric
        self.include_input = include_input
        self.include_expected = include_expected

    async def score(self, ctx: ScoreContext) -> Score:
        sent: dict[str, Any] = {}
        if self.include_input:
            sent["input"] = ctx.input
        expected = self.include_expected and ctx.expected is not None
        if expected:
            sent["expected"] = ctx.expected
        sent["output"] = ctx.output if not isinstance(ctx.output, str) else ctx.text
        system = _INSTRUCTIONS.format(rubric=self.rubric,
                                      expected=" and its expected answer" if expected else "")
        user = json.dumps(to_jsonable_python(sent, fallback=str), ensure_ascii=False)
        answer = await complete_text(self.model, [{"role": "system", "content": system},
                                                  {"role": "user", "content": user}],
                                     temperature=0)
        return self._verdict(answer)

    def _verdict(self, answer: str) -> Score:
        match = _OBJECT.search(answer)
        parsed: Any = None
        if match is not None:
            try:
                parsed = json.loads(match.group(0))
            except json.JSONDecodeError:
                parsed = None
        if not isinstance(parsed, dict):
            raise ValueError(f"the judge {self.model.provider}/{self.model.model_id} did not "
                             f"answer with a JSON object: {answer[:120]!r}")
        reason = parsed.get("reason")
        reason = str(reason) if reason is not None else None
        value = parsed.get("score", parsed.get("pass"))
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                value = None
        if isinstance(value, int | float):  # a bool too: true is 1
            return Score(float(value), reason)  # the range is checked by the runner
        raise ValueError(f"the judge's answer has no score: {answer[:120]!r}")
