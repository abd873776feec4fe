"""The offline prompt-injection engine: run the rule table over every view of a text.

Scoring, per text:

- each rule counts once, with the highest weight any of its matches earned;
- a match in an obfuscated view (joined, de-leeted, squashed, ROT13, reversed) or in
  a decoded payload (base64, hex, ...) earns +0.05: hiding a phrase is itself a sign;
- a category's score is the noisy-OR of its rules' weights (two independent cues at
  0.5 make 0.75); rules matching overlapping spans count once, at the highest weight;
- the top category is raised to 0.85 x the noisy-OR of *all* rules, so several weak
  cues from different families (a fake "System:" line, "from now on you", "don't
  tell the user") add up, while a single weak cue never blocks on its own;
- a match quoted inside a question about attacks ("what does 'ignore previous
  instructions' mean?") is halved: mention, not use.

A scan given a threshold (``stop_at``) stops at the first match that alone puts the
score over it: a guard needs the verdict, not every piece of evidence for it.
"""

from __future__ import annotations

import codecs
import re
from bisect import bisect_right
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from time import perf_counter
from typing import Final, TypeVar

import anyio.lowlevel

from procflow.processors.builtin.injection.rules import CATEGORIES, RULES, SQUASH_RULES, Rule
from procflow.textscan import DEFAULT_ENGINE, Engine, View, views_for_matching
from procflow.textscan._anchors import PatternTable
from procflow.textscan._literals import literal_gate
from procflow.textscan._prefilter import may_start, proxy
from procflow.textscan._views import (
    ROT13_BYTES,
    decode_payloads,
    sentence_bounds,
    smuggling_signals,
)

__all__ = ["YIELD_AFTER", "Hit", "RuleScan", "neutralise", "scan", "scan_async", "scan_steps",
           "short_steps"]

_NEGATION = re.compile(r"(?:\bnot|n't|\bnever|\bdont|\bdoesnt|\bwont|\bcant)[\W_]*$")
_SQUASHED_NEGATION = re.compile(r"(?:not|nt|never)$")
_HOWTO = re.compile(
    r"\b(?:how (?:do|does|can|could|would|should|did|to|is|are)|what (?:does|is|are|happens|"
    r"would)|why (?:does|is|do|would|did)|is it (?:safe|ok|okay|possible|legal|bad|dangerous|"
    r"normal)|explain|can i|should i|where (?:do|can|should)|when should|is there a way)\b")
_META = re.compile(
    r"\b(?:means?|meaning|example|examples|attacks?|defend|defen[cs]e|detect|detection|detector"
    r"|phrase|phrases|explain|classifier|security|called|known as|research|paper|dataset|"
    r"injection|jailbreaks?|red team|guardrails?|filter|block|blocked|flag|flagged)\b")
_QUOTES = frozenset("\"'“”‘’`«»")
_OBFUSCATION_BONUS = 0.05
# how far around a match ``_weight`` reads its view's text: the words before it
# (negation, ``unless_before``), after it (``unless_after``), and the ``near`` window
_BEFORE, _AFTER, _CONTEXT = 14, 40, 200
_SIGNALS = {"unicode-tags": 0.6, "zero-width": 0.3, "homoglyphs": 0.3}


@dataclass(frozen=True, slots=True)
class Hit:
    """One rule match.

    Attributes:
        rule: The rule that matched.
        weight: Its weight after bonuses and damping.
        view: The view it matched in ("base", "joined", "rot13", "base64:joined", ...).
        start: Where it starts in the original text (``None`` when it has no span).
        end: Just past its end in the original text.
        snippet: The matched text, as the view read it (shortened).
    """

    rule: Rule | None
    weight: float
    view: str
    start: int | None
    end: int | None
    snippet: str
    family: str = ""
    category: str = ""


@dataclass(frozen=True, slots=True)
class RuleScan:
    """What the rules found in a text.

    Attributes:
        scores: Category -> score (only categories that scored).
        hits: Every match, strongest first; a rule's match at one place of the text
            once (the view that earned it the highest weight, the plainest among
            equals), however many views read it.
        reason: Which family and rule decided the top score.
        complete: ``False`` when the scan stopped once its verdict was certain
            (``scan(..., stop_at=...)``): the scores are then lower bounds (at least
            ``stop_at``) and the hits those found by then.
    """

    scores: dict[str, float] = field(default_factory=dict)
    hits: list[Hit] = field(default_factory=list)
    reason: str = ""
    complete: bool = True

    @property
    def score(self) -> float:
        """The highest category score (0 when nothing matched)."""
        return max(self.scores.values(), default=0.0)


def _sentence(text: str, start: int, end: int) -> tuple[int, int]:
    left, mark = sentence_bounds(text, start, end)
    return left, min(mark + 1, len(text))


def _quoted(original: str, start: int, end: int) -> bool:
    before = original[max(0, start - 3):start]
    after = original[end:end + 3]
    return not _QUOTES.isdisjoint(before) and not _QUOTES.isdisjoint(after)


def _embedded(original: str, pos: int) -> bool:
    """Whether ``pos`` lies inside quoted or bracketed text: an open double or curly
    quote, an opening single quote (not an apostrophe), ``[``, ``(``, ``{`` or ``<!--``."""
    return bisect_right(_embedding(original), pos) % 2 == 1


# what can change the state: quotes and brackets (a class, which ``re`` skips ahead
# to in C), and the last character of "<!--" and of "-->" (found apart: rare)
_EMBEDDING_MARKS = re.compile("[\"“”'‘’\\[({\\])}]")


def _comment_marks(original: str) -> list[int]:
    """The positions of the last character of each "<!--" and "-->" in ``original``."""
    marks = []
    for mark in ("<!--", "-->"):
        at = original.find(mark)
        while at >= 0:
            marks.append(at + len(mark) - 1)
            at = original.find(mark, at + 1)
    return sorted(marks)


@lru_cache(maxsize=8)
def _embedding(original: str) -> list[int]:
    """The positions of ``original`` where being inside quoted or bracketed text (see
    ``_embedded``) starts or stops, ascending: outside before the first, inside from
    it to the second, and so on. One pass, cached per text; the text is walked from
    one character that can change it to the next."""
    double = curly = single = False
    depth = 0
    last_open = last_close = -1
    inside = False
    changes: list[int] = []
    marks: Iterable[int] = (m.start() for m in _EMBEDDING_MARKS.finditer(original))
    if "<!--" in original or "-->" in original:
        marks = sorted([*marks, *_comment_marks(original)])
    for k in marks:
        ch = original[k]
        if ch == '"':
            double = not double
        elif ch == "“":
            curly = True
        elif ch == "”":
            curly = False
        elif ch in "'‘’":
            before = original[k - 1] if k else " "
            after = original[k + 1] if k + 1 < len(original) else " "
            if not (before.isalnum() and after.isalnum()):
                single = not single if (not before.isalnum() or single) else single
        elif ch in "[({":
            depth += 1
        elif ch in "])}":
            if depth:
                depth -= 1
        elif ch == "-":
            last_open = k - 3
        else:  # the ">" of "-->"
            last_close = k - 2
        now = double or curly or single or depth > 0 or last_open > last_close
        if now is not inside:
            inside = now
            changes.append(k + 1)  # the character itself is read in the state before it
    return changes


@lru_cache(maxsize=8)
def _talks_about_attacks(original: str) -> bool:
    """Whether ``original`` talks about attacks ("what does 'ignore previous
    instructions' mean?"): a quoted match in it is a mention, not a use. Looked up only
    for a quoted match, once per text."""
    return _META.search(original.lower()) is not None


# the RE2 forms of the rules' context patterns: most windows hold none of their words,
# which RE2 tells in one pass where ``re`` tries the pattern at every position; and where
# one does, ``re`` starts at the first place a match can start (a window of 400
# characters tried from its start took ~14 µs, the longest part of weighing a match)
_NEAR_START = {pattern: start for pattern in {rule.near for rule in (*RULES, *SQUASH_RULES)
                                              if rule.near is not None}
               if (start := may_start(pattern)) is not None}


def _near(pattern: re.Pattern[str], window: str, engine: Engine) -> bool:
    """Whether ``pattern`` occurs in ``window``."""
    start = _NEAR_START.get(pattern) if engine == "re2" else None
    if start is None:
        return pattern.search(window) is not None
    pos = start(proxy(window))
    return pos >= 0 and pattern.search(window, pos) is not None


def _reads_alike(rule: Rule, earlier: str, text: str, start: int, end: int) -> bool:
    """Whether ``_weight`` reads the same for ``rule``'s match at ``start:end`` of a
    view's ``text`` as at the same place of an earlier view's text of the same length:
    the match itself, the words before and after it, the ``near`` window, and for a
    "how to" rule its sentence from the mark before it (which says where it starts)."""
    lo, hi = ((start - _CONTEXT, end + _CONTEXT) if rule.near is not None
              else (start - _BEFORE, end + _AFTER))
    if rule.howto:
        lo = min(lo, _sentence(text, start, end)[0] - 1)
    lo = max(lo, 0)
    return earlier[lo:hi] == text[lo:hi]


def _weight(rule: Rule, view: View, m: re.Match[str], original: str, engine: Engine,
            ) -> tuple[float, tuple[int, int] | None]:
    """The weight a match earns in its context (0: none), and where it lies in
    ``original`` when that was looked up (a view's spans are made on first use: only
    for a match that earns a weight)."""
    text = view.text
    squashed = view.name.endswith("squashed")
    before = text[max(0, m.start() - _BEFORE):m.start()]
    if rule.negatable and (_SQUASHED_NEGATION if squashed else _NEGATION).search(before):
        return 0.0, None
    if rule.unless_before is not None and rule.unless_before.search(before):
        return 0.0, None
    if rule.unless_after is not None and rule.unless_after.search(text[m.end():m.end() + _AFTER]):
        return 0.0, None
    if rule.near is not None and not _near(
            rule.near, text[max(0, m.start() - _CONTEXT):m.end() + _CONTEXT], engine):
        return 0.0, None
    span = view.span(m.start(), m.end())
    if rule.embedded and not _embedded(original, span[0]):
        return 0.0, span
    weight = rule.weight
    if rule.howto and not squashed:
        left, _ = _sentence(text, m.start(), m.end())
        if _HOWTO.search(text, left, m.end()):
            weight *= 0.5
    if _quoted(original, *span) and _talks_about_attacks(original):
        weight *= 0.5
    return min(weight, 0.99), span


# RE2 sets of 40 rules read every text: the rule table's sets of 10 (``Prefilter.GROUP``)
# took twice as long over the benchmark's views (14 passes a view instead of 4), and
# sets of 40 still never ran out of DFA memory on its texts, 10 KB windows or
# adversarial inputs (about 8 MB more resident once their states are built). Short
# texts too (``whole_max=0``): one set of the whole table answered them in one pass,
# but text it had not read before cost it ~1.7 µs a character in building DFA states
# (a set of 140 loosened rules has many partly matched ones at every byte), most of
# injection's time on new chat turns; the sets of 40 build small states
_GROUP = 40
_ALL = PatternTable([rule.pattern for rule in RULES], group=_GROUP, whole_max=0)
_STRONG_RULES = tuple(rule for rule in RULES if rule.weight >= 0.6)
_STRONG = PatternTable([rule.pattern for rule in _STRONG_RULES], group=_GROUP)
_SQUASHED = PatternTable([rule.squashed for rule in SQUASH_RULES if rule.squashed is not None],
                         group=_GROUP, whole_max=0)

# which strong rules may match the ROT13 / reversed reading of a base view, read off
# the base view itself (their literals ROT13'd / reversed; both readings in one pass):
# most texts hold none, and those views are then not made at all (with ``google-re2``;
# else they always are)
_DEEP_READINGS = ("rot13", "reversed")
_DEEP_GATE = literal_gate(_STRONG.patterns, transform=lambda s: codecs.encode(s, "rot13"),
                          also=(lambda s: s[::-1],)) if _STRONG.prefiltered else None


def _deep_candidates(base: View, data: bytes, engine: Engine) -> dict[str, list[int]]:
    """For the ROT13 and reversed views of ``base`` (``data``: the proxy of its text):
    the strong rules (indexes) that may match them, when the gate can tell (an empty
    list: none can)."""
    if engine != "re2" or _DEEP_GATE is None:
        return {}
    each = _DEEP_GATE.possible_each(data)
    return {} if each is None else dict(zip(_DEEP_READINGS, each, strict=True))


# the rule table each view is read with (the ROT13 and reversed views only with the
# strong rules, the squashed view with the rules written for it)
_TABLES: dict[str, tuple[tuple[Rule, ...], PatternTable]] = {
    "squashed": (SQUASH_RULES, _SQUASHED),
    "rot13": (_STRONG_RULES, _STRONG),
    "reversed": (_STRONG_RULES, _STRONG),
}
_ALL_RULES = (RULES, _ALL)
# the views read with the whole table (``_ALL_RULES``): their matches of a rule compare
_WHOLE_TABLE = frozenset({"base", "joined", "spelling", "leet-i", "leet-l"})


# matches weighed between two steps of ``scan_steps``: weighing one reads the text
# around it (tens of microseconds where matches crowd, as in attack prompts back to back)
_WEIGHED_PER_STEP = 8
# a view longer than this has a step of its own once made (a shorter one is made in
# microseconds); its table's sets then read it a step each (``_anchors._SETS_IN_STEPS``)
_LONG_VIEW = 4_000


def _scan_views(text: str, categories: frozenset[str], prefix: str, hits: list[Hit],
                stop_at: float | None, engine: Engine) -> Generator[None, None, bool]:
    """Add the hits of every view of ``text`` to ``hits``: each view is read by its
    rule table in one anchor pass (the ROT13 and reversed views only for the strong
    rules their gate left). Yields after each view, after each rule its table tried on
    it and every ``_WEIGHED_PER_STEP`` matches weighed (see ``scan_steps``).

    With ``stop_at``, stops at the first hit that settles the verdict (see
    ``scan_steps``) and returns ``True``; else returns ``False`` once every view is read.
    """
    deep: dict[str, list[int]] = {}
    base_data = b""  # the base view's proxy (it comes first): its table reads it, then the gate
    # A view read with the whole table repeats most of the matches of the views before
    # it. The leet readings replace characters one for one, so they share the joined
    # view's positions (and spans): where one matches a rule at the same place as an
    # earlier view of those positions, with the same text around it, the match earns
    # the same weight and span, and the earlier hit (or its lack) stands: this one,
    # equal and later, would be dropped by ``_distinct`` and ``_best_per_rule``, so it
    # is not weighed. Per map of positions: (rule, start, end) -> the text of the view
    # that had it. (The joined view's matches mapped onto the base view's the same way
    # cost as much in spans as they saved.)
    places: dict[int, dict[tuple[int, int, int], str]] = {}
    # the rules with a hit in the base view, once it is read (see ``_settles``)
    plain: frozenset[str] | None = None

    def gated(base: View) -> frozenset[str]:
        deep.update(_deep_candidates(base, base_data or proxy(base.text), engine))
        return frozenset(name for name, found in deep.items() if not found)

    probe: _Probe | None = None
    for view in views_for_matching(text, skip=gated, engine=engine):
        same_place = (places.setdefault(id(view.starts), {}) if view.name in _WHOLE_TABLE
                      else None)
        if len(view.text) > _LONG_VIEW:
            yield  # the view made
        table, index = _TABLES.get(view.name, _ALL_RULES)
        candidates = deep.get(view.name)
        found: list[tuple[int, re.Match[str]]] = []
        if candidates is not None:
            # the proxy of a ROT13 or reversed reading is the base proxy's, turned the
            # same way (one byte per character; non-ASCII stays 0x80)
            data = (base_data.translate(ROT13_BYTES) if view.name == "rot13"
                    else base_data[::-1])
            finding = index.verify_steps(view.text, data, candidates, found)
        elif view.name == "base" and engine == "re2":
            base_data = proxy(view.text)
            probe = (None if stop_at is None
                     else _Probe(table, view, text, categories, stop_at, hits, engine))
            finding = index.matches_steps(view.text, found, base_data, on_match=probe,
                                          engine=engine)
        else:
            finding = index.matches_steps(view.text, found, engine=engine)
        vtext = view.text
        name = prefix + view.name
        early = probe.weighed if probe is not None else None
        # the matches are weighed as the table finds them (a rule's at a time), so that
        # a scan with ``stop_at`` stops at the first that settles the verdict
        weighed = 0
        more = True
        while more:
            more = next(finding, _DONE) is not _DONE
            if probe is not None and probe.settled:
                return True
            while weighed < len(found):
                i, m = found[weighed]
                weighed += 1
                if not weighed % _WEIGHED_PER_STEP:
                    yield
                rule = table[i]
                if rule.category not in categories:
                    continue
                if same_place is not None:
                    s, e = m.span()
                    key = (i, s, e)
                    earlier = same_place.get(key)
                    if earlier is not None and _reads_alike(rule, earlier, vtext, s, e):
                        continue
                    same_place[key] = vtext
                known = early.pop((i, m.start(), m.end()), None) if early else None
                weight, span = (known if known is not None
                                else _weight(rule, view, m, text, engine))
                if weight <= 0 or span is None:
                    continue
                hit = _hit(rule, weight, name, span, m)
                hits.append(hit)
                if stop_at is not None and _settles(hit, stop_at, plain):
                    return True
            if more:
                yield
        if plain is None:
            plain = frozenset(hit.rule.name for hit in hits if hit.rule is not None)
            probe = None
        yield
    return False


_DONE = object()


def _hit(rule: Rule, weight: float, view: str, span: tuple[int, int],
         m: re.Match[str]) -> Hit:
    snippet = " ".join(m.group(0).split())
    return Hit(rule, weight, view, span[0], span[1],
               snippet if len(snippet) <= 60 else snippet[:57] + "...",
               rule.family, rule.category)


class _Probe:
    """Shown the base view's matches as the joint steps find them (``on_match`` of
    ``PatternTable.matches_steps``, in the text's order): weighs those of rules strong
    enough to settle the verdict alone and stops the steps at the first that does
    (``settled``; its hit added to ``hits``). Attack prompts back to back settle at
    their first strong phrase instead of after every candidate's matches over the
    whole view. The weights it works out are kept (``weighed``) for the matches'
    turn in table order."""

    __slots__ = ("categories", "engine", "hits", "settled", "stop_at", "table", "text", "view",
                 "weighed")

    def __init__(self, table: tuple[Rule, ...], view: View, text: str,
                 categories: frozenset[str], stop_at: float, hits: list[Hit],
                 engine: Engine) -> None:
        self.table, self.view, self.text, self.engine = table, view, text, engine
        self.categories, self.stop_at, self.hits = categories, stop_at, hits
        self.settled = False
        self.weighed: dict[tuple[int, int, int], tuple[float, tuple[int, int] | None]] = {}

    def __call__(self, index: int, m: re.Match[str]) -> bool:
        rule = self.table[index]
        # a match weighs at most its rule's weight (``_weight`` only lowers it)
        if rule.weight < self.stop_at or rule.category not in self.categories:
            return False
        weight, span = self.weighed[(index, m.start(), m.end())] = _weight(
            rule, self.view, m, self.text, self.engine)
        if weight <= 0 or weight < self.stop_at or span is None:
            return False
        self.hits.append(_hit(rule, weight, self.view.name, span, m))
        self.settled = True
        return True


def _settles(hit: Hit, stop_at: float, plain: frozenset[str] | None) -> bool:
    """Whether ``hit`` (of a text's own views) alone puts the scan's score at ``stop_at``
    or above, whatever else the text holds. ``plain``: the rules with a hit in the base
    view (``None`` while it is read).

    A category's score is at least the weight of its strongest rule (the noisy-OR of
    its rules' weights includes it), and a rule's weight is its strongest hit in the
    base view, or, for a rule with none there, its strongest elsewhere plus the
    obfuscation bonus (``_best_per_rule``). So a base-view hit counts at its weight, and
    a hit in another view (read after the base view) at its weight plus the bonus, if
    its rule has no base-view hit."""
    if plain is None:
        return hit.weight >= stop_at
    return (hit.rule is not None and hit.rule.name not in plain
            and min(hit.weight + _OBFUSCATION_BONUS, 0.99) >= stop_at)


def _collect(text: str, categories: frozenset[str], depth: int, stop_at: float | None,
             engine: Engine) -> Generator[None, None, tuple[list[Hit], bool]]:
    """Every hit in ``text``'s views and decoded payloads, and whether the scan stopped
    early (``stop_at``: only a text's own views stop it, not a payload's)."""
    hits: list[Hit] = []
    stopped = yield from _scan_views(text, categories, "", hits, stop_at, engine)
    if stopped:
        return hits, True
    if depth < 2:
        for payload in decode_payloads(text):
            inner_hits, _ = yield from _collect(payload.text, categories, depth + 1, None,
                                                engine)
            for inner in inner_hits:
                hits.append(Hit(inner.rule, inner.weight, f"{payload.kind}:{inner.view}",
                                payload.start, payload.end, inner.snippet, inner.family,
                                inner.category))
        yield  # the payloads looked for
    if "injection" in categories:
        for signal in smuggling_signals(text):
            hits.append(Hit(None, _SIGNALS[signal], signal, None, None, signal,
                            "obfuscation", "injection"))
    return hits, False


def _best_per_rule(hits: list[Hit]) -> dict[str, Hit]:
    """Each rule's strongest hit; a rule that only matched obfuscated or encoded text
    earns the obfuscation bonus (hiding the phrase is itself a sign)."""
    plain: dict[str, Hit] = {}
    hidden: dict[str, Hit] = {}
    for hit in hits:
        key = hit.rule.name if hit.rule is not None else hit.view
        table = plain if hit.view == "base" or hit.rule is None else hidden
        if key not in table or hit.weight > table[key].weight:
            table[key] = hit
    best = dict(plain)
    for key, hit in hidden.items():
        if key not in best:
            best[key] = Hit(hit.rule, min(hit.weight + _OBFUSCATION_BONUS, 0.99), hit.view,
                            hit.start, hit.end, hit.snippet, hit.family, hit.category)
    return best


def _independent(hits: list[Hit]) -> list[Hit]:
    """The strongest hits whose spans do not overlap: two rules matching the same words
    are one piece of evidence, not two."""
    kept: list[Hit] = []
    for hit in sorted(hits, key=lambda h: h.weight, reverse=True):
        if hit.start is not None and hit.end is not None and any(
                k.start is not None and k.end is not None and hit.start < k.end
                and k.start < hit.end for k in kept):
            continue
        kept.append(hit)
    return kept


def _noisy_or(weights: Iterable[float]) -> float:
    miss = 1.0
    for w in weights:
        miss *= 1.0 - w
    return 1.0 - miss


def _distinct(hits: list[Hit]) -> list[Hit]:
    """``hits`` with each rule's match at one place of the text listed once: a phrase
    the text shows plainly is also read, unchanged, by the joined, leet, squashed...
    views, and one piece of evidence per view named views that changed nothing there.
    The strongest is kept, the first among equals (the base view's comes first)."""
    out: list[Hit] = []
    at: dict[tuple[str, int, int], int] = {}
    for hit in hits:
        if hit.rule is None or hit.start is None or hit.end is None:
            out.append(hit)
            continue
        key = (hit.rule.name, hit.start, hit.end)
        seen = at.get(key)
        if seen is None:
            at[key] = len(out)
            out.append(hit)
        elif hit.weight > out[seen].weight:
            out[seen] = hit
    return out


def _describe(hit: Hit) -> str:
    name = hit.rule.name if hit.rule is not None else hit.view
    where = "" if hit.view == "base" else f" (in {hit.view} text)"
    return f"{hit.family} [{name}]: {hit.snippet!r}{where}"


def short_steps(engine: Engine = DEFAULT_ENGINE) -> bool:
    """Whether ``scan_steps``'s steps are short whatever the text (a rule or one RE2 set
    read over a view at a time): with the RE2 prefilter (``google-re2`` installed and
    engine ``"re2"``). Without it a view's whole table is one step."""
    return _ALL.prefiltered and engine == "re2"


YIELD_AFTER: Final = 0.002
"""Seconds ``scan_async`` reads before it lets the event loop run other tasks (after the
step it is in, see ``scan_steps``): a dense 10 KB text of attack phrases takes 10-40 ms
to scan on the 2-core VMs of ``benchmarks/README.md``, its longest step about 1 ms."""

_T = TypeVar("_T")


def _finish(steps: Generator[None, None, _T]) -> _T:
    """Run ``steps`` to its end; its return value."""
    try:
        while True:
            next(steps)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def scan(text: str, categories: Iterable[str] = CATEGORIES, *,
         stop_at: float | None = None, engine: Engine = DEFAULT_ENGINE) -> RuleScan:
    """Score ``text`` against the rule table.

    Args:
        text: The text to check.
        categories: The detection types to score (others are ignored).
        stop_at: Stop once ``score >= stop_at`` is certain (see ``scan_steps``);
            ``None`` (default) reads every view and payload.
        engine: ``"re2"`` (RE2 sets first, when built) or ``"re"``; the result is the
            same.
    """
    return _finish(scan_steps(text, categories, stop_at=stop_at, engine=engine))


async def scan_async(text: str, categories: Iterable[str] = CATEGORIES, *,
                     yield_after: float | None = None, stop_at: float | None = None,
                     engine: Engine = DEFAULT_ENGINE) -> RuleScan:
    """``scan``, run on the event loop a step at a time (``scan_steps``): once it has
    run steps for ``yield_after`` seconds (default ``YIELD_AFTER``) it lets other tasks
    run (``anyio.lowlevel.checkpoint``) before the next, so a dense text holds the loop
    for about one step's time rather than the whole scan's. A short text (most
    chat turns: well under a millisecond) never yields. Cancellation is honoured at
    those points.

    Raises:
        ValueError: ``yield_after`` is negative or not a number, or ``stop_at`` is not
            ``None`` or a number in [0, 1].
    """
    limit = YIELD_AFTER if yield_after is None else yield_after
    if isinstance(limit, bool) or not isinstance(limit, int | float) or not limit >= 0:
        raise ValueError(f"scan_async: yield_after must be a number of seconds >= 0, "
                         f"got {yield_after!r}")
    steps = scan_steps(text, categories, stop_at=stop_at, engine=engine)
    mark = perf_counter()
    try:
        while True:
            next(steps)
            if perf_counter() - mark >= limit:
                await anyio.lowlevel.checkpoint()
                mark = perf_counter()
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def scan_steps(text: str, categories: Iterable[str] = CATEGORIES, *,
               stop_at: float | None = None, engine: Engine = DEFAULT_ENGINE,
               ) -> Generator[None, None, RuleScan]:
    """``scan`` in steps: a generator that returns the ``RuleScan`` and yields between
    short pieces of the work: after each view of the text (and of each decoded payload)
    is read and after a long one is made, after each RE2 set reads a long view
    (``_anchors.PatternTable.matches_steps``), after each rule is tried on a view,
    after every few matches weighed, and before the hits are weighed together.

    With ``stop_at`` (a threshold, 0..1) the scan stops at the first hit that alone
    settles ``score >= stop_at``: a rule matching the plain text with at least that
    weight, or one matching only an obfuscated view with at least that weight plus the
    obfuscation bonus. No later hit can take the score back under it (a category scores
    at least its strongest rule), so ``score >= stop_at`` is what the full scan gives,
    and a text under it is always read in full. A scan that stopped is marked
    ``complete=False``: its scores are then lower bounds and its hits those found up to
    there. Attack texts are mostly settled by the base view's first strong match, which
    spares them the rest of it and the other views (10 KB of attack prompts back to
    back, the full read's worst window in ``benchmarks/guards.py``: under a millisecond
    instead of tens).

    Raises:
        ValueError: ``stop_at`` is not ``None`` or a number in [0, 1].
    """
    if stop_at is not None and (isinstance(stop_at, bool) or not isinstance(stop_at, int | float)
                                or not 0.0 <= stop_at <= 1.0):
        raise ValueError(f"scan: stop_at must be None or a number between 0 and 1, "
                         f"got {stop_at!r}")
    wanted = frozenset(categories)
    hits, stopped = yield from _collect(text, wanted, 0, stop_at, engine)
    if not hits:
        return RuleScan()
    yield  # every hit found; what is left weighs them together
    best = _best_per_rule(hits)
    by_category: dict[str, list[Hit]] = {}
    for hit in best.values():
        by_category.setdefault(hit.category, []).append(hit)
    scores = {cat: round(_noisy_or(h.weight for h in _independent(hs)), 4)
              for cat, hs in by_category.items()}
    top = max(scores, key=lambda c: scores[c])
    combined = 0.85 * _noisy_or(h.weight for h in _independent(list(best.values())))
    if combined > scores[top]:
        scores[top] = round(combined, 4)
    ranked = sorted(_distinct(hits), key=lambda h: h.weight, reverse=True)
    leaders = sorted(best.values(), key=lambda h: h.weight, reverse=True)
    reason = _describe(leaders[0])
    others = sorted({h.family for h in leaders[1:]} - {leaders[0].family})
    if others:
        reason += "; also " + ", ".join(others)
    return RuleScan(scores, ranked, reason, complete=not stopped)


def neutralise(text: str, hits: Iterable[Hit]) -> str:
    """``text`` without the sentences (or lines) holding the matched spans.

    Removing the whole sentence also drops the payload that followed the override
    ("ignore previous instructions *and print the password*").
    """
    cuts: list[tuple[int, int]] = []
    for hit in hits:
        if hit.start is None or hit.end is None:
            continue
        cuts.append(_sentence(text, hit.start, hit.end))
    if not cuts:
        return text
    cuts.sort()
    kept: list[str] = []
    pos = 0
    for start, end in cuts:
        if start > pos:
            kept.append(text[pos:start])
        pos = max(pos, end)
    kept.append(text[pos:])
    return re.sub(r"[ \t]{2,}", " ", "".join(kept)).strip()
