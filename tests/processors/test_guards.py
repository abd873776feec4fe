"""Guards: Unicode copy-paste variants, short emails and masks, RE2 user patterns,
detection off the event loop, evidence, and pluggable classifiers."""

from __future__ import annotations

import re

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from procflow.processors import PIIDetector, RegexFilterProcessor
from procflow.processors.builtin._detection import PIIDetection
from procflow.processors.builtin.pii.redact import replacement_for
from procflow.processors.builtin.regex import RegexRule

CARD = "4111 1111 1111 1111"
ARABIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")
FULL = str.maketrans("0123456789", "０１２３４５６７８９")

CARD_VARIANTS = {
    "no-break spaces": CARD.replace(" ", "\u00a0"),
    "narrow no-break": CARD.replace(" ", "\u202f"),
    "zero-width spaces": CARD.replace(" ", "\u200b"),
    "zero-width joiners inside": "4\u200d111 1111 1111 1111",
    "word joiners": CARD.replace(" ", "\u2060"),
    "ideographic spaces": CARD.replace(" ", "\u3000"),
    "arabic-indic digits": CARD.translate(ARABIC),
    "full-width digits": CARD.translate(FULL),
    "mixed digits": "４１１１ 1111 ١١١١ 1111",
    "rtl override": f"\u202e{CARD}\u202c",
    "ltr isolate": f"\u2066{CARD}\u2069",
    "soft hyphens": CARD.replace(" ", "\u00ad"),
}
EMAIL_VARIANTS = {
    "full-width at": "jane.doe＠example.com",
    "small at": "jane.doe﹫example.com",
    "ideographic full stop": "jane.doe@example。com",
    "zero-width inside": "jane\u200b.doe@example.com",
    "rtl override": "\u202ejane.doe@example.com\u202c",
    "full-width letters": "ｊａｎｅ@example.com",
}


@pytest.mark.parametrize("name", sorted(CARD_VARIANTS))
async def test_card_variants_are_found_with_original_spans(name: str) -> None:
    value = CARD_VARIANTS[name]
    text = f"Pay with {value} today."
    found = await PIIDetector().detect(text)
    cards = [d for d in found if d.type == "credit-card"]
    assert cards, f"{name}: missed"
    d = cards[0]
    assert text[d.start:d.end] == d.value
    assert d.value.strip("\u202e\u202c\u2066\u2069") == value.strip("\u202e\u202c\u2066\u2069")
    redacted = PIIDetector().redact(text, found)
    assert "****" in redacted and redacted != text


@pytest.mark.parametrize("name", sorted(EMAIL_VARIANTS))
async def test_email_variants_are_found(name: str) -> None:
    text = f"Write to {EMAIL_VARIANTS[name]} please"
    found = await PIIDetector().detect(text)
    emails = [d for d in found if d.type == "email"]
    assert emails, f"{name}: missed"
    assert text[emails[0].start:emails[0].end] == emails[0].value
    assert "example" in emails[0].value or "ｊａｎｅ" in emails[0].value


@pytest.mark.parametrize("email", ["a@b.io", "x@y.co.uk", "jo@x.io"])
async def test_short_emails_are_found_and_masked(email: str) -> None:
    detector = PIIDetector(strategy="redact", redaction_method="mask")
    text = f"mail {email} now"
    found = await detector.detect(text)
    assert [d.value for d in found] == [email]
    assert email not in detector.redact(text, found)


PII_TYPES = ["email", "phone", "credit-card", "ssn", "api-key", "ip-address", "url", "uuid",
             "iban", "crypto-wallet", "date-of-birth", "name", "address"]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(PII_TYPES),
       st.text(min_size=1, max_size=12).filter(lambda v: any(c.isalnum() for c in v)),
       st.booleans())
def test_mask_changes_every_detected_value(kind: str, value: str, keep: bool) -> None:
    det = PIIDetection(kind, 0, len(value), value)  # type: ignore[arg-type]
    assert replacement_for(det, method="mask", preserve_format=keep) != value


async def test_user_patterns_run_on_re2() -> None:
    evil = RegexFilterProcessor(rules=[RegexRule("evil", r"(a+)+$")], strategy="redact")
    text = "a" * 5_000 + "!"
    with anyio.fail_after(5):  # backtracking re would take longer than the universe
        assert evil.scan(text) == {}
    ok = RegexFilterProcessor(rules=[RegexRule("word", r"secret\d+", flags=re.IGNORECASE)],
                              strategy="redact")
    assert ok.redact("a SECRET42 b")[0] == "a [REDACTED] b"


@pytest.mark.parametrize(("pattern", "feature"), [
    (r"(?<=a)b", "lookbehind"), (r"a(?!b)", "lookahead"), (r"(a)\1", "backreferences"),
    (r"(?>ab)", "atomic groups"), (r"a++", "possessive"),
])
def test_re2_error_names_the_feature(pattern: str, feature: str) -> None:
    with pytest.raises(ValueError, match=feature) as info:
        RegexFilterProcessor(rules=[RegexRule("mine", pattern)])
    assert "mine" in str(info.value)


def test_presets_keep_lookarounds_on_re() -> None:
    proc = RegexFilterProcessor(presets=["pii", "secrets", "urls"], strategy="redact")
    assert proc.redact("mail a@b.io")[0] == "mail [EMAIL]"


@pytest.mark.parametrize("kind", ["injection", "moderation", "pii"])
async def test_large_detection_does_not_stall_the_event_loop(kind: str) -> None:
    from procflow.processors import ModerationProcessor, PromptInjectionDetector

    detector = {"injection": PromptInjectionDetector, "moderation": ModerationProcessor,
                "pii": PIIDetector}[kind]()
    text = ("Please review this pasted report; call 415 555 0100 or mail a@b.io. " * 1500)
    ticks = 0
    done = False

    async def sleeper() -> None:
        nonlocal ticks
        while not done:
            await anyio.sleep(0.001)
            ticks += 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(sleeper)
        await anyio.sleep(0.01)
        before = ticks
        await detector.detect(text)  # type: ignore[attr-defined]
        during = ticks - before
        done = True
    assert during >= 3, f"{kind}: the other task ticked {during} times during detection"
