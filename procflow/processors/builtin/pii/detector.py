"""``PIIDetector``: find personal data and secrets, then block, warn, filter or redact.

Offline by default: a deterministic rule engine (``pii.rules``) with checksums where
formats have them. Given a ``model``, a judge is asked as well and both answers are
merged.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal, get_args

from procflow.errors import ProcessorError
from procflow.messages import Chunk, Message, TextDelta
from procflow.models.base import LanguageModel
from procflow.models.resolve import resolve_model
from procflow.processors.args import (
    ProcessInputArgs,
    ProcessorArgs,
    ProcessorViolation,
    ProcessOutputResultArgs,
    ProcessOutputStreamArgs,
    ProcessToolResultArgs,
    ProcessToolResultResult,
)
from procflow.processors.base import Processor
from procflow.processors.builtin._detection import PIIDetection, PIIType
from procflow.processors.builtin._judge import judge_json
from procflow.processors.builtin._offloop import off_loop
from procflow.processors.builtin._tool_result import map_strings, strings, withheld
from procflow.processors.builtin._window import hold_tail
from procflow.processors.builtin.pii.dates import MONTHS
from procflow.processors.builtin.pii.redact import (
    REDACTION_METHODS,
    RedactionMethod,
    redact_text,
    resolve_overlaps,
)
from procflow.processors.builtin.pii.rules import find_rule_detections
from procflow.textscan import DEFAULT_ENGINE, Engine, check_engine, normalise

__all__ = ["ALL_PII_TYPES", "DEFAULT_PII_TYPES", "HOLD_SPAN", "HOLD_SPAN_WIDE", "PIIDetector",
           "PIIStrategy"]

logger = logging.getLogger("procflow.processors")

PIIStrategy = Literal["block", "warn", "filter", "redact"]
_STRATEGIES: tuple[PIIStrategy, ...] = get_args(PIIStrategy)

ALL_PII_TYPES: tuple[PIIType, ...] = get_args(PIIType)
"""Every type ``PIIDetector`` knows."""

DEFAULT_PII_TYPES: tuple[PIIType, ...] = tuple(
    t for t in ALL_PII_TYPES if t not in ("name", "address"))
"""What the rules look for by default: the structured types and dates of birth."""

_DEFAULT_INSTRUCTIONS = (
    "You are a privacy filter. Find every piece of personal data or secret in the user's "
    "text, of these types only: {types}. Report each value exactly as written in the "
    "text (same characters, no normalisation), once per occurrence. Do not report "
    "order numbers, prices, timestamps, version numbers or other non-personal data. "
    "If there is nothing, answer with an empty list.")
_SHAPE = ('{"detections": [{"type": "<one of the types>", "value": "<exact text>", '
          '"confidence": <0..1>}]}')


class _JudgeFailedError(Exception):
    """The judge model failed or answered badly (internal; see ``PIIDetector``)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(_describe(error))
        self.error = error


def _describe(error: Exception) -> str:
    # A malformed answer may echo the checked text, so its content is never repeated.
    if isinstance(error, ProcessorError):
        return "the judge model did not answer with the expected JSON"
    return f"{type(error).__name__}: {error}"


class PIIDetector(Processor):
    """Detects PII (emails, phones, cards, SSNs, keys, IPs, URLs, UUIDs, IBANs, wallets,
    dates of birth; names and addresses with a model or by opt-in) and acts on it.

    Runs on input messages (``process_input``), on the final response messages
    (``process_output_result``) and on streamed text deltas (``process_output_stream``).
    On the stream it is a ``stream_window`` processor: a value split across deltas is
    still found, because the stream holds back the tail of the text that could still
    be (part of) a value (see ``hold_back``) and shows it the rest with its context.

    Strategies: "block" aborts the request (``TripwireError``, reason ``"PII detected:
    <types>"``); "warn" reports a violation and lets the text through; "filter" drops
    the message or chunk; "redact" (default) rewrites the text. Aborts and warnings
    reach ``on_violation``; their metadata holds the detected types (and the
    detections, with their values, only when ``include_detections=True``).

    With a ``model``, each text is also judged by the model and its findings are
    merged with the rules'. If the judge fails (provider error, no or malformed JSON),
    the "block" strategy fails closed - the request is aborted with "PII detector could
    not check the text: ..." - and the other strategies fall back to the rules alone
    (a warning is logged).

    Args:
        model: Judge model; ``None`` for rules only (offline, deterministic).
        detection_types: Types to look for. Default: every structured type plus
            "date-of-birth", and also "name" and "address" when a model is given.
            Listing "name" or "address" explicitly turns on their conservative rules.
        threshold: Detections below this confidence (0..1) are ignored.
        strategy: "block", "warn", "filter" or "redact".
        redaction_method: "mask", "hash", "remove" or "placeholder" (for "redact").
        preserve_format: Masks keep separators, an email's domain and the last four
            characters of cards, phones, IBANs and SSNs.
        include_detections: Put the detections (values included) in abort/warning
            metadata.
        instructions: Replace the judge's default instructions ("{types}" in them is
            replaced by the detection types; the JSON shape is always appended).
        on_violation: Called with every ``ProcessorViolation`` (abort or warning).
        engine: What runs the rules: ``"re2"`` reads each text first with RE2 sets
            (``google-re2``, linear time) that tell which rules can match and where,
            ``"re"`` uses Python's ``re`` alone. The detections are the same; the
            default is ``"re2"`` when ``google-re2`` is installed, else ``"re"``.

    Raises:
        ValueError: An unknown type, strategy or redaction method, a threshold
            outside 0..1, or ``engine="re2"`` without ``google-re2``.
    """

    id = "pii-detector"
    stream_window = True

    def __init__(self, *, model: LanguageModel | str | None = None,
                 detection_types: Sequence[PIIType] | None = None, threshold: float = 0.6,
                 strategy: PIIStrategy = "redact", redaction_method: RedactionMethod = "mask",
                 preserve_format: bool = True, include_detections: bool = False,
                 instructions: str | None = None,
                 on_violation: Callable[[ProcessorViolation], Any] | None = None,
                 engine: Engine = DEFAULT_ENGINE) -> None:
        self.engine: Engine = check_engine(engine, "PIIDetector")
        if detection_types is None:
            types = ALL_PII_TYPES if model is not None else DEFAULT_PII_TYPES
            rule_types = frozenset(DEFAULT_PII_TYPES)
        else:
            types = _check_types(detection_types)
            rule_types = frozenset(types)
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) \
                or not 0.0 <= threshold <= 1.0:
            raise ValueError(f"PIIDetector: threshold must be a number from 0 to 1, "
                             f"got {threshold!r}")
        _check_choice("strategy", strategy, _STRATEGIES)
        _check_choice("redaction_method", redaction_method, REDACTION_METHODS)
        self.model = resolve_model(model) if model is not None else None
        self.detection_types: tuple[PIIType, ...] = types
        self.threshold = float(threshold)
        self.strategy: PIIStrategy = strategy
        self.redaction_method: RedactionMethod = redaction_method
        self.preserve_format = preserve_format
        self.include_detections = include_detections
        self.instructions = instructions
        if on_violation is not None:
            self.on_violation = on_violation
        self._rule_types = rule_types
        self._wide = bool({"name", "address"} & set(types))

    # -- detection -------------------------------------------------------------------

    async def detect(self, text: str) -> list[PIIDetection]:
        """The PII in ``text``: sorted by start, non-overlapping, at or above ``threshold``.

        Raises:
            ProcessorError: The judge model failed and the strategy is "block" (which
                fails closed); other strategies fall back to the rules.
        """
        try:
            return await self._scan(text)
        except _JudgeFailedError as exc:
            raise ProcessorError(f"PII detector could not check the text: {exc}",
                                 processor_id=self.id) from exc.error

    async def _scan(self, text: str) -> list[PIIDetection]:
        found = await off_loop(self.find, text, limit=20_000)
        if self.model is not None and text.strip():
            try:
                found.extend(await self._judge(self.model, text))
            except Exception as exc:
                if self.strategy == "block":
                    raise _JudgeFailedError(exc) from exc
                logger.warning("processor %r: the judge model failed (%s); using the rules "
                               "only", self.id, _describe(exc))
        wanted = set(self.detection_types)
        return resolve_overlaps(d for d in found
                                if d.type in wanted and d.confidence >= self.threshold)

    def find(self, text: str) -> list[PIIDetection]:
        """The rules' detections in ``text`` (unsorted, may overlap), synchronously.

        The rules read a normalised view (see ``_text.normalise``: no-break and
        zero-width spaces, full-width "＠", Arabic-Indic or full-width digits and bidi
        overrides cannot hide a value); every span points into ``text`` itself.
        """
        view = normalise(text)
        found = find_rule_detections(view.text, self._rule_types, engine=self.engine)
        if view.text is text:
            return found
        out: list[PIIDetection] = []
        same_indices = view.keeps_indices
        for d in found:
            start, end = (d.start, d.end) if same_indices and d.end > d.start \
                else view.span(d.start, d.end)
            value = text[start:end]
            if value == d.value and start == d.start and end == d.end \
                    and (d.source, d.view) == ("rules", "original"):
                out.append(d)  # the same detection (the normalisation moved nothing before it)
                continue
            view_name = "original" if value == d.value else "normalised"
            out.append(PIIDetection(d.type, start, end, value, d.confidence, "rules", view_name))
        return out

    async def _judge(self, model: LanguageModel, text: str) -> list[PIIDetection]:
        template = self.instructions or _DEFAULT_INSTRUCTIONS
        instructions = template.replace("{types}", ", ".join(self.detection_types))
        answer = await judge_json(model, processor_id=self.id, instructions=instructions,
                                  text=text, shape=_SHAPE)
        items = answer.get("detections")
        if not isinstance(items, list):
            raise ProcessorError("the judge's answer has no 'detections' list",
                                 processor_id=self.id)
        out: list[PIIDetection] = []
        for item in items:
            if not isinstance(item, dict):
                continue
            pii_type, value = item.get("type"), item.get("value")
            if pii_type not in self.detection_types or not isinstance(value, str):
                continue
            confidence = item.get("confidence", 0.9)
            if isinstance(confidence, bool) or not isinstance(confidence, int | float):
                confidence = 0.9
            out.extend(_locate(text, pii_type, value.strip(), min(max(confidence, 0.0), 1.0)))
        return out

    def redact(self, text: str, detections: Sequence[PIIDetection]) -> str:
        """``text`` with ``detections`` replaced per ``redaction_method``/``preserve_format``."""
        return redact_text(text, detections, method=self.redaction_method,
                           preserve_format=self.preserve_format)

    # -- hooks -----------------------------------------------------------------------

    async def process_input(self, args: ProcessInputArgs) -> list[Message] | None:
        """Apply the strategy to each input message (see the class docstring)."""
        return await self._process_messages(args, args.messages)

    async def process_output_result(self, args: ProcessOutputResultArgs) -> list[Message] | None:
        """Apply the strategy to each response message (see the class docstring)."""
        return await self._process_messages(args, args.messages)

    async def process_tool_result(self, args: ProcessToolResultArgs,
                                  ) -> ProcessToolResultResult | None:
        """Apply the strategy to a tool's result before the model reads it: "block"
        aborts, "warn" reports, "filter" withholds the result, "redact" redacts each of
        its strings."""
        found: list[PIIDetection] = []
        for text in strings(args.result):
            if text:
                found += await self._check(args, text)
        if not found:
            return None
        self._enforce(args, found)
        if self.strategy == "warn":
            return None
        if self.strategy == "filter":
            types = ", ".join(sorted({d.type for d in found}))
            return ProcessToolResultResult(withheld(self.id, args.tool_name,
                                                    f"PII detected: {types}"))

        async def redact(text: str) -> str:
            dets = await self._check(args, text) if text else []
            return self.redact(text, dets) if dets else text

        return ProcessToolResultResult(await map_strings(args.result, redact))

    def hold_back(self, text: str) -> int:
        """The tail of held stream text that may still be (part of) a value.

        A value with spaces in it (a phone, a card, an IBAN, a written-out date) is at
        most ``HOLD_SPAN`` characters long and always has a digit, so the last
        ``HOLD_SPAN`` characters are kept when they hold a digit (or a month name);
        otherwise only the word in progress is. The cut then moves back to the start
        of its word and of any value found across it.
        """
        n = len(text)
        span = HOLD_SPAN_WIDE if self._wide else HOLD_SPAN
        cut = n - span
        tail = text[max(cut, 0):]
        if self._wide or any(ch.isdigit() for ch in tail) or _MONTH_WORD.search(tail):
            if cut <= 0:
                return n
        else:
            cut = n
        return hold_tail(text, n - cut, [(d.start, d.end) for d in self.find(text)])

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Chunk | None:
        """Apply the strategy to one text segment (its context around it is looked at,
        only the segment is changed); other chunks pass through."""
        part = args.part
        if part.type != "text-delta" or not part.text:
            return part
        before = args.text_before
        text = part.text
        whole = before + text + args.text_after
        start, end = len(before), len(before) + len(text)
        found = [PIIDetection(d.type, max(d.start, start) - start, min(d.end, end) - start,
                              text[max(d.start, start) - start:min(d.end, end) - start],
                              d.confidence, d.source, d.view)
                 for d in await self._check(args, whole) if d.start < end and d.end > start]
        if not found:
            return part
        self._enforce(args, found)
        if self.strategy == "warn":
            return part
        if self.strategy == "filter":
            return None
        return TextDelta(self.redact(text, found), part.metadata)

    async def _process_messages(self, args: ProcessorArgs,
                                messages: list[Message]) -> list[Message] | None:
        checked: list[tuple[Message, list[PIIDetection]]] = []
        for msg in messages:
            text = msg.text
            checked.append((msg, await self._check(args, text) if text else []))
        found = [d for _, dets in checked for d in dets]
        if not found:
            return None
        self._enforce(args, found)
        if self.strategy == "warn":
            return None
        if self.strategy == "filter":
            return [msg for msg, dets in checked if not dets]
        return [msg.with_text(self.redact(msg.text, dets)) if dets else msg
                for msg, dets in checked]

    async def _check(self, args: ProcessorArgs, text: str) -> list[PIIDetection]:
        try:
            return await self._scan(text)
        except _JudgeFailedError as exc:
            args.abort(f"PII detector could not check the text: {exc}",
                       metadata={"error": type(exc.error).__name__})

    def _enforce(self, args: ProcessorArgs, found: list[PIIDetection]) -> None:
        """Abort ("block") or report ("warn"); the other strategies report nothing."""
        types = sorted({d.type for d in found})
        detail: dict[str, Any] = {"types": types, "count": len(found)}
        if self.include_detections:
            detail["detections"] = [
                {"type": d.type, "start": d.start, "end": d.end, "value": d.value,
                 "confidence": d.confidence} for d in found]
        reason = f"PII detected: {', '.join(types)}"
        if self.strategy == "block":
            args.abort(reason, metadata=detail)
        if self.strategy == "warn":
            args.warn(reason, detail)


HOLD_SPAN = 48
"""Characters ``PIIDetector`` holds back on the stream while a value may be in progress."""
HOLD_SPAN_WIDE = 96
"""The same with names or addresses among the types (they run longer)."""

_MONTH_WORD = re.compile(r"(?i)\b(?:" + "|".join(sorted(MONTHS, key=len, reverse=True))
                         + r")\b")


def _check_types(types: Sequence[PIIType]) -> tuple[PIIType, ...]:
    if isinstance(types, str):
        raise ValueError(f"PIIDetector: detection_types must be a list of types, not the "
                         f"string {types!r}; write detection_types=[{types!r}]")
    unknown = [t for t in types if t not in ALL_PII_TYPES]
    if unknown:
        raise ValueError(f"PIIDetector: unknown detection type(s) {unknown}; expected some of "
                         f"{list(ALL_PII_TYPES)}")
    if not types:
        raise ValueError("PIIDetector: detection_types is empty; leave it unset for the "
                         "default types or list at least one")
    return tuple(dict.fromkeys(types))


def _check_choice(option: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ValueError(f"PIIDetector: unknown {option} {value!r}; expected one of "
                         f"{list(allowed)}")


def _locate(text: str, pii_type: PIIType, value: str, confidence: float) -> list[PIIDetection]:
    """Every occurrence of a judge-reported ``value`` in ``text`` (case-insensitive if it
    is not found as written)."""
    if not value:
        return []
    haystack, needle = text, value
    if text.find(value) < 0:
        lowered = text.lower()
        if len(lowered) != len(text):
            return []
        haystack, needle = lowered, value.lower()
    out: list[PIIDetection] = []
    start = haystack.find(needle)
    while start >= 0:
        end = start + len(needle)
        out.append(PIIDetection(pii_type, start, end, text[start:end], confidence,
                                "judge"))
        start = haystack.find(needle, end)
    return out
