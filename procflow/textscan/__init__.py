"""procflow's text engine: rule tables read over text and its de-obfuscated views.

The offline guards (``PIIDetector``, ``PromptInjectionDetector``,
``ModerationProcessor``) are tables of ``re`` patterns plus the code that weighs their
matches. This package is what finds the matches; it imports nothing from the rest
of procflow. Its one entry is ``Scanner``::

    from procflow.textscan import Rule, Scanner

    scanner = Scanner([Rule("ignore", r"ignore (?:all )?previous", data=0.9)],
                      engine="re", reading="folded")
    result = scanner.scan("Ｉｇｎｏｒｅ all previous instructions")
    for match in result:  # Match(rule, start, end, view, match)
        print(match.rule.name, match.rule.data, match.start, match.end, match.view)
    result.complete  # False only when ``stop_at`` ended the scan early

``Scanner(rules, *, engine=..., reading=...)`` takes named patterns (``Rule``: a name,
a pattern, the per-rule ``data`` the owner weighs a match by); a pattern that does not
compile is a ``ValueError`` naming its rule. ``scan(text, *, stop_at=None)`` returns a
``ScanResult``: every ``Match`` with ``start``/``end`` into the ORIGINAL text, whatever
view it was found in, and ``complete``.

Follow one scan, ``await PromptInjectionDetector().detect(text)``:

1. **The detector** (``processors/builtin/injection/detector.py``) was built with an
   ``engine`` (``"re2"``: RE2 sets first, the default when ``google-re2`` imports;
   ``"re"``: ``re`` alone; see ``check_engine``) — a constructor argument, as it is
   ``Scanner``'s. ``detect`` runs the rule scan (``injection/scan.py: scan_steps``),
   in steps on the event loop or in a thread for a long text.
2. **Views** (``Reading``; ``_views.py: views_for_matching``). The rules never read the
   raw text but views of it: ``fold`` (Unicode folded, confusables mapped, lower
   case), then, each only when it differs from the ones before, the text with spaced
   letters joined, with typos fixed (``spellfix``), two leetspeak readings, squashed,
   ROT13 and reversed (``reading="deobfuscated"``; moderation reads the first ones,
   ``"folded"``; PII reads ``normalise``'s view, ``"normalised"``). Every ``View``
   keeps, for each of its characters, the span of the original text it came from
   (``View.span``): that is how a ``Match`` gets its ``start``/``end``. Base64 / hex /
   URL-encoded payloads are decoded (``decode_payloads``) and scanned the same way.
3. **A table reads a view** (``_anchors.py: PatternTable``, what ``Scanner`` runs
   per view). On engine ``"re2"`` the table's RE2 prefilter (``_prefilter.py:
   Prefilter``) reads the view's ``proxy`` (one byte a character, 0x80 for non-ASCII)
   with a few RE2 sets of the patterns' RE2 forms and answers which patterns can
   match at all (usually none); each candidate's ``re`` pattern is then tried only
   where its RE2 form starts. On engine ``"re"`` one trie of each pattern's literal
   first characters finds where any can start, and those patterns are tried there.
   Both give exactly what ``pattern.finditer`` gives for each pattern in turn. What a
   pattern must contain or start with is read from its parse tree (``_syntax.py:
   parse``), never from ``re``'s private parser.
4. **Back in the guard.** Each match is weighed in its context (negations, quoting,
   "how to" questions, a ``near`` pattern), its span mapped to the original text,
   the strongest hit per rule kept, and the weights combined per category by
   noisy-OR into ``RuleScan.scores``; the detector turns that into a
   ``DetectionResult`` (flagged at ``threshold``). With ``stop_at`` the scan stops at
   the first match that alone settles the verdict (``Scanner.scan``'s ``stop_at``:
   shown each match as found; ``True`` ends the scan, ``complete=False``).

Who reads through what: PII's RE2 pass (``pii/rules.py``) is a ``Scanner``; the
injection scan and moderation's idiom and term tables still drive ``PatternTable``
directly, with the proxies, literal gates and joint RE2 sets their speed depends on
(``tests/textscan/test_public_imports.py`` lists those private imports; the list may
only shrink). ``RegexFilterProcessor`` stays apart: its redaction is sequential (each
rule reads the text the rules before it redacted) and its user patterns run on RE2
or under a time budget, never on unbounded ``re``. The verdicts of all the guards on
both engines are pinned by ``tests/processors/test_golden_verdicts.py``.
"""

from __future__ import annotations

from procflow.textscan._prefilter import DEFAULT_ENGINE, Engine, check_engine
from procflow.textscan._scan import Match, Reading, Rule, Scanner, ScanResult
from procflow.textscan._views import View, normalise, views_for_matching

__all__ = [
    "DEFAULT_ENGINE",
    "Engine",
    "Match",
    "Reading",
    "Rule",
    "ScanResult",
    "Scanner",
    "View",
    "check_engine",
    "normalise",
    "views_for_matching",
]
