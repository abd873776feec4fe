"""The moderation pass's fast paths give exactly what the plain ones give.

- one RE2 pass for the idioms and the terms of a view (``lexicon._view_matches``, on
  ``_anchors.JointScan``) against blanking the idioms and scanning the terms without
  any prefilter;
- the leet words found from their digits and symbols (``_text._leet_tokens``) against
  ``_LEET_WORD`` tried at every position;
- the split runs tried only where the text's class string holds "LSLSLSL"
  (``_text._split_runs``) against ``_SPLIT_RUN.finditer``;
- the misspellings looked for by one RE2 pass (``_prefilter.word_finder``, used by
  ``spellfix``) against looking each word up;
- ``proxy`` (an encoding error handler) against a regex substitution;

on generated texts (the lexicon's and idioms' own words, separators, digits, symbols
and non-ASCII characters) and on the corpora."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from procflow.processors.builtin.moderation import idioms, lexicon
from procflow.textscan import _anchors, _prefilter
from procflow.textscan import _views as _text
from procflow.textscan._anchors import PatternTable
from procflow.textscan._views import View, fold, join_split, views_for_matching

re2 = pytest.importorskip("re2")

DATA = Path(__file__).parent / "data"

_WORDS = st.lists(st.sampled_from(
    ["i will", "i'll", "kill", "you", "your family", "myself", "want to", "die", "hate",
     "all", "immigrants", "are", "vermin", "stupid", "idiot", "you're", "such a", "porn",
     "nude", "photos", "kids", "13 year old", "bomb", "how to make", "a", "the", "process",
     "kill the process", "this bug is killing me", "shoot me an email", "at chess",
     "destroy", "suicide prevention", "hotline", "k1ll", "y0u", "1d10t", "h@te", "$tupid",
     "murder", "mystery", "tortured", "blood", "ignroe", "prevoius", "instrutcions",
     "k i l l", "i-d-i-o-t", "s.t.u.p.i.d", "don't", "e.g.", "+", "!", "!!", "|", "@", "$",
     "1", "0", "3", "42", "x86", " ", "  ", "\n", ".", ",", "-", "_", ":", "'", "é", "—",
     "’", "\u00a0", "\u200b", "ＫＩＬＬ", "і", "ß"]),
    max_size=30).map(" ".join)


def _plain(table: PatternTable) -> PatternTable:
    plain = copy.copy(table)
    plain._prefilter = None
    return plain


_PLAIN_TERMS = _plain(lexicon._SCAN)
_PLAIN_IDIOMS = _plain(idioms._SCAN)


def _found(found: list[tuple[int, re.Match[str]]]) -> list[tuple[int, int, int, str]]:
    return [(i, m.start(), m.end(), m.group(0)) for i, m in found]


def _plain_view(text: str) -> tuple[str, list[tuple[int, int, int, str]]]:
    masked = idioms.masked(text, _PLAIN_IDIOMS.matches(text))
    return masked, _found(_PLAIN_TERMS.matches(masked))


def _check_view(text: str) -> None:
    masked, found = lexicon._view_matches(text, "re2")
    assert (masked, _found(found)) == _plain_view(text)


def test_the_joint_scan_has_a_prefilter_with_re2_installed() -> None:
    assert lexicon._JOINT._prefilter is not None
    assert lexicon._JOINT.candidates("i will kill you") is not None


@settings(max_examples=400, deadline=None)
@given(_WORDS)
def test_one_pass_for_idioms_and_terms_finds_what_the_plain_scans_find(text: str) -> None:
    for view in views_for_matching(text):
        _check_view(view.text)


def _rows(name: str) -> list[str]:
    with (DATA / name).open(encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh if line.strip()]


def test_one_pass_for_idioms_and_terms_on_the_corpora() -> None:
    for text in _rows("moderation_corpus.jsonl") + _rows("injection_corpus.jsonl"):
        for view in views_for_matching(text, deep=False):
            _check_view(view.text)
    long = " ".join(_rows("moderation_corpus.jsonl"))  # read by the sets of RE2_GROUP
    _check_view(fold(long).text)


def test_the_joint_scan_steps_aside_without_its_prefilter(
        monkeypatch: pytest.MonkeyPatch) -> None:
    text = "I will kill you. Kill the process, then kill them all."
    expected = _plain_view(fold(text).text)
    assert expected[1]
    assert lexicon._JOINT.candidates(text, engine="re") is None
    assert (lambda r: (r[0], _found(r[1])))(lexicon._view_matches(fold(text).text, "re")) \
        == expected
    monkeypatch.setattr(_anchors, "load_re2", lambda: None)
    joint = _anchors.JointScan([idioms._SCAN, lexicon._SCAN])
    assert joint.candidates(text) is None
    # a table without a prefilter of its own: no joint prefilter either
    monkeypatch.undo()
    joint = _anchors.JointScan([idioms._SCAN, _PLAIN_TERMS])
    assert joint.candidates(text) is None


def test_a_joint_set_that_gives_up_falls_back_to_the_groups(
        monkeypatch: pytest.MonkeyPatch) -> None:
    text = fold("I will kill you, you idiot. Kill the process. " * 30).text
    joint = _anchors.JointScan([idioms._SCAN, lexicon._SCAN], whole_max=1 << 62)
    prefilter = joint._prefilter
    assert prefilter is not None
    expected = joint.candidates(text)
    assert expected is not None and expected[1][1]
    _, indexes, sentinel = prefilter._whole
    monkeypatch.setattr(prefilter, "_whole", (lambda data: [], indexes, sentinel))
    again = joint.candidates(text)
    assert again is not None
    assert set(again[1][1]) >= set(expected[1][1])


# -- the views' fast paths --

_VIEW_TEXT = st.text(alphabet="ab1 0-.@$!|+_é—’\u00a0\u200bＡß\tx`İ*/,:'\"~•·?電", max_size=60)


def _plain_leet_tokens(view: View) -> list[tuple[int, int, str, str]]:
    out = []
    for m in _text._LEET_WORD.finditer(view.text):
        token = m.group(0)
        if token[-1] != "!":
            out.append((m.start(), m.end(), token, ""))
            continue
        core = token.rstrip("!")
        if _text._LEET_CHARS.search(core) is not None and _text._LETTER.search(core):
            out.append((m.start(), m.end(), core, token[len(core):]))
    return out


@settings(max_examples=500, deadline=None)
@given(st.one_of(_VIEW_TEXT, _WORDS))
def test_leet_words_and_split_runs_are_those_of_the_plain_patterns(text: str) -> None:
    base = fold(text)
    for view in (base, join_split(base)):
        assert _text._leet_tokens(view) == _plain_leet_tokens(view)
        assert ([m.span() for m in _text._split_runs(view.text)]
                == [m.span() for m in _text._SPLIT_RUN.finditer(view.text)])


@pytest.mark.parametrize("unit", ["a1", "1a", "11a ", "a!", "a1!", "!!a", "+1", "1 ", "a ",
                                  "a b ", "a.b.", "ab1c2 ", "$a$", "1", "a"])
def test_leet_words_and_split_runs_on_long_runs(unit: str) -> None:
    view = fold(unit * 2_000)
    assert _text._leet_tokens(view) == _plain_leet_tokens(view)
    assert ([m.span() for m in _text._split_runs(view.text)]
            == [m.span() for m in _text._SPLIT_RUN.finditer(view.text)])


_TYPO_TEXT = st.lists(st.sampled_from(
    ["ignroe", "ignore", "ignored", "prevoius", "previous", "systme", "sytem", "jailbreak",
     "jialbreak", "bypas", "bypass", "passwrod", "a", "xignroe", "ignroex", "é", "1", " ",
     "-", "\n"]), max_size=12).map("".join)


@settings(max_examples=300, deadline=None)
@given(_TYPO_TEXT)
def test_spellfix_with_the_re2_word_finder_is_spellfix_without(text: str) -> None:
    view = join_split(fold(text))
    fast = _text.spellfix(view)
    plain = _text.spellfix(view, engine="re")
    assert fast.text == plain.text
    assert list(fast.starts) == list(plain.starts) and list(fast.ends) == list(plain.ends)


def test_word_finder_finds_whole_words_only() -> None:
    found = _prefilter.word_finder(["ignroe", "sytem"])
    assert found is not None
    for text, expected in (("ignroe", True), ("x ignroe.", True), ("ignroex", False),
                           ("xignroe", False), ("a1ignroe", True), ("éignroe", True),
                           ("ignore sytem", True), ("", False), ("sytems", False)):
        assert found(_prefilter.proxy(text)) is expected, text
    with pytest.raises(ValueError):
        _prefilter.word_finder(["Ignore"])


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_proxy_is_one_byte_per_character(text: str) -> None:
    assert _prefilter.proxy(text) == re.sub(r"[^\x00-\x7f]", "\x80", text).encode("latin-1")
