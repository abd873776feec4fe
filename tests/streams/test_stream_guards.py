"""Guarded streams that hold (issue 11): windows across chunk boundaries, finish and
flush, batches that lose nothing."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from procflow.agent import Agent
from procflow.messages import Chunk
from procflow.processors import ProcessorContext
from procflow.processors._stream import StreamPipeline
from procflow.processors.builtin import BatchPartsProcessor, PIIDetector, RegexFilterProcessor

# One value of every type the rules find by default.
VALUES = {
    "email": "bob.smith@example.com",
    "phone": "+1 415 555 0100",
    "credit-card": "4111 1111 1111 1111",
    "ssn": "SSN 536-22-1948",
    "api-key": "sk-proj-4fG7hJ2kL9mN3pQ8rS1tV6wX0yZ5aB7c",
    "ip-address": "192.168.14.201",
    "url": "https://shop.example.org/orders?id=77",
    "uuid": "3f2b8c4e-1a7d-4e9b-9c3a-5d6e7f8a9b0c",
    "iban": "DE89 3704 0044 0532 0130 00",
    "crypto-wallet": "0x52908400098527886E0F7030069857D2E4169EE7",
    "date-of-birth": "born on 14 March 1987",
}
FILLER = ["Here", "is", "the", "record:", "ok.", "Also", "see", "and", "then", "done,",
          "mail", "call", "card", "note"]


def _whole_values(detector: PIIDetector, text: str) -> list[str]:
    return [d.value for d in detector.find(text) if len(d.value) > 3]


async def _run(processors: list[Any], deltas: list[str]) -> list[Chunk]:
    pipe = StreamPipeline(processors, ProcessorContext())
    out: list[Chunk] = []
    for delta in deltas:
        out += await pipe.process(Chunk.text_delta(delta))
    out += await pipe.process(Chunk.finish("stop", {}))
    return out


def _texts(chunks: list[Chunk]) -> list[str]:
    return [c.text for c in chunks if c.type == "text-delta"]


@st.composite
def pii_texts(draw: st.DrawFn) -> str:
    order = draw(st.permutations(list(VALUES.values())))
    words: list[str] = []
    for value in order:
        words += draw(st.lists(st.sampled_from(FILLER), min_size=1, max_size=3))
        words.append(value)
    words += draw(st.lists(st.sampled_from(FILLER), max_size=3))
    return " ".join(words) + "."


def test_the_sample_text_has_every_type() -> None:
    detector = PIIDetector()
    found = {d.type for d in detector.find(" and ".join(VALUES.values()))}
    assert found == set(VALUES)


@pytest.mark.timeout(600)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=pii_texts(), data=st.data())
async def test_no_value_leaks_over_any_chunking(text: str, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(1, len(text) - 1), max_size=len(text) // 2))
    points = sorted(set(cuts))
    deltas = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    detector = PIIDetector(strategy="redact")
    values = _whole_values(detector, text)
    assert len(values) >= len(VALUES)
    emitted = _texts(await _run([PIIDetector(strategy="redact")], deltas))
    streamed = "".join(emitted)
    for value in values:
        assert value not in streamed, (value, deltas)
        assert all(value not in chunk for chunk in emitted)
    # The same text whole gives the same answer: the window changes nothing.
    assert streamed == "".join(_texts(await _run([PIIDetector(strategy="redact")], [text])))


@pytest.mark.timeout(600)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=pii_texts(), data=st.data())
async def test_streamed_text_equals_final_text(text: str, data: st.DataObject,
                                               chunked: Any) -> None:
    cuts = data.draw(st.lists(st.integers(1, len(text) - 1), max_size=12))
    agent = Agent(id="a", model=chunked(chunked.split_at(text, cuts)),
                  output_processors=[PIIDetector(strategy="redact")])
    out = await agent.stream("hi")
    streamed = "".join([t async for t in out.text_stream])
    final = await out.text
    assert streamed == final
    for value in _whole_values(PIIDetector(), text):
        assert value not in streamed


async def test_issue_card_split_across_deltas(chunked: Any) -> None:
    """Bullet 1: the streamed text is redacted, not only the final text."""
    text = "Card 4111 1111 1111 1111 ok."
    agent = Agent(id="a", model=chunked(["Card 41", "11 1111 11", "11 1111 ok."]),
                  output_processors=[PIIDetector(strategy="redact")])
    out = await agent.stream("hi")
    streamed = "".join([t async for t in out.text_stream])
    assert "4111 1111 1111 1111" not in streamed
    assert "1111 11" not in streamed
    assert streamed == await out.text
    assert streamed.startswith("Card ") and streamed.endswith(" ok.")
    assert text not in streamed


async def test_phone_and_key_split_across_deltas(chunked: Any) -> None:
    deltas = ["Call +1 4", "15 555 01", "00 or use sk-proj-4fG7h", "J2kL9mN3pQ8rS1tV6wX0yZ5aB7c",
              " now."]
    agent = Agent(id="a", model=chunked(deltas),
                  output_processors=[PIIDetector(strategy="redact")])
    out = await agent.stream("hi")
    streamed = "".join([t async for t in out.text_stream])
    assert "+1 415 555 0100" not in streamed
    assert "4fG7hJ2kL9mN3pQ8rS1tV6wX0yZ5aB7c" not in streamed
    assert streamed == await out.text


async def test_regex_filter_pattern_split_across_deltas(chunked: Any) -> None:
    rule = {"name": "ticket", "pattern": r"TICKET-\d{4}"}
    guard = RegexFilterProcessor(rules=[rule], phase="output", strategy="redact")
    agent = Agent(id="a", model=chunked(["See TIC", "KET-12", "34 today."]),
                  output_processors=[guard])
    out = await agent.stream("hi")
    streamed = "".join([t async for t in out.text_stream])
    assert "TICKET-1234" not in streamed
    assert streamed == await out.text


# -- finish and flush ----------------------------------------------------------------

async def test_batch_parts_keeps_the_end(chunked: Any) -> None:
    """Bullet 2: batch_size=3 no longer drops the last words."""
    text = "one two three four five six seven"
    agent = Agent(id="a", model=chunked(chunked.split_at(text, [4, 8, 14, 19, 24, 28])),
                  output_processors=[BatchPartsProcessor(batch_size=3)])
    out = await agent.stream("hi")
    assert "".join([t async for t in out.text_stream]) == text
    assert await out.text == text


async def test_batch_parts_then_pii_keeps_the_text(chunked: Any) -> None:
    agent = Agent(id="a", model=chunked(["Mail ", "bob@", "example.com", " today."]),
                  output_processors=[BatchPartsProcessor(batch_size=3),
                                     PIIDetector(strategy="redact")])
    out = await agent.stream("hi")
    streamed = "".join([t async for t in out.text_stream])
    assert streamed.startswith("Mail ") and streamed.endswith(" today.")
    assert "bob@example.com" not in streamed
    assert streamed == await out.text


async def test_a_stream_without_finish_is_flushed(chunked: Any) -> None:
    agent = Agent(id="a", model=chunked(["a b c d e"], finish=False),
                  output_processors=[BatchPartsProcessor(batch_size=50)])
    assert (await agent.generate("hi")).text == "a b c d e"


async def test_stream_processors_see_finish_and_step_finish(chunked: Any) -> None:
    from procflow.processors import Processor

    seen: list[str] = []

    class Watch(Processor):
        id = "watch"

        def process_output_stream(self, args: Any) -> Any:
            seen.append(args.part.type)
            return args.part

    agent = Agent(id="a", model=chunked(["hi there"]), output_processors=[Watch()])
    await agent.generate("hi")
    assert seen == ["text-delta", "finish", "step-finish"]


@pytest.mark.timeout(600)
@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=80), size=st.integers(1, 8), data=st.data(),
       on_non_text=st.booleans())
async def test_batch_parts_never_loses_text(text: str, size: int, data: st.DataObject,
                                            on_non_text: bool) -> None:
    cuts = data.draw(st.lists(st.integers(1, max(len(text) - 1, 1)), max_size=20))
    points = sorted({c for c in cuts if 0 < c < len(text)})
    deltas = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    deltas = [d for d in deltas if d]
    out = await _run([BatchPartsProcessor(batch_size=size, emit_on_non_text=on_non_text)],
                     deltas)
    assert "".join(_texts(out)) == text
    assert out[-1].type == "finish"
