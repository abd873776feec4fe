"""PIIDetector: rules per type, validators, redaction, strategies, judge mode, corpus."""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from procflow.errors import APICallError, ProcessorError, TripwireError
from procflow.messages import Chunk, Message, MessageList, TripwireChunk
from procflow.models.base import ModelRequest
from procflow.processors import OutputResult, ProcessorViolation
from procflow.processors._runner import ProcessorRunner
from procflow.processors.builtin._detection import PIIDetection, PIIType
from procflow.processors.builtin.pii import ALL_PII_TYPES, DEFAULT_PII_TYPES, PIIDetector
from procflow.processors.builtin.pii.checks import (
    base58check_valid,
    bech32_valid,
    card_brand,
    iban_valid,
    luhn_valid,
    shannon_entropy,
    ssn_valid,
)

ROOT = Path(__file__).resolve().parents[2]
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
       "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U")

# -- helpers ----------------------------------------------------------------------------


def only(found: list[PIIDetection], pii_type: PIIType) -> list[str]:
    return [d.value for d in found if d.type == pii_type]


def input_list(*texts: str) -> MessageList:
    ml = MessageList()
    for text in texts:
        ml.add(Message.user(text), source="input")
    return ml


class FakeModel:
    """A judge that answers with fixed text, or fails."""

    def __init__(self, answer: str = "", *, error: Exception | None = None) -> None:
        self.answer = answer
        self.error = error
        self.requests: list[ModelRequest] = []

    @property
    def provider(self) -> str:
        return "fake"

    @property
    def model_id(self) -> str:
        return "judge-1"

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        self.requests.append(request)
        if self.error is not None:
            raise self.error
        yield Chunk.text_delta(self.answer)
        yield Chunk.finish("stop")


def judge_answer(*items: tuple[str, str]) -> str:
    return json.dumps({"detections": [{"type": t, "value": v} for t, v in items]})


# -- one positive and one hard negative per type ----------------------------------------

CASES = [
    pytest.param("email", "Write to jane.doe+billing@mail.example.co.uk today.",
                 "jane.doe+billing@mail.example.co.uk",
                 "Ping @jane.doe on Slack or ssh git@build-host for the logs.", id="email"),
    pytest.param("phone", "Call me on (555) 123-4567 or +44 20 7946 0958.", "(555) 123-4567",
                 "Order #555-123-4567 shipped; total $1,234.56 at 2024-05-01T12:30:00Z.",
                 id="phone"),
    pytest.param("credit-card", "Card 4111-1111-1111-1111 exp 12/26.", "4111-1111-1111-1111",
                 "Card 4111 1111 1111 1112 fails Luhn; tracking 9400 1000 0000 0000 0000 00.",
                 id="credit-card"),
    pytest.param("ssn", "My SSN is 219-45-6789 and ssn 234567890.", "219-45-6789",
                 "Invalid: 000-12-3456, 666-45-6789, 912-34-5678; bare 234567890.", id="ssn"),
    pytest.param("api-key", f"Authorization: Bearer {JWT}", JWT,
                 "commit 3f786850e387550fdab836ed7e6dc881de23001b; API_KEY=${OPENAI_API_KEY}",
                 id="api-key"),
    pytest.param("ip-address", "Blocked 203.0.113.45 and 2001:db8::7 today.", "203.0.113.45",
                 "Upgrade v1.2.3.4 or 1.2.3.4-beta; OID 1.3.6.1.4.1; MAC 00:1A:2B:3C:4D:5E.",
                 id="ip-address"),
    pytest.param("url", "Docs: https://docs.example.org/guide?x=1).", "https://docs.example.org/guide?x=1",
                 "See example.com, the file a.b.c and the path /usr/lib/x.", id="url"),
    pytest.param("uuid", "Case 123e4567-e89b-12d3-a456-426614174000 opened.",
                 "123e4567-e89b-12d3-a456-426614174000",
                 "Ref 123e4567-e89b-12d3-a456-42661417400 and abcd-1234-ef56-7890.", id="uuid"),
    pytest.param("iban", "Pay DE89 3704 0044 0532 0130 00 by Friday.",
                 "DE89 3704 0044 0532 0130 00",
                 "Bad: DE89 3704 0044 0532 0130 01 and GB00 WEST 1234 5698 7654 32.", id="iban"),
    pytest.param("crypto-wallet", "Send to bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq now.",
                 "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq",
                 "Hash 0x9c22ff5f21f0b81b113e63f7db6da94fedef11b2119b4088b89664fb9a3cb658 and "
                 "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN3.", id="crypto-wallet"),
    pytest.param("date-of-birth", "Patient DOB: 14/03/1987, admitted 2024-05-01.", "14/03/1987",
                 "Deadline 2024-05-01; born in 1990 and hired 2015-03-01.", id="date-of-birth"),
    pytest.param("name", "Hi there, my name is Chloe Bennett.", "Chloe Bennett",
                 "Hello World! Dear Customer, thanks for your order.", id="name"),
    pytest.param("address", "Ship to 221B Baker Street, London NW1 6XE please.",
                 "221B Baker Street, London NW1 6XE",
                 "Street food on floor 3, room 12 near the main road.", id="address"),
]


@pytest.mark.parametrize(("pii_type", "text", "value", "negative"), CASES)
async def test_rules_find_each_type(pii_type: PIIType, text: str, value: str,
                                    negative: str) -> None:
    detector = PIIDetector(detection_types=[pii_type])
    assert value in only(await detector.detect(text), pii_type)
    assert await detector.detect(negative) == []


async def test_defaults_leave_names_and_addresses_to_a_model() -> None:
    assert set(DEFAULT_PII_TYPES) == set(ALL_PII_TYPES) - {"name", "address"}
    found = await PIIDetector().detect("My name is Chloe Bennett, 221B Baker Street.")
    assert found == []


async def test_detections_are_sorted_and_do_not_overlap() -> None:
    text = ("jo@x.io https://example.com/u/jo@x.io 203.0.113.5 "
            "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq")
    found = await PIIDetector().detect(text)
    assert [d.type for d in found] == ["email", "url", "ip-address", "crypto-wallet"]
    assert all(a.end <= b.start for a, b in itertools.pairwise(found))
    assert all(text[d.start:d.end] == d.value for d in found)


async def test_threshold_drops_pattern_only_matches() -> None:
    text = "call (555) 123-4567, card 4111 1111 1111 1111"
    strict = PIIDetector(threshold=0.95)
    assert [d.type for d in await strict.detect(text)] == ["credit-card"]


# -- validators --------------------------------------------------------------------------


def test_luhn() -> None:
    assert luhn_valid("4111111111111111") and luhn_valid("79927398713")
    assert not luhn_valid("4111111111111112") and not luhn_valid("41111x1111111111")


def test_card_brand() -> None:
    assert card_brand("4111111111111111") == "visa"
    assert card_brand("378282246310005") == "amex"
    assert card_brand("2221000000000009") == "mastercard"
    assert card_brand("9111111111111111") is None and card_brand("41111111") is None


def test_iban_checksum_and_length() -> None:
    assert iban_valid("DE89 3704 0044 0532 0130 00")
    assert iban_valid("GB82WEST12345698765432")
    assert not iban_valid("DE88 3704 0044 0532 0130 00")  # checksum
    assert not iban_valid("DE89 3704 0044 0532 0130 0")  # length
    assert not iban_valid("ZZ89370400440532013000")  # country


def test_ssn_ranges() -> None:
    assert ssn_valid("219-45-6789") and ssn_valid("001 01 0001")
    for bad in ("000-12-3456", "666-12-3456", "912-34-5678", "123-00-4567", "123-45-0000",
                "078-05-1120", "12-345-6789"):
        assert not ssn_valid(bad), bad


def test_base58check_and_bech32() -> None:
    assert base58check_valid("1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2")
    assert base58check_valid("3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy")
    assert not base58check_valid("1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN3")
    assert not base58check_valid("1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN0")  # 0 is not base58
    assert bech32_valid("bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq")
    assert bech32_valid("bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0")
    assert not bech32_valid("bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdr")
    assert not bech32_valid("BC1QAR0SRRR7XFKVY5L643LYDNW9RE59GTZZWF5MDQ")


def test_entropy() -> None:
    assert shannon_entropy("") == 0.0 and shannon_entropy("aaaa") == 0.0
    assert shannon_entropy("abcd") == pytest.approx(2.0)


# -- redaction ---------------------------------------------------------------------------

CARD = PIIDetection("credit-card", 5, 24, "4111-1111-1111-1234", 0.99)
EMAIL = PIIDetection("email", 5, 21, "jane@example.com", 0.95)


@pytest.mark.parametrize(("method", "preserve", "detection", "expected"), [
    pytest.param("mask", True, CARD, "Card ****-****-****-1234.", id="mask-card-format"),
    pytest.param("mask", False, CARD, "Card *******************.", id="mask-card-plain"),
    pytest.param("mask", True, EMAIL, "Mail j***@example.com.", id="mask-email-format"),
    pytest.param("mask", False, EMAIL, "Mail ****************.", id="mask-email-plain"),
    pytest.param("remove", True, CARD, "Card .", id="remove"),
    pytest.param("remove", False, CARD, "Card .", id="remove-plain"),
    pytest.param("placeholder", True, CARD, "Card [CREDIT_CARD].", id="placeholder"),
    pytest.param("placeholder", False, EMAIL, "Mail [EMAIL].", id="placeholder-plain"),
])
def test_redaction_methods(method: Any, preserve: bool, detection: PIIDetection,
                           expected: str) -> None:
    text = ("Card " if detection.type == "credit-card" else "Mail ") + detection.value + "."
    detector = PIIDetector(redaction_method=method, preserve_format=preserve)
    assert detector.redact(text, [detection]) == expected


@pytest.mark.parametrize("preserve", [True, False])
def test_hash_redaction(preserve: bool) -> None:
    digest = hashlib.sha256(b"4111-1111-1111-1234").hexdigest()[:8]
    detector = PIIDetector(redaction_method="hash", preserve_format=preserve)
    assert detector.redact("Card 4111-1111-1111-1234.", [CARD]) == f"Card [CREDIT_CARD:{digest}]."


async def test_mask_keeps_separators_and_last_four_of_phones() -> None:
    detector = PIIDetector()
    text = "call +1 (555) 123-4567"
    assert detector.redact(text, await detector.detect(text)) == "call +* (***) ***-4567"


# -- strategies through the hooks --------------------------------------------------------


async def test_redact_input_messages() -> None:
    ml = input_list("Mail jane@example.com", "nothing here")
    await ProcessorRunner([PIIDetector(redaction_method="placeholder")]).run_input(ml)
    assert [m.text for m in ml.input()] == ["Mail [EMAIL]", "nothing here"]


async def test_block_raises_tripwire_without_values() -> None:
    seen: list[ProcessorViolation] = []
    detector = PIIDetector(strategy="block", on_violation=seen.append)
    with pytest.raises(TripwireError) as info:
        await ProcessorRunner([detector]).run_input(input_list("SSN 219-45-6789, jo@x.io"))
    trip = info.value
    assert trip.processor_id == "pii-detector"
    assert trip.reason == "PII detected: email, ssn"
    assert trip.metadata["types"] == ["email", "ssn"]
    assert "219-45-6789" not in json.dumps(trip.metadata)
    assert [v.detail["types"] for v in seen] == [["email", "ssn"]]


async def test_block_with_detections_includes_values() -> None:
    detector = PIIDetector(strategy="block", include_detections=True)
    with pytest.raises(TripwireError) as info:
        await ProcessorRunner([detector]).run_input(input_list("mail jo@x.io"))
    [found] = info.value.metadata["detections"]
    assert (found["type"], found["value"], found["start"]) == ("email", "jo@x.io", 5)


async def test_warn_reports_and_passes_through() -> None:
    seen: list[ProcessorViolation] = []
    detector = PIIDetector(strategy="warn")
    detector.on_violation = seen.append
    runner = ProcessorRunner([detector])
    ml = input_list("call (555) 123-4567")
    await runner.run_input(ml)
    assert ml.input()[0].text == "call (555) 123-4567"
    assert [(v.processor_id, v.message, v.detail["types"]) for v in seen] == [
        ("pii-detector", "PII detected: phone", ["phone"])]
    assert "(555) 123-4567" not in repr(seen[0].detail)
    assert runner.context.violations == seen


async def test_filter_drops_messages_with_pii() -> None:
    ml = input_list("IP 203.0.113.5", "hello")
    await ProcessorRunner([PIIDetector(strategy="filter")]).run_input(ml)
    assert [m.text for m in ml.input()] == ["hello"]


async def test_output_result_is_redacted() -> None:
    ml = input_list("what is my card?")
    ml.add(Message.assistant("It is 4111 1111 1111 1111."), source="response")
    await ProcessorRunner([PIIDetector()]).run_output_result(ml, OutputResult())
    assert ml.response()[0].text == "It is **** **** **** 1111."


@pytest.mark.parametrize(("strategy", "expected"), [
    pytest.param("redact", ["text-delta:mail ", "text-delta:j*@x.io"], id="redact"),
    pytest.param("filter", ["text-delta:mail "], id="filter"),
    pytest.param("warn", ["text-delta:mail ", "text-delta:jo@x.io"], id="warn"),
    pytest.param("block", ["text-delta:mail ", "tripwire:"], id="block"),
])
async def test_stream_strategies(strategy: Any, expected: list[str]) -> None:
    # The word in progress waits for the next chunk (or the finish) before it is checked.
    pipe = ProcessorRunner([PIIDetector(strategy=strategy)]).output_stream()
    out = await pipe.process(Chunk.text_delta("mail jo@x.io"))
    out += await pipe.process(Chunk.finish("stop"))
    assert [f"{c.type}:{c.text}" for c in out if c.type != "finish"] == expected
    if strategy == "block":
        assert isinstance(out[-1], TripwireChunk)
        assert out[-1].processor_id == "pii-detector"
        assert out[-1].reason == "PII detected: email"


async def test_stream_passes_clean_and_non_text_chunks() -> None:
    pipe = ProcessorRunner([PIIDetector(strategy="block")]).output_stream()
    clean = Chunk.text_delta("all good")
    assert [c.text for c in await pipe.process(clean)] == ["all "]
    finish = Chunk.finish("stop")
    out = await pipe.process(finish)
    assert [c.text for c in out[:-1]] == ["good"]
    assert out[-1] is finish


# -- judge mode --------------------------------------------------------------------------


async def test_judge_findings_merge_with_rules() -> None:
    model = FakeModel(judge_answer(("name", "Jane Doe"), ("email", "jane@x.io"),
                                   ("name", "Not In Text"), ("bogus", "Jane")))
    found = await PIIDetector(model=model).detect("I am Jane Doe, jane@x.io")
    assert [(d.type, d.value, d.start) for d in found] == [
        ("name", "Jane Doe", 5), ("email", "jane@x.io", 15)]
    prompt = model.requests[0].prompt
    assert prompt[1] == {"role": "user", "content": "I am Jane Doe, jane@x.io"}
    assert "name" in prompt[0]["content"]


async def test_judge_redacts_through_the_hook() -> None:
    model = FakeModel(judge_answer(("address", "12 Hill Rd")))
    ml = input_list("Leave it at 12 Hill Rd")
    detector = PIIDetector(model=model, redaction_method="placeholder")
    await ProcessorRunner([detector]).run_input(ml)
    assert ml.input()[0].text == "Leave it at [ADDRESS]"


@pytest.mark.parametrize("model", [
    pytest.param(FakeModel(error=APICallError("provider down")), id="model-error"),
    pytest.param(FakeModel("sorry, I cannot do that"), id="no-json"),
    pytest.param(FakeModel('{"found": []}'), id="wrong-shape"),
])
async def test_judge_failure_fails_closed_for_block(model: FakeModel) -> None:
    detector = PIIDetector(model=model, strategy="block")
    with pytest.raises(TripwireError) as info:
        await ProcessorRunner([detector]).run_input(input_list("nothing personal here"))
    assert info.value.reason.startswith("PII detector could not check the text: ")
    assert "nothing personal" not in info.value.reason
    with pytest.raises(ProcessorError, match="could not check the text"):
        await detector.detect("nothing personal here")


async def test_judge_failure_falls_back_to_rules_otherwise() -> None:
    detector = PIIDetector(model=FakeModel("not json"), redaction_method="placeholder")
    ml = input_list("mail jo@x.io")
    await ProcessorRunner([detector]).run_input(ml)
    assert ml.input()[0].text == "mail [EMAIL]"


# -- options -----------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [
    pytest.param({"detection_types": ["email", "passport"]}, id="unknown-type"),
    pytest.param({"detection_types": []}, id="no-types"),
    pytest.param({"detection_types": "email"}, id="type-string"),
    pytest.param({"strategy": "shred"}, id="strategy"),
    pytest.param({"redaction_method": "blur"}, id="method"),
    pytest.param({"threshold": 1.5}, id="threshold-high"),
    pytest.param({"threshold": -0.1}, id="threshold-low"),
    pytest.param({"threshold": True}, id="threshold-bool"),
])
def test_bad_options_raise_value_error(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="PIIDetector"):
        PIIDetector(**kwargs)


def test_options_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        PIIDetector(None)  # type: ignore[call-arg]


# -- corpus-wide targets -----------------------------------------------------------------


def _benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pii_benchmark", ROOT / "benchmarks/pii.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while decorating
    spec.loader.exec_module(module)
    return module


async def test_corpus_precision_and_recall_targets() -> None:
    bench = _benchmark()
    examples = bench.load_corpus()
    assert len(examples) >= 300
    report = await bench.evaluate(examples)
    for pii_type in bench.STRUCTURED:
        score = report.score(pii_type)
        assert score.labels >= 15, pii_type
        assert score.precision >= 0.95, (pii_type, score)
        assert score.recall >= 0.95, (pii_type, score)
    assert report.flagged_negatives / report.negatives <= 0.05
