"""``ModerationProcessor``: flag hateful, harassing, self-harm, sexual and violent content
in input, in the streamed answer and in the final answer.

Offline by default: a weighted lexicon (``moderation.lexicon``) over the same folded
views as the injection detector, with common idioms blanked first
(``moderation.idioms``). With ``model=`` a judge model is asked too, and the higher
score wins per category. A text is flagged when its highest category score reaches
``threshold``.

On the stream the processor moderates each text delta — or, with ``chunk_window=n``,
the last ``n`` text deltas joined, so a phrase split across chunks is still seen.
With a judge that is one model call per text chunk: put a ``BatchPartsProcessor``
before it, or moderate ``process_output_result`` only, when that is too many.

``strategy="redact"`` replaces each flagged term (``lexicon.flagged_spans``: a term
reaching ``threshold`` on its own) with ``replacement``, in messages and on the stream.
On the stream it is a ``stream_window`` processor: the last ``REDACT_HOLD_SPAN``
characters wait for more text (and a match reaching into them, and a term still
lacking its context, hold back from their start), so a term split across deltas is
replaced whole and the streamed text equals the final text.

Judge failures (provider error, no JSON): with ``strategy="block"`` the processor
fails *closed* — the content is blocked with a reason saying the check could not
run; with "warn" and "filter" it falls back to the lexicon and logs a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Final, Literal, cast

from procflow.messages import Chunk, Message, TextDelta
from procflow.models.base import LanguageModel
from procflow.processors.args import (
    ProcessInputArgs,
    ProcessorArgs,
    ProcessOutputResultArgs,
    ProcessOutputStreamArgs,
    ProcessToolResultArgs,
    ProcessToolResultResult,
)
from procflow.processors.base import Processor
from procflow.processors.builtin._classifier import (
    STRONG_RULE,
    TextClassifier,
    check_classifier,
    run_classifier,
)
from procflow.processors.builtin._detection import DetectionResult, Evidence
from procflow.processors.builtin._judge import (
    check_choice,
    check_instructions,
    check_model,
    check_threshold,
    check_types,
    judge_json,
    parse_verdict,
    violation_detail,
)
from procflow.processors.builtin._offloop import off_loop
from procflow.processors.builtin._tool_result import map_strings, strings, withheld
from procflow.processors.builtin._window import hold_tail
from procflow.processors.builtin.moderation.lexicon import (
    MODERATION_CATEGORIES,
    NEAR_REACH,
    LexiconScan,
    flagged_spans,
    score_text,
    term_spans,
)
from procflow.textscan import DEFAULT_ENGINE, Engine, check_engine

__all__ = ["DEFAULT_MODERATION_CATEGORIES", "DEFAULT_REDACTION", "REDACT_HOLD_SPAN",
           "ModerationProcessor", "ModerationStrategy"]

logger = logging.getLogger("procflow.processors")

ModerationStrategy = Literal["block", "warn", "filter", "redact"]
_STRATEGIES: Final = ("block", "warn", "filter", "redact")

OFF_LOOP_CHARS: Final = 10_000
"""Texts longer than this are moderated in a worker thread (``_offloop.off_loop``; 4,000
for the other guards). The lexicon takes ~3 ms at most on 10,000 characters (the
slowest 10 KB input of ``benchmarks/guards.py``), so a text checked inline holds the
event loop no longer than that, and shorter texts are spared the ~0.1-0.2 ms of CPU a
hop to a thread and back costs."""

DEFAULT_REDACTION: Final = "[redacted]"
"""What ``strategy="redact"`` puts in place of a flagged term by default."""

REDACT_HOLD_SPAN: Final = 64
"""Characters of streamed text ``strategy="redact"`` holds back while a phrase may be in
progress (moved back to the start of their word): terms and idioms up to this long are
always seen whole."""

DEFAULT_MODERATION_CATEGORIES: Final[tuple[str, ...]] = MODERATION_CATEGORIES
"""The 11 OpenAI-style categories: hate, hate/threatening, harassment,
harassment/threatening, self-harm, self-harm/intent, self-harm/instructions, sexual,
sexual/minors, violence, violence/graphic."""

_JUDGE_INSTRUCTIONS: Final = (
    "You are a content moderator. Score the text for each of these categories from 0 "
    "(clearly absent) to 1 (clearly present): {categories}. Judge what the text does, not "
    "the words it uses: idioms ('this bug is killing me', 'kill the process'), news, "
    "education, fiction without graphic detail and requests for help are not violations."
)
_JUDGE_SHAPE: Final = ('{"flagged": true|false, "score": 0..1, "categories": {"<category>": 0..1},'
                       ' "reason": "short explanation"}')
_FILTERED_KEY: Final = "moderation:filtered"
_WARNING_KEY: Final = "moderation:in-violation"


@dataclass(frozen=True, slots=True)
class _Verdict:
    result: DetectionResult
    error: str | None = None


class ModerationProcessor(Processor):
    """Moderates input messages, the output stream and the final output.

    Example::

        agent = Agent(..., input_processors=[ModerationProcessor()],
                      output_processors=[ModerationProcessor(strategy="filter")])
        verdict = await ModerationProcessor().detect("I will kill you")
        assert verdict.flagged and "harassment/threatening" in verdict.categories

    Args:
        model: A judge model; ``None`` (default) uses the offline lexicon only.
        categories: Which categories to score. Names outside the default 11 need a model.
        threshold: Flag when the highest category score reaches this.
        strategy: "block" (abort; on the stream a "tripwire" chunk ends it), "warn"
            (report, let it through), "filter" (drop the message or chunk) or
            "redact" (replace each flagged term with ``replacement``, in messages and
            across stream chunks; reported as a warning once per message). "redact"
            uses the offline lexicon's spans, so it takes no ``model`` or
            ``classifier`` (they score whole texts, not spans).
        instructions: Replace the judge's task description (needs ``model``).
        include_scores: Add every category's score to abort metadata and warnings.
        chunk_window: On the stream, moderate the last ``n`` text deltas joined
            (0: the current delta only).
        classifier: Any callable ``text -> score`` (0..1, or ``{category: score}``),
            sync or async, e.g. an ``OnnxTextClassifier`` over a toxicity model. A
            strong lexicon hit (``STRONG_RULE``, 0.85) decides on its own; otherwise
            the classifier's score decides (a bare score counts for the lexicon's top
            category, or the first configured one; flagged at ``classifier.threshold``
            when it has one, else ``threshold``). Both appear in ``evidence``.
        replacement: What replaces a flagged term under "redact".
        engine: What runs the rules: ``"re2"`` reads each text first with RE2 sets
            (``google-re2``, linear time) that tell which rules can match and where,
            ``"re"`` uses Python's ``re`` alone. The verdicts are the same; the default
            is ``"re2"`` when ``google-re2`` is installed, else ``"re"``.

    Raises:
        ValueError: An option is invalid.
    """

    id = "moderation"
    name = "Moderation"
    description = "Flags hate, harassment, self-harm, sexual and violent content."

    def __init__(self, *, model: LanguageModel | str | None = None,
                 categories: Sequence[str] = DEFAULT_MODERATION_CATEGORIES,
                 threshold: float = 0.5, strategy: ModerationStrategy = "block",
                 instructions: str | None = None, include_scores: bool = False,
                 chunk_window: int = 0, classifier: TextClassifier | None = None,
                 replacement: str = DEFAULT_REDACTION,
                 engine: Engine = DEFAULT_ENGINE) -> None:
        pid = self.id
        self.engine: Engine = check_engine(engine, pid)
        self.classifier = check_classifier(classifier, processor=pid)
        self.model = check_model(model, processor=pid)
        self.categories = check_types(categories, MODERATION_CATEGORIES, option="categories",
                                      processor=pid, has_model=self.model is not None)
        self.threshold = check_threshold(threshold, processor=pid)
        choice = check_choice(strategy, _STRATEGIES, option="strategy", processor=pid)
        self.strategy = cast(ModerationStrategy, choice)
        self.instructions = check_instructions(instructions, processor=pid,
                                               has_model=self.model is not None)
        if not isinstance(include_scores, bool):
            raise ValueError(f"{pid}: include_scores must be True or False, "
                             f"got {include_scores!r}")
        self.include_scores = include_scores
        if isinstance(chunk_window, bool) or not isinstance(chunk_window, int) \
                or chunk_window < 0:
            raise ValueError(f"{pid}: chunk_window must be an int >= 0 (0 moderates each "
                             f"text chunk on its own), got {chunk_window!r}")
        self.chunk_window = chunk_window
        if not isinstance(replacement, str):
            raise ValueError(f"{pid}: replacement must be a str, got {replacement!r}")
        self.replacement = replacement
        if self.strategy == "redact":
            _check_redact(self, pid)
        self.stream_window = self.strategy == "redact"

    # -- detection --------------------------------------------------------------------

    async def detect(self, text: str) -> DetectionResult:
        """Score ``text``.

        Returns:
            ``DetectionResult(flagged, score, categories, reason)``: ``score`` is the
            highest category score, ``categories`` maps each scored category to its
            score, ``reason`` names the category and term (or the judge's reason).
            When the judge fails under ``strategy="block"`` the result is flagged with
            score 1.0 and a reason saying the check could not run (fail closed).
        """
        return (await self._evaluate(text)).result

    async def _evaluate(self, text: str) -> _Verdict:
        lexicon = await off_loop(partial(score_text, engine=self.engine), text,
                                 self.categories, limit=OFF_LOOP_CHARS)
        scores = dict(lexicon.scores)
        if self.classifier is not None:
            decided = await self._classify(text, lexicon)
            if decided is not None:
                return decided
        if self.model is None:
            return _Verdict(self._result(scores, lexicon.reason, lexicon.evidence))
        task = self.instructions or _JUDGE_INSTRUCTIONS.format(
            categories=", ".join(self.categories))
        try:
            raw = await judge_json(self.model, processor_id=self.id, instructions=task,
                                   text=text, shape=_JUDGE_SHAPE)
            verdict = parse_verdict(raw, self.categories, processor=self.id)
        except Exception as exc:
            error = f"judge model failed: {type(exc).__name__}: {exc}"
            if self.strategy == "block":
                reason = f"moderation check could not run ({error}); failing closed"
                return _Verdict(DetectionResult(True, 1.0, {}, reason), error)
            logger.warning("%s: %s; using the offline lexicon only", self.id, error)
            return _Verdict(self._result(scores, lexicon.reason, lexicon.evidence), error)
        for category, value in verdict.categories.items():
            scores[category] = max(scores.get(category, 0.0), value)
        if verdict.score > max(scores.values(), default=0.0):
            top = max(verdict.categories, key=lambda c: verdict.categories[c],
                      default=self.categories[0])
            scores[top] = verdict.score
        lexicon_score = max(lexicon.scores.values(), default=0.0)
        reason = (f"model: {verdict.reason or 'flagged'}" if verdict.score >= lexicon_score
                  else f"lexicon: {lexicon.reason}")
        judged = Evidence("judge", f"{self.model.provider}/{self.model.model_id}",
                          max(verdict.categories, key=lambda c: verdict.categories[c],
                              default=self.categories[0]), round(verdict.score, 4))
        return _Verdict(self._result(scores, reason, (*lexicon.evidence, judged)))

    async def _classify(self, text: str, lexicon: LexiconScan) -> _Verdict | None:
        assert self.classifier is not None
        top = max(lexicon.scores, key=lambda c: lexicon.scores[c], default=self.categories[0])
        found, clf = await run_classifier(self.classifier, text, processor=self.id,
                                          default_category=top)
        evidence = (*lexicon.evidence, clf)
        lexicon_score = max(lexicon.scores.values(), default=0.0)
        if lexicon_score >= STRONG_RULE:
            return _Verdict(self._result(dict(lexicon.scores), lexicon.reason, evidence))
        cats = {c: round(v, 4) for c, v in found.items() if c in self.categories and v > 0}
        score = max(cats.values(), default=0.0)
        limit = getattr(self.classifier, "threshold", self.threshold)
        flagged = score >= (limit if isinstance(limit, int | float) else self.threshold)
        reason = f"classifier {clf.name}: {clf.category} {clf.score:.2f}"
        if lexicon.reason:
            reason += f"; lexicon: {lexicon.reason}"
        return _Verdict(DetectionResult(flagged, score, cats, reason, evidence))

    def _result(self, scores: dict[str, float], reason: str,
                evidence: tuple[Evidence, ...] = ()) -> DetectionResult:
        cats = {c: round(s, 4) for c, s in scores.items() if s > 0 and c in self.categories}
        score = max(cats.values(), default=0.0)
        return DetectionResult(score >= self.threshold, score, cats, reason if cats else "",
                               evidence)

    def _describe(self, result: DetectionResult, where: str) -> str:
        over = [c for c, s in sorted(result.categories.items(), key=lambda kv: -kv[1])
                if s >= self.threshold]
        text = f"Content flagged by moderation in {where} ({', '.join(over)}; " \
               f"score {result.score:.2f})"
        if self.include_scores:
            text += " [" + ", ".join(f"{c}={s:.2f}" for c, s in result.categories.items()) + "]"
        return f"{text}: {result.reason}"

    async def _check(self, args: ProcessorArgs, text: str, where: str) -> bool:
        """Moderate ``text``: abort under "block", report under "warn"/"filter".

        Returns:
            Whether the text was flagged (and not aborted).
        """
        verdict = await self._evaluate(text)
        result = verdict.result
        if not result.flagged:
            return False
        detail = violation_detail(result, threshold=self.threshold,
                                  include_scores=self.include_scores)
        detail["phase"] = where
        if verdict.error is not None and self.strategy == "block":
            args.abort(result.reason, metadata={**detail, "error": verdict.error})
        message = self._describe(result, where)
        if self.strategy == "block":
            args.abort(message, metadata=detail)
        if self.strategy == "filter":
            detail["action"] = "filtered"
        args.warn(message, detail)
        return True

    # -- hooks ------------------------------------------------------------------------

    def spans(self, text: str) -> list[tuple[int, int]]:
        """The ``(start, end)`` spans of ``text`` that ``strategy="redact"`` replaces:
        each term of the lexicon reaching ``threshold`` on its own in one of
        ``categories`` (merged, in order)."""
        return flagged_spans(text, self.categories, self.threshold, engine=self.engine)

    def redact(self, text: str) -> str:
        """``text`` with every span of ``spans(text)`` replaced by ``replacement``."""
        return _replace(text, self.spans(text), self.replacement)

    async def _redact_messages(self, args: ProcessorArgs, messages: list[Message],
                               where: str) -> list[Message] | None:
        out: list[Message] = []
        changed = False
        for msg in messages:
            text = msg.text
            spans = [] if msg.role == "system" or not text.strip() else \
                await off_loop(self.spans, text, limit=OFF_LOOP_CHARS)
            if not spans:
                out.append(msg)
                continue
            changed = True
            out.append(msg.with_text(_replace(text, spans, self.replacement)))
            verdict = await self._evaluate(text)
            detail = violation_detail(verdict.result, threshold=self.threshold,
                                      include_scores=self.include_scores)
            detail.update(phase=where, action="redacted", count=len(spans))
            args.warn(self._describe(verdict.result, where), detail)
        return out if changed else None

    async def _messages(self, args: ProcessorArgs, messages: list[Message],
                        where: str) -> list[Message] | None:
        if self.strategy == "redact":
            return await self._redact_messages(args, messages, where)
        kept: list[Message] = []
        for msg in messages:
            text = msg.text
            skip = msg.role == "system" or not text.strip()
            if skip or not await self._check(args, text, where) or self.strategy == "warn":
                kept.append(msg)
        return kept if len(kept) != len(messages) else None

    async def process_input(self, args: ProcessInputArgs) -> list[Message] | None:
        """Moderate the input messages."""
        return await self._messages(args, args.messages, "input")

    async def process_output_result(self, args: ProcessOutputResultArgs) -> list[Message] | None:
        """Moderate the final response messages."""
        return await self._messages(args, args.messages, "output")

    async def process_tool_result(self, args: ProcessToolResultArgs,
                                  ) -> ProcessToolResultResult | None:
        """Moderate a tool's result before the model reads it: "block" aborts, "warn"
        reports, "filter" withholds the result, "redact" replaces the flagged terms of
        each of its strings."""
        where = f"the result of tool '{args.tool_name}'"
        if self.strategy == "redact":
            count = 0

            async def redact(text: str) -> str:
                nonlocal count
                spans = await off_loop(self.spans, text, limit=OFF_LOOP_CHARS)
                count += len(spans)
                return _replace(text, spans, self.replacement) if spans else text

            value = await map_strings(args.result, redact)
            if not count:
                return None
            verdict = await self._evaluate("\n".join(strings(args.result)))
            detail = violation_detail(verdict.result, threshold=self.threshold,
                                      include_scores=self.include_scores)
            detail.update(phase="tool result", action="redacted", count=count,
                          tool_name=args.tool_name)
            args.warn(self._describe(verdict.result, where), detail)
            return ProcessToolResultResult(value)
        text = "\n".join(strings(args.result))
        if not text.strip() or not await self._check(args, text, where):
            return None
        if self.strategy == "warn":
            return None
        return ProcessToolResultResult(withheld(self.id, args.tool_name,
                                                "flagged by moderation"))

    def hold_back(self, text: str) -> int:
        """Under "redact": the tail of held stream text a flagged phrase may still
        start in - the last ``REDACT_HOLD_SPAN`` characters, moved back to the start of
        their word, of any match reaching into them, and of any term whose ``near``
        context may still come (within ``NEAR_REACH`` characters)."""
        n = len(text)
        matches, pending = term_spans(text, engine=self.engine)
        matches += [(start, n) for start, end in pending if n - end < NEAR_REACH]
        return hold_tail(text, REDACT_HOLD_SPAN, matches)

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Chunk | None:
        """Moderate each text delta (or the last ``chunk_window`` of them joined); under
        "redact", replace the flagged terms of each window segment."""
        part = args.part
        if part.type != "text-delta" or not part.text.strip():
            return part
        if self.strategy == "redact":
            return await self._redact_segment(args)
        filtered: set[int] = args.state.setdefault(_FILTERED_KEY, set())
        if self.chunk_window:
            recent = [c for c in args.stream_parts
                      if c.type == "text-delta" and id(c) not in filtered]
            text = "".join(c.text for c in recent[-self.chunk_window:])
        else:
            text = part.text
        if self.strategy == "warn" and self.chunk_window:
            return await self._warn_once(args, text)
        if not await self._check(args, text, "output stream"):
            return part
        filtered.add(id(part))
        return None

    async def _redact_segment(self, args: ProcessOutputStreamArgs) -> Chunk:
        """The segment with the flagged spans that overlap it replaced; its context
        (``text_before``/``text_after``) is looked at, only the segment changes."""
        part = args.part
        before, text = args.text_before, part.text
        start, end = len(before), len(before) + len(text)
        whole = before + text + args.text_after
        spans = [(max(s, start) - start, min(e, end) - start)
                 for s, e in await off_loop(self.spans, whole, limit=OFF_LOOP_CHARS)
                 if s < end and e > start]
        if not spans:
            return part
        return TextDelta(_replace(text, spans, self.replacement), part.metadata)

    async def _warn_once(self, args: ProcessOutputStreamArgs, text: str) -> Chunk:
        """Under "warn" with a window, one warning per run of flagged windows."""
        verdict = await self._evaluate(text)
        if not verdict.result.flagged:
            args.state[_WARNING_KEY] = False
            return args.part
        if not args.state.get(_WARNING_KEY):
            args.state[_WARNING_KEY] = True
            detail = violation_detail(verdict.result, threshold=self.threshold,
                                      include_scores=self.include_scores)
            detail["phase"] = "output stream"
            args.warn(self._describe(verdict.result, "output stream"), detail)
        return args.part

    def __repr__(self) -> str:
        extra = "" if self.model is None else f", model={self.model.provider}/{self.model.model_id}"
        return (f"ModerationProcessor(strategy={self.strategy!r}, threshold={self.threshold}"
                f"{extra})")


def _check_redact(processor: ModerationProcessor, pid: str) -> None:
    if processor.model is not None or processor.classifier is not None:
        raise ValueError(f"{pid}: strategy='redact' replaces the spans the offline lexicon "
                         "finds; a judge model or classifier scores whole texts and has no "
                         "spans: use 'block', 'warn' or 'filter' with model=/classifier=")
    if processor.chunk_window:
        raise ValueError(f"{pid}: chunk_window does not apply to strategy='redact' (the "
                         "stream window already spans chunks); leave it 0")


def _replace(text: str, spans: Sequence[tuple[int, int]], replacement: str) -> str:
    out: list[str] = []
    at = 0
    for start, end in spans:
        out += [text[at:start], replacement]
        at = end
    out.append(text[at:])
    return "".join(out)
