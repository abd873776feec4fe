"""``RegexFilterProcessor``: block, redact or flag text matching regular expressions.

Zero model calls: custom rules and presets ("pii", "secrets", "urls") run on input
messages, streamed text deltas and the final response. A block never reveals what
matched: its metadata lists rule names and counts only. On the stream each text
delta is checked alone, so put a ``BatchPartsProcessor`` first when a match may span
several deltas.

It does not read through ``procflow.textscan.Scanner`` as the other guards do, for two
reasons. Its redaction is sequential: each rule runs on the text the rules before it
already redacted (a later rule never sees, nor counts, what an earlier one replaced),
which one scan of the original text followed by replacements does not reproduce. And
user patterns must run in linear time: on RE2 itself, or on ``re`` under a time
budget (``USER_PATTERN_BUDGET_SECONDS``), whereas a ``Scanner`` confirms every
candidate match with ``re`` unbounded.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast, get_args

from procflow.errors import ProcessorError
from procflow.messages import Chunk, Message, Part, TextDelta, TextPart
from procflow.processors.args import (
    ProcessInputArgs,
    ProcessorArgs,
    ProcessOutputResultArgs,
    ProcessOutputStreamArgs,
)
from procflow.processors.base import Processor
from procflow.processors.builtin._window import hold_tail
from procflow.textscan import DEFAULT_ENGINE, Engine, check_engine
from procflow.textscan._prefilter import load_re2

__all__ = ["PRESETS", "USER_PATTERN_BUDGET_SECONDS", "RegexFilterProcessor", "RegexRule"]

Preset = Literal["pii", "secrets", "urls"]
Strategy = Literal["block", "redact", "warn"]
Phase = Literal["input", "output", "all"]


@dataclass(frozen=True, slots=True)
class RegexRule:
    """A named pattern and what replaces its matches under the "redact" strategy.

    Attributes:
        name: Shown in block metadata and warnings (never the matched text).
        pattern: A Python regular expression.
        replacement: Literal text put in place of each match (no group references).
        flags: ``re`` flags, e.g. ``re.IGNORECASE``.
    """

    name: str
    pattern: str
    replacement: str = "[REDACTED]"
    flags: int = 0


PRESETS: dict[str, tuple[RegexRule, ...]] = {
    "pii": (
        RegexRule("email", r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b",
                  "[EMAIL]"),
        RegexRule("ssn", r"\b(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}\b", "[SSN]"),
        RegexRule("credit-card", r"\b(?:\d[ -]?){12,18}\d\b", "[CREDIT_CARD]"),
        RegexRule("phone", r"(?<![\w+])(?<!\d[ .-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)|\d{2,4})"
                           r"[ .-]?\d{3,4}[ .-]?\d{3,4}(?![ .-]?\d)", "[PHONE]"),
        RegexRule("ip-address", r"\b(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}"
                                r"(?:25[0-5]|2[0-4]\d|1?\d?\d)\b", "[IP_ADDRESS]"),
    ),
    "secrets": (
        RegexRule("aws-access-key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", "[SECRET]"),
        RegexRule("github-token", r"\bgh[pousr]_[A-Za-z0-9]{36,}\b", "[SECRET]"),
        RegexRule("openai-key", r"\bsk-(?:proj-)?[A-Za-z0-9_-]{20,}", "[SECRET]"),
        RegexRule("slack-token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}", "[SECRET]"),
        RegexRule("google-api-key", r"\bAIza[0-9A-Za-z_-]{35}\b", "[SECRET]"),
        RegexRule("jwt", r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+",
                  "[SECRET]"),
        RegexRule("private-key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?"
                                 r"(?:-----END [A-Z ]*PRIVATE KEY-----|$)", "[SECRET]"),
        RegexRule("credential-assignment",
                  r"(?i)\b(?:api[_-]?key|secret|token|password|passwd)\b\s*[:=]\s*"
                  r"['\"]?[^\s'\"]{8,}", "[SECRET]"),
    ),
    "urls": (
        RegexRule("url", r"\b(?:https?://|www\.)[^\s<>\"'`]+[^\s<>\"'`.,;:!?)\]]",
                  "[URL]"),
    ),
}
"""The preset rule sets, by preset name."""


def _rule(item: RegexRule | Mapping[str, Any], index: int) -> RegexRule:
    if isinstance(item, RegexRule):
        return item
    if not isinstance(item, Mapping):
        raise ValueError(f"RegexFilterProcessor: rules[{index}] must be a RegexRule or a dict "
                         f"with 'name' and 'pattern', got {type(item).__name__}")
    unknown = sorted(set(map(str, item)) - {"name", "pattern", "replacement", "flags"})
    if unknown or "name" not in item or "pattern" not in item:
        raise ValueError(f"RegexFilterProcessor: rules[{index}] needs 'name' and 'pattern' "
                         f"(optional 'replacement', 'flags'); got keys {sorted(map(str, item))}")
    return RegexRule(**item)


def _literal(text: str) -> Callable[[re.Match[str]], str]:
    # A function, so backslashes in a replacement are never read as group references.
    return lambda _match: text


class _Regex(Protocol):
    def finditer(self, text: str) -> Iterator[Any]: ...

    def subn(self, repl: Callable[[Any], str], text: str) -> tuple[str, int]: ...


USER_PATTERN_BUDGET_SECONDS = 0.5
"""Without ``google-re2``: how long one user pattern may run on one text before the
check fails (the text is then treated as matching - fail closed)."""

_RE2_FLAGS = {re.IGNORECASE: "i", re.MULTILINE: "m", re.DOTALL: "s"}
_RE2_UNSUPPORTED = (
    (re.compile(r"\(\?<[=!]"), "lookbehind ((?<=...) or (?<!...))"),
    (re.compile(r"\(\?[=!]"), "lookahead ((?=...) or (?!...))"),
    (re.compile(r"\\[1-9]|\(\?P="), "backreferences (\\1 or (?P=name))"),
    (re.compile(r"\(\?>"), "atomic groups ((?>...))"),
    (re.compile(r"[*+?}]\+"), "possessive quantifiers (*+, ++, ?+, {m,n}+)"),
    (re.compile(r"\(\?\("), "conditionals ((?(1)...|...))"),
)


def _re2_compile(re2: Any, rule: RegexRule) -> _Regex:
    """``rule``'s pattern on RE2 (linear time in the text, whatever the pattern)."""
    inline = ""
    rest = rule.flags
    for flag, letter in _RE2_FLAGS.items():
        if rest & flag:
            inline += letter
            rest &= ~flag
    rest &= ~re.UNICODE
    if rest:
        raise ValueError(f"RegexFilterProcessor: rule {rule.name!r}: flags {rest!r} are not "
                         "supported by the linear-time engine (RE2); use IGNORECASE, "
                         "MULTILINE or DOTALL, or inline them")
    options = re2.Options()
    options.log_errors = False
    try:
        return cast(_Regex, re2.compile(f"(?{inline}){rule.pattern}" if inline else rule.pattern,
                                        options))
    except re2.error as exc:
        feature = next((name for pattern, name in _RE2_UNSUPPORTED
                        if pattern.search(rule.pattern)), None)
        detail = (f"it uses {feature}, which the linear-time engine (RE2) does not support; "
                  "rewrite the pattern without it" if feature else str(exc))
        raise ValueError(f"RegexFilterProcessor: rule {rule.name!r}: pattern "
                         f"{rule.pattern!r} cannot run in linear time: {detail}") from None


class _Budgeted:
    """A ``re`` pattern under a time budget (the fallback when RE2 is not installed)."""

    def __init__(self, regex: re.Pattern[str], name: str, seconds: float) -> None:
        self.regex, self.name, self.seconds = regex, name, seconds

    def _run(self, fn: Callable[[], Any]) -> Any:
        box: list[Any] = []
        worker = threading.Thread(target=lambda: box.append(fn()), daemon=True)
        worker.start()
        worker.join(self.seconds)
        if not box:
            raise TimeoutError(self.name)
        return box[0]

    def finditer(self, text: str) -> Iterator[Any]:
        return iter(self._run(lambda: list(self.regex.finditer(text))))

    def subn(self, repl: Callable[[Any], str], text: str) -> tuple[str, int]:
        return cast(tuple[str, int], self._run(lambda: self.regex.subn(repl, text)))


def _compile(rule: RegexRule, *, user: bool, engine: Engine) -> _Regex:
    if not isinstance(rule.name, str) or not rule.name:
        raise ValueError(f"RegexFilterProcessor: a rule needs a non-empty name, got {rule!r}")
    if not isinstance(rule.pattern, str) or not isinstance(rule.replacement, str):
        raise ValueError(f"RegexFilterProcessor: rule {rule.name!r}: pattern and replacement "
                         "must be strings")
    try:
        regex = re.compile(rule.pattern, rule.flags)
    except (re.error, TypeError, ValueError) as exc:
        raise ValueError(f"RegexFilterProcessor: rule {rule.name!r} has an invalid pattern "
                         f"{rule.pattern!r}: {exc}") from exc
    if regex.fullmatch("") is not None:
        raise ValueError(f"RegexFilterProcessor: rule {rule.name!r}: pattern {rule.pattern!r} "
                         "matches the empty string, so it would match everywhere")
    if not user:
        return regex  # the presets are audited for linear time (tests/processors)
    re2 = load_re2() if engine == "re2" else None
    if re2 is not None:
        return _re2_compile(re2, rule)
    return _Budgeted(regex, rule.name, USER_PATTERN_BUDGET_SECONDS)


class RegexFilterProcessor(Processor):
    """Checks text against regular expressions, with no model involved.

    Args:
        rules: ``RegexRule``s or dicts ``{"name", "pattern", "replacement"?, "flags"?}``.
            User patterns run on RE2 (the ``google-re2`` package, see ``engine``),
            linear in the text whatever the pattern; a pattern using a feature RE2
            lacks (lookaround, backreferences, atomic groups, possessive quantifiers)
            is a ``ValueError`` naming it. On engine ``"re"`` they run on ``re``
            under a time budget (``USER_PATTERN_BUDGET_SECONDS`` per text): a scan over
            budget counts as a match, a redaction over budget raises ``ProcessorError``.
        presets: Ready-made rule sets: "pii" (email, SSN, card number, phone, IPv4),
            "secrets" (cloud and API keys, tokens, private keys, credential
            assignments), "urls".
        strategy: "block" (default) aborts; "redact" replaces matches with the rule's
            replacement; "warn" reports a violation and lets the text through.
        phase: Where to check: "input" (input messages), "output" (streamed text
            deltas and the final response) or "all" (default).
        stream_hold: On the stream (a ``stream_window`` processor) the last this many
            characters wait for more text (extended back to the start of their word
            and of any match reaching into them), so a match spanning chunks is found
            whole: matches with spaces up to this long, matches without any at any
            length. 0 holds back only the word in progress.
        engine: What runs the user patterns: ``"re2"`` (``google-re2``, linear time) or
            ``"re"`` (under the time budget); the default is ``"re2"`` when
            ``google-re2`` is installed, else ``"re"``. The presets always run on
            ``re`` (they are audited for linear time). The two differ where RE2's
            syntax does: its ``\\w``, ``\\d`` and ``\\b`` know ASCII only.

    Raises:
        ValueError: No rule at all, an unknown preset/strategy/phase, a duplicate rule
            name, an invalid pattern (the error names the rule), or ``engine="re2"``
            without ``google-re2``.
    """

    id = "regex-filter"
    stream_window = True

    def __init__(self, *, rules: Sequence[RegexRule | Mapping[str, Any]] = (),
                 presets: Sequence[Preset] = (), strategy: Strategy = "block",
                 phase: Phase = "all", stream_hold: int = 32,
                 engine: Engine = DEFAULT_ENGINE) -> None:
        self.engine: Engine = check_engine(engine, "RegexFilterProcessor")
        if isinstance(stream_hold, bool) or not isinstance(stream_hold, int) or stream_hold < 0:
            raise ValueError(f"RegexFilterProcessor: stream_hold must be an int >= 0, "
                             f"got {stream_hold!r}")
        self.stream_hold = stream_hold
        if strategy not in get_args(Strategy):
            raise ValueError(f"RegexFilterProcessor: strategy must be one of "
                             f"{list(get_args(Strategy))}, got {strategy!r}")
        if phase not in get_args(Phase):
            raise ValueError(f"RegexFilterProcessor: phase must be one of "
                             f"{list(get_args(Phase))}, got {phase!r}")
        preset_names: list[str] = [presets] if isinstance(presets, str) else list(presets)
        all_rules = [_rule(item, i) for i, item in enumerate(rules)]
        for name in preset_names:
            if name not in PRESETS:
                raise ValueError(f"RegexFilterProcessor: unknown preset {name!r}; expected "
                                 f"some of {sorted(PRESETS)}")
            all_rules += PRESETS[name]
        if not all_rules:
            raise ValueError("RegexFilterProcessor: nothing to check; give rules=[...] and/or "
                             f"presets=[...] (one of {sorted(PRESETS)})")
        names = [r.name for r in all_rules]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"RegexFilterProcessor: duplicate rule name(s) {duplicates}")
        self.rules: tuple[RegexRule, ...] = tuple(all_rules)
        user_rules = {id(r) for r in all_rules[:len(rules)]}
        self._compiled = [(r, _compile(r, user=id(r) in user_rules, engine=self.engine))
                          for r in all_rules]
        self.strategy: Strategy = strategy
        self.phase: Phase = phase
        self.stream_window = phase != "input"

    def scan(self, text: str) -> dict[str, int]:
        """Rule name -> number of matches in ``text``, for the rules that matched."""
        found: dict[str, int] = {}
        for rule, regex in self._compiled:
            try:
                n = sum(1 for _ in regex.finditer(text))
            except TimeoutError:
                n = 1  # over its time budget: treated as a match (fail closed)
            if n:
                found[rule.name] = n
        return found

    def redact(self, text: str) -> tuple[str, dict[str, int]]:
        """``text`` with every match replaced, and the match counts per rule."""
        found: dict[str, int] = {}
        for rule, regex in self._compiled:
            try:
                text, n = regex.subn(_literal(rule.replacement), text)
            except TimeoutError:
                raise ProcessorError(
                    f"processor '{self.id}': rule {rule.name!r} ran over its time budget "
                    f"({USER_PATTERN_BUDGET_SECONDS}s); install google-re2 to run user "
                    "patterns in linear time", processor_id=self.id) from None
            if n:
                found[rule.name] = n
        return text, found

    def _check(self, text: str, args: ProcessorArgs, where: str) -> str:
        """Apply the strategy to one text; returns the text to keep."""
        if self.strategy == "redact":
            return self.redact(text)[0]
        found = self.scan(text)
        if found:
            matches = [{"rule": name, "count": n} for name, n in found.items()]
            names = ", ".join(found)
            detail = {"phase": where, "strategy": self.strategy, "matches": matches}
            if self.strategy == "block":
                args.abort(f"Blocked by regex filter: {where} matched rule(s) {names}",
                           metadata=detail)
            args.warn(f"Regex filter: {where} matched rule(s) {names}", detail)
        return text

    def _messages(self, messages: Sequence[Message], args: ProcessorArgs,
                  where: str) -> list[Message] | None:
        out: list[Message] = []
        changed = False
        for msg in messages:
            parts: list[Part] = []
            for p in msg.content.parts:
                if isinstance(p, TextPart):
                    text = self._check(p.text, args, where)
                    parts.append(p if text == p.text else TextPart(text=text))
                else:
                    parts.append(p)
            flat = new_flat = msg.content.content
            if flat is not None and not parts:
                new_flat = self._check(flat, args, where)
            if new_flat == flat and parts == msg.content.parts:
                out.append(msg)
                continue
            changed = True
            content = msg.content.model_copy(update={"parts": parts, "content": new_flat})
            out.append(msg.model_copy(update={"content": content}))
        return out if changed else None

    def process_input(self, args: ProcessInputArgs) -> list[Message] | None:
        """Check the input messages' text.

        Raises:
            TripwireError: The strategy is "block" and a rule matched.
        """
        if self.phase == "output":
            return None
        return self._messages(args.messages, args, "input")

    def hold_back(self, text: str) -> int:
        """The tail of held stream text a match may still start in (see ``stream_hold``)."""
        spans: list[tuple[int, int]] = []
        for _, regex in self._compiled:
            try:
                spans += [(m.start(), m.end()) for m in regex.finditer(text)]
            except TimeoutError:
                return len(text)
        return hold_tail(text, self.stream_hold, spans)

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Chunk | None:
        """Check each streamed text segment (the stream window never cuts a match).

        Raises:
            TripwireError: The strategy is "block" and a rule matched.
        """
        part = args.part
        if self.phase == "input" or part.type != "text-delta":
            return part
        text = part.text
        new = self._check(text, args, "output")
        if new == text:
            return part
        return TextDelta(new, part.metadata)

    def process_output_result(self, args: ProcessOutputResultArgs) -> list[Message] | None:
        """Check the response messages' text (and redact ``result.text`` too).

        Raises:
            TripwireError: The strategy is "block" and a rule matched.
        """
        if self.phase == "input":
            return None
        out = self._messages(args.messages, args, "output")
        if self.strategy == "redact" and args.result.text:
            args.result.text = self.redact(args.result.text)[0]
        return out
