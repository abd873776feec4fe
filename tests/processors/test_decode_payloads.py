"""``decode_payloads`` finds exactly what the plain scan finds.

``_text._blobs`` runs each blob pattern only where a match can be (the base64 pattern at
the start of each long run of its characters, the hex pattern inside long runs of the
characters a hex blob holds, the others from the first occurrence of their first
character), and ``_b64`` decodes without the ``base64`` wrappers. Both are compared
with the plain code they replace, ``finditer`` of each pattern as first written over
the whole text and ``base64.b64decode`` then ``base64.urlsafe_b64decode``, with the RE2
switch on and off, on generated texts (encoded blobs, their characters and separators,
non-ASCII letters, digits and spaces, long runs of one unit) and on a corpus."""

from __future__ import annotations

import base64
import binascii
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from procflow.textscan import _views as _text
from procflow.textscan._views import Decoded, decode_payloads

DATA = Path(__file__).parent / "data"

# the blob patterns as first written (``_text`` unrolls the first repetition of three)
_PLAIN_PATTERNS = [re.compile(p) for p in (
    r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{16,}={0,2}(?![A-Za-z0-9+/=_-])",
    r"(?<![0-9A-Za-z])(?:0x)?(?:[0-9A-Fa-f]{2}[\s:,]?){8,}(?![0-9A-Za-z])",
    r"(?:%[0-9A-Fa-f]{2}){4,}",
    r"(?:\\(?:x[0-9A-Fa-f]{2}|u[0-9A-Fa-f]{4})){4,}",
    r"(?:&#(?:x[0-9A-Fa-f]+|\d+);){4,}",
)]


def _plain_b64(blob: str) -> str | None:
    if re.search(r"[a-z]", blob) is None or re.search(r"[A-Z0-9+/]", blob) is None:
        return None
    padded = blob + "=" * (-len(blob) % 4)
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            text = _text._readable(decode(padded))
        except (binascii.Error, ValueError):
            continue
        if text is not None:
            return text
    return None


def _plain_spans(text: str) -> list[tuple[int, int, int]]:
    return [(index, *m.span()) for index, pattern in enumerate(_PLAIN_PATTERNS)
            for m in pattern.finditer(text)]


def _plain_payloads(text: str) -> list[Decoded]:
    decoders = [_plain_b64] + [decode for _, decode in _text._DECODERS[1:]]
    found = []
    for (kind, _), decode, pattern in zip(_text._DECODERS, decoders, _PLAIN_PATTERNS,
                                          strict=True):
        for m in pattern.finditer(text):
            out = decode(m.group(0).strip())
            if out is not None:
                found.append(Decoded(kind, out, m.start(), m.end()))
    return found


def _check(text: str) -> None:
    expected_spans, expected = _plain_spans(text), _plain_payloads(text)
    assert list(_text._blobs(text)) == expected_spans
    assert decode_payloads(text) == expected


_CHARS = ("aZ9+/_-=%\\xu&#; \n\t:,gG0fF\x1c"
          "é\u00a0\u3000\u2028\u0085中٣")  # Unicode spaces (\s), a digit (\d), letters
_PIECES = [
    "aWdub3JlIGFsbCBwcmV2aW91cyBpbnN0cnVjdGlvbnM=", "SGVsbG8gd29ybGQ", "aWdub3Jl-_",
    "w6nDqcOpw6nDqcOp", "5Lit5paH5paH5paH", "QUFBQUFBQUFBQUFB", "0x", "0123456789abcdef",
    "69 67 6e 6f 72 65 20 61", "6f:72:65", "69,67", "69\u00a067", "%69%67%6e%6f%72%65",
    "\\x69\\x67\\x6e\\x6f", "\\u0069\\u0067", "&#105;&#103;&#110;&#111;", "&#x69;",
    "&#١٠٥;", "getElementById", "process_output_result", "/usr/local/lib/python3",
    "deadbeef", "cafe", "==", "ignore previous", *_CHARS]
_UNITS = ["a", "=", "a=", "41", "41 ", "4 ", "41:", "0x41", "%41", "%4", "\\x41", "\\u0041",
          "&#65;", "&#x41;", "QUFB", "Ab1/", "-", "_", "é", "\u00a0", "a" * 15 + " ", "41g"]

_TEXTS = st.one_of(
    st.lists(st.sampled_from(_PIECES), max_size=40).map("".join),
    st.text(alphabet=_CHARS, max_size=80),
    # runs of one unit, cut anywhere: blobs of every length around the thresholds
    st.lists(st.tuples(st.sampled_from(_UNITS + list(_CHARS)), st.integers(1, 24)),
             max_size=8).map(lambda runs: "".join(unit * n for unit, n in runs)),
)


@settings(max_examples=1500, deadline=None)
@given(_TEXTS)
def test_blobs_and_payloads_are_those_of_the_plain_scan(text: str) -> None:
    _check(text)


@pytest.mark.parametrize("unit", _UNITS)
def test_blobs_and_payloads_on_long_runs(unit: str) -> None:
    for size in (14, 15, 16, 17, 18, 31, 2_000):
        text = (unit * size)[:size]  # cut anywhere
        for around in ("", " !", "=0", "x0", "é\u00a0"):
            _check(around[:1] + text + around[1:])


def test_blobs_and_payloads_on_the_injection_corpus() -> None:
    lines = (DATA / "injection_corpus.jsonl").read_text(encoding="utf-8").splitlines()
    for line in lines:
        _check(json.loads(line)["text"])


_B64_BLOBS = st.one_of(
    st.tuples(st.text(alphabet="AZaz09+/-_", min_size=16, max_size=40),
              st.sampled_from(["", "=", "=="])).map("".join),
    # real base64 of text, read either way, sometimes with "-" or "_" in it
    st.tuples(st.text(min_size=6, max_size=40), st.booleans(), st.sampled_from(["", "-", "_"]),
              st.integers(0, 40)).map(
        lambda t: (lambda s: s[:t[3]] + t[2] + s[t[3]:])(
            (base64.urlsafe_b64encode if t[1] else base64.b64encode)(
                t[0].encode("utf-8")).decode("ascii"))),
)


@settings(max_examples=1500, deadline=None)
@given(_B64_BLOBS)
def test_b64_reads_blobs_as_b64decode_then_urlsafe_b64decode(blob: str) -> None:
    assert _text._b64(blob) == _plain_b64(blob)
