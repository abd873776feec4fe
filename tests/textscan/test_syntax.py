"""The pattern parser reads Python's syntax and shapes the tree as ``re`` does."""

from __future__ import annotations

import re

import pytest

from procflow.textscan._syntax import (
    AnyChar,
    At,
    Backref,
    Branch,
    Category,
    Char,
    CharClass,
    Group,
    Look,
    NotChar,
    Range,
    Repeat,
    parse,
)


def chars(text: str) -> tuple[Char, ...]:
    return tuple(Char(ord(c)) for c in text)


CASES = [
    pytest.param(r"ab", chars("ab"), id="literals"),
    pytest.param(r"(?:ab)c", chars("abc"), id="plain-group-spliced"),
    pytest.param(r"(?:ab)*", (Repeat(0, None, "greedy", chars("ab")),), id="repeated-group"),
    pytest.param(r"abc|ade", (Char(97), Branch((chars("bc"), chars("de")))),
                 id="common-prefix"),
    pytest.param(r"a|b|[cd]", (CharClass((Char(97), Char(98), Char(99), Char(100))),),
                 id="branch-to-class"),
    pytest.param(r"[x]", (Char(120),), id="class-of-one"),
    pytest.param(r"[^x]", (NotChar(120),), id="negated-class-of-one"),
    pytest.param(r"[^a-c\d]", (CharClass((Range(97, 99), Category("digit")), negate=True),),
                 id="negated-class"),
    pytest.param(r"\bx\Z", (At("boundary"), Char(120), At("end_string")), id="positions"),
    pytest.param(r"(?<![a-z])x", (Look(True, True, (CharClass((Range(97, 122),)),)),
                                  Char(120)), id="look-behind"),
    pytest.param(r"(?i:a).{2,}?", (Group(None, re.IGNORECASE, 0, (Char(97),)),
                                   Repeat(2, None, "lazy", (AnyChar(),))), id="flags-lazy"),
    pytest.param(r"(a)\1", (Group(1, 0, 0, (Char(97),)), Backref(1)), id="backref"),
    pytest.param(r"x{}y{,2}", (Char(120), Char(123), Char(125),
                               Repeat(0, 2, "greedy", (Char(121),))), id="braces"),
    pytest.param(r"(?x) a b  # c", chars("ab"), id="verbose"),
    pytest.param(r"\x41\u00e9\101\.", (Char(65), Char(0xE9), Char(65), Char(46)),
                 id="escapes"),
]


@pytest.mark.parametrize(("pattern", "tree"), CASES)
def test_parse(pattern: str, tree: tuple[object, ...]) -> None:
    assert parse(re.compile(pattern)) == tree
