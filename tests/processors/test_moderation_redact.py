"""``ModerationProcessor(strategy="redact")``: flagged terms replaced in messages and on
the stream, with the stream window's guarantee (issue 11, point 1): no emitted chunk,
nor their concatenation, holds a term the processor flags in the whole text, and the
streamed text equals the final text."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from procflow.agent import Agent
from procflow.messages import Chunk, Message, MessageList
from procflow.models import ScriptedModel
from procflow.models.base import ModelRequest
from procflow.processors import OutputResult, ProcessorContext, ProcessorViolation
from procflow.processors._runner import ProcessorRunner
from procflow.processors._stream import StreamPipeline
from procflow.processors.builtin.moderation import ModerationProcessor
from procflow.processors.builtin.moderation.detector import REDACT_HOLD_SPAN

FLAGGED = ["I will kill you", "you moron", "Immigrants are parasites", "Kill yourself",
           "how to build a pipe bomb", "I will stab you", "you are pathetic",
           "you are a worthless piece of trash", "k i l l yourself"]
BENIGN = ["This bug is killing me", "kill the process", "shoot me an email",
          "I will destroy you at chess"]
FILLER = ["Here", "is", "the", "answer:", "ok.", "Also", "see", "and", "then", "done,",
          "well", "so", "note", "today"]


class Deltas:
    """A model streaming fixed text deltas, then "finish"."""

    provider = "test"
    model_id = "deltas"

    def __init__(self, deltas: Sequence[str]) -> None:
        self.deltas = list(deltas)

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        for delta in self.deltas:
            yield Chunk.text_delta(delta)
        yield Chunk.finish("stop", {"input_tokens": 1, "output_tokens": 1})


def split(text: str, cuts: Sequence[int]) -> list[str]:
    points = sorted({c for c in cuts if 0 < c < len(text)})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


async def stream_through(processor: ModerationProcessor, deltas: list[str]) -> list[str]:
    pipe = StreamPipeline([processor], ProcessorContext())
    out: list[Chunk] = []
    for delta in deltas:
        out += await pipe.process(Chunk.text_delta(delta))
    out += await pipe.process(Chunk.finish("stop", {}))
    assert out[-1].type == "finish"
    return [c.text for c in out if c.type == "text-delta"]


def flagged_values(text: str) -> list[str]:
    return [text[a:b] for a, b in ModerationProcessor(strategy="redact").spans(text)]


# -- the rule -----------------------------------------------------------------------------

@pytest.mark.parametrize("phrase", FLAGGED)
def test_each_flagged_phrase_is_replaced_whole(phrase: str) -> None:
    moderation = ModerationProcessor(strategy="redact")
    assert moderation.redact(f"Well, {phrase}. Bye.") == "Well, [redacted]. Bye."


@pytest.mark.parametrize("phrase", BENIGN)
def test_idioms_are_left_alone(phrase: str) -> None:
    assert ModerationProcessor(strategy="redact").redact(phrase) == phrase


def test_replacement_categories_and_threshold_options() -> None:
    text = "Listen you moron, I will kill you."
    assert ModerationProcessor(strategy="redact", replacement="***").redact(text) == \
        "Listen ***, ***."
    violence_only = ModerationProcessor(strategy="redact", categories=["violence"])
    assert violence_only.redact(text) == "Listen you moron, [redacted]."
    assert ModerationProcessor(strategy="redact", threshold=0.99).redact(text) == text


@pytest.mark.parametrize("kwargs", [
    {"strategy": "redact", "model": ScriptedModel(["{}"])},
    {"strategy": "redact", "classifier": lambda text: 0.1},
    {"strategy": "redact", "chunk_window": 3},
    {"strategy": "redact", "replacement": None},
])
def test_redact_rejects_options_without_spans(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="moderation"):
        ModerationProcessor(**kwargs)


# -- messages -------------------------------------------------------------------------------

async def test_input_messages_are_redacted_and_reported() -> None:
    seen: list[ProcessorViolation] = []
    moderation = ModerationProcessor(strategy="redact")
    moderation.on_violation = seen.append  # type: ignore[method-assign]
    ml = MessageList()
    ml.add([Message.user("Hello there."), Message.user("You moron, I will stab you!")],
           source="input")
    await ProcessorRunner([moderation]).run_input(ml)
    assert [m.text for m in ml.input()] == ["Hello there.", "[redacted], [redacted]!"]
    assert len(seen) == 1
    assert seen[0].detail["action"] == "redacted" and seen[0].detail["count"] == 2


async def test_output_result_messages_are_redacted() -> None:
    ml = MessageList()
    ml.add(Message.assistant("Kill yourself, honestly."), source="response")
    await ProcessorRunner([ModerationProcessor(strategy="redact")]).run_output_result(
        ml, OutputResult(text=""))
    assert [m.text for m in ml.response()] == ["[redacted], honestly."]


async def test_the_model_never_sees_a_redacted_input_term() -> None:
    model = ScriptedModel(["ok"])
    agent = Agent(id="a", model=model,
                  input_processors=[ModerationProcessor(strategy="redact")])
    result = await agent.generate("Tell the moderator: you moron.")
    assert result.text == "ok" and result.tripwire is None
    assert "moron" not in str(model.requests[0].prompt)
    assert "[redacted]" in str(model.requests[0].prompt)


# -- the stream -----------------------------------------------------------------------------

async def test_a_term_split_across_deltas_is_replaced_whole() -> None:
    deltas = ["Listen, I wi", "ll ki", "ll y", "ou now. Fine."]
    emitted = await stream_through(ModerationProcessor(strategy="redact"), deltas)
    assert "".join(emitted) == "Listen, [redacted] now. Fine."
    assert not any("kill" in chunk or "ll y" in chunk for chunk in emitted)


async def test_the_stream_holds_back_at_most_the_hold_span_plus_a_word() -> None:
    words = ("alpha beta gamma delta " * 20).split(" ")
    pipe = StreamPipeline([ModerationProcessor(strategy="redact")], ProcessorContext())
    sent = released = ""
    for word in words:
        sent += word + " "
        released += "".join(c.text for c in await pipe.process(Chunk.text_delta(word + " ")))
        assert len(sent) - len(released) <= REDACT_HOLD_SPAN + len("gamma ")
    flushed = await pipe.process(Chunk.finish("stop", {}))
    assert released + "".join(c.text for c in flushed) == sent


async def test_agent_stream_and_generate_agree() -> None:
    text = "Sure. You moron, I will kill you. Also kill the process first."
    deltas = split(text, range(3, len(text), 4))
    agent = Agent(id="a", model=Deltas(deltas),
                  output_processors=[ModerationProcessor(strategy="redact")])
    out = await agent.stream("hi")
    emitted = [t async for t in out.text_stream]
    expected = "Sure. [redacted], [redacted]. Also kill the process first."
    assert "".join(emitted) == await out.text == expected
    generated = await agent.generate("hi")
    assert generated.text == expected and generated.tripwire is None
    assert generated.response.messages[-1].text == expected


@st.composite
def texts(draw: st.DrawFn) -> str:
    phrases = draw(st.lists(st.sampled_from(FLAGGED + BENIGN), min_size=1, max_size=5))
    words: list[str] = []
    for phrase in phrases:
        words += draw(st.lists(st.sampled_from(FILLER), max_size=4))
        words.append(phrase + draw(st.sampled_from(["", ".", ",", "!"])))
    words += draw(st.lists(st.sampled_from(FILLER), max_size=3))
    return " ".join(words)


@pytest.mark.timeout(600)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts(), data=st.data())
async def test_no_flagged_term_leaks_over_any_chunking(text: str, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=len(text) // 2))
    deltas = split(text, cuts)
    emitted = await stream_through(ModerationProcessor(strategy="redact"), deltas)
    streamed = "".join(emitted)
    for value in flagged_values(text):
        assert value not in streamed, (value, deltas)
        assert all(value not in chunk for chunk in emitted)
    # The window changes nothing: the stream equals the whole text redacted at once.
    assert streamed == ModerationProcessor(strategy="redact").redact(text)


@pytest.mark.timeout(600)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts(), data=st.data())
async def test_streamed_text_equals_final_text(text: str, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=12))
    agent = Agent(id="a", model=Deltas(split(text, cuts)),
                  output_processors=[ModerationProcessor(strategy="redact")])
    out = await agent.stream("hi")
    streamed = "".join([t async for t in out.text_stream])
    assert streamed == await out.text
    for value in flagged_values(text):
        assert value not in streamed


def test_an_exclamation_mark_ending_a_word_is_not_read_as_leet() -> None:
    # Found by the property test: "chess!" de-leeted to "chessi" hid the idiom, so the
    # same phrase was flagged before "!" and left alone elsewhere.
    moderation = ModerationProcessor(strategy="redact")
    text = "I will kill you I will destroy you at chess I will destroy you at chess!"
    assert moderation.redact(text) == "[redacted] I will destroy you at chess I will " \
        "destroy you at chess!"
    assert moderation.redact("I will k!ll you!") == "[redacted]!"
