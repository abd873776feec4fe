"""Required literals and the gates built on them never rule out a pattern that matches.

``required`` reads a pattern's parse tree: every match must hold a string of each set
it gives. The injection scan skips the ROT13 and reversed views when no strong rule's
literals (ROT13'd / reversed) are in the base view, and checks only the rules the gate
leaves: the matches must be those of the full table, on generated texts built from the
rules' own words and on the labelled corpus, read forwards, in ROT13 and reversed."""

from __future__ import annotations

import codecs
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from procflow.processors.builtin.injection import scan as injection_scan
from procflow.processors.builtin.injection.rules import RULES, SQUASH_RULES
from procflow.textscan._literals import literal_gate, required
from procflow.textscan._prefilter import proxy
from procflow.textscan._views import fold, views_for_matching

pytest.importorskip("re2")

DATA = Path(__file__).parent / "data"

_PATTERNS = [rule.pattern for rule in RULES] + [
    rule.squashed for rule in SQUASH_RULES if rule.squashed is not None]

_WORDS = st.lists(st.sampled_from(
    ["ignore", "all", "previous", "prior", "instructions", "rules", "you are", "now", "dan",
     "developer mode", "system prompt", "reveal", "your", "password", "print", "send", "to",
     "http://x.io", "forget", "everything", "above", "pretend", "act as", "no", "restrictions",
     "you", "not", "don't", "'", '"', "(", ")", "[", "<!--", " ", "\n", ".", ",", "-", "_",
     ":", "1", "0", "3", "@", "$", "!", "é", "—", "\u200b", "і", "mode", "jailbreak"]),
    max_size=24).map(" ".join)


_NEEDS = {pattern: required(pattern) for pattern in _PATTERNS}


def _corpus() -> list[str]:
    with (DATA / "injection_corpus.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh if line.strip()]


def _holds_required(pattern: re.Pattern[str], text: str) -> None:
    needs = _NEEDS[pattern]
    for m in pattern.finditer(text):
        for need in needs:
            assert any(s in m.group(0) for s in need), (pattern.pattern[:60], m.group(0))


def test_required_literals_of_the_rules_are_found_for_most_of_them() -> None:
    assert sum(1 for needs in _NEEDS.values() if needs) >= len(_PATTERNS) - 2
    needs = required(re.compile(r"(?:ab|cd)e?\w+(?:fgh){2}"))
    assert frozenset({"ab", "cd"}) in needs and frozenset({"fgh"}) in needs
    assert required(re.compile(r"x?\w+")) == ()
    assert required(re.compile(r"(?i)ignore")) == ()


def test_every_match_holds_its_required_literals() -> None:
    for text in _corpus():
        for view in views_for_matching(text):
            for pattern in _PATTERNS:
                _holds_required(pattern, view.text)


def _strong_matches(text: str) -> list[int]:
    return sorted({i for i, _ in injection_scan._STRONG.matches(text)})


def _check_deep_gates(text: str) -> None:
    base = fold(text)
    data = proxy(base.text)
    gate = injection_scan._DEEP_GATE
    assert gate is not None
    each = gate.possible_each(data)
    assert each is not None and len(each) == 2
    assert gate.possible(data) == each[0]  # the first reading's answer
    for possible, name, read in zip(each, injection_scan._DEEP_READINGS,
                                    (lambda s: codecs.encode(s, "rot13"),
                                     lambda s: s[::-1]), strict=True):
        assert set(_strong_matches(read(base.text))) <= set(possible), (name, text)


def test_deep_gates_on_the_corpus_read_every_way() -> None:
    for text in _corpus():
        for variant in (text, codecs.encode(text, "rot13"), text[::-1]):
            _check_deep_gates(variant)


@settings(max_examples=300, deadline=None)
@given(_WORDS)
def test_deep_gates_on_generated_texts(text: str) -> None:
    for variant in (text, codecs.encode(text, "rot13"), text[::-1]):
        _check_deep_gates(variant)
        for view in views_for_matching(variant):
            for pattern in _PATTERNS:
                _holds_required(pattern, view.text)


def test_a_gate_of_plain_literals() -> None:
    gate = literal_gate([re.compile("ignore (?:all|any) rules"), re.compile(r"\w+")])
    assert gate is not None
    assert gate.possible(proxy("please ignore any rules")) == [0, 1]
    assert gate.possible(proxy("please ignore the rules")) == [1]
    assert gate.possible(proxy("rules")) == [1]


def test_a_gate_of_two_readings_answers_each_from_one_pass() -> None:
    gate = literal_gate([re.compile("ignore (?:all|any) rules"), re.compile("abc")],
                        also=(lambda s: s[::-1],))
    assert gate is not None
    assert gate.possible_each(proxy("ignore all rules")) == [[0], []]
    assert gate.possible_each(proxy("selur lla erongi")) == [[], [0]]
    assert gate.possible_each(proxy("abc cba")) == [[1], [1]]
    assert gate.possible_each(proxy("nothing here")) == [[], []]
