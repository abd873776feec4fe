"""ToolCallFilter, UnicodeNormalizer, RegexFilterProcessor and BatchPartsProcessor."""

from __future__ import annotations

from typing import Any

import pytest

from procflow.errors import TripwireError
from procflow.messages import (
    Chunk,
    ImagePart,
    Message,
    MessageList,
    TextPart,
    ToolCallChunk,
    ToolCallPart,
    ToolResultPart,
)
from procflow.processors import OutputResult
from procflow.processors._hooks import StepInfo, StepOverrides
from procflow.processors._runner import ProcessorRunner
from procflow.processors.builtin import batch_parts
from procflow.processors.builtin.batch_parts import BatchPartsProcessor
from procflow.processors.builtin.regex import RegexFilterProcessor, RegexRule
from procflow.processors.builtin.tools.filter import ToolCallFilter
from procflow.processors.builtin.unicode import UnicodeNormalizer

# -- helpers --------------------------------------------------------------------------


def call(call_id: str, tool: str = "weather", text: str | None = None) -> Message:
    parts: list[Any] = [TextPart(text=text)] if text else []
    parts.append(ToolCallPart(tool_call_id=call_id, tool_name=tool, args={"city": "Oslo"}))
    return Message(role="assistant", content={"parts": parts})


def result(call_id: str, tool: str = "weather", model_output: Any = None) -> Message:
    return Message.tool([ToolResultPart(tool_call_id=call_id, tool_name=tool,
                                        result={"raw": "payload"}, model_output=model_output)])


def tool_parts(ml: MessageList) -> list[str]:
    return [p.tool_call_id for m in ml.all() for p in m.content.parts
            if isinstance(p, ToolCallPart | ToolResultPart)]


async def step(ml: MessageList, *processors: Any) -> ProcessorRunner:
    runner = ProcessorRunner(list(processors))
    await runner.run_input_step(ml, StepInfo(0, []), StepOverrides())
    return runner


async def stream(processor: Any, chunks: list[Chunk]) -> list[list[Chunk]]:
    pipe = ProcessorRunner([processor]).output_stream()
    return [await pipe.process(c) for c in chunks]


def user_list(*texts: str) -> MessageList:
    ml = MessageList()
    ml.add([Message.user(t) for t in texts], source="input")
    return ml


# -- ToolCallFilter -------------------------------------------------------------------


async def test_tool_call_filter_strips_all_prior_tool_traffic_only() -> None:
    ml = MessageList()
    ml.add([Message.user("weather?"), call("h1", text="Let me check."), result("h1"),
            Message.assistant("Sunny.")], source="memory")
    ml.add(Message.user("and tomorrow?"), source="input")
    ml.add([call("r1"), result("r1")], source="response")
    await ProcessorRunner([ToolCallFilter()]).run_input(ml)
    assert tool_parts(ml) == ["r1", "r1"]  # the current run is not prior history
    assert [m.text for m in ml.memory()] == ["weather?", "Let me check.", "Sunny."]


async def test_tool_call_filter_exclude_only_named_tools() -> None:
    ml = MessageList().add([call("a", "search"), result("a", "search"), call("b"), result("b")],
                           source="memory")
    await ProcessorRunner([ToolCallFilter(exclude=["search"])]).run_input(ml)
    assert tool_parts(ml) == ["b", "b"]
    ml2 = MessageList().add([call("a"), result("a")], source="memory")
    await ProcessorRunner([ToolCallFilter(exclude=[])]).run_input(ml2)
    assert tool_parts(ml2) == ["a", "a"]


@pytest.mark.parametrize(("keep", "left"), [(1, ["s3", "s3"]), (2, ["s2", "s2", "s3", "s3"])])
async def test_tool_call_filter_after_tool_steps_keeps_the_latest(keep: int,
                                                                   left: list[str]) -> None:
    ml = MessageList().add(Message.user("plan a trip"), source="input")
    for i in (1, 2, 3):
        ml.add([call(f"s{i}"), result(f"s{i}")], source="response")
    await step(ml, ToolCallFilter(filter_after_tool_steps=keep))
    assert tool_parts(ml) == left
    assert ml.all()[0].text == "plan a trip"


async def test_tool_call_filter_without_steps_option_leaves_the_loop_alone() -> None:
    ml = MessageList().add([call("s1"), result("s1")], source="response")
    await step(ml, ToolCallFilter())
    assert tool_parts(ml) == ["s1", "s1"]


async def test_tool_call_filter_preserve_model_output_keeps_a_compact_record() -> None:
    ml = MessageList().add([call("h1"), result("h1", model_output="Sunny, 21C"),
                            call("h2"), result("h2")], source="memory")
    await ProcessorRunner([ToolCallFilter(preserve_model_output=True)]).run_input(ml)
    assert tool_parts(ml) == []
    assert [m.text for m in ml.all()] == ["[Tool weather returned: Sunny, 21C]"]
    assert "Oslo" not in str(ml.to_prompt()) and "payload" not in str(ml.to_prompt())


def test_tool_call_filter_validates() -> None:
    with pytest.raises(ValueError, match="list of tool names"):
        ToolCallFilter(exclude="search")
    with pytest.raises(ValueError, match="int >= 1"):
        ToolCallFilter(filter_after_tool_steps=0)


# -- UnicodeNormalizer ----------------------------------------------------------------


@pytest.mark.parametrize(("options", "text", "expected"), [
    ({}, "ｆｕｌｌ ① ﬁ", "full 1 fi"),
    ({}, "a\r\nb\rc", "a\nb\nc"),
    ({}, "a\u200bb\u200cc\u2060d\ufeffe", "abcde"),
    ({}, "family 👨\u200d👩\u200d👧 ok", "family 👨\u200d👩\u200d👧 ok"),
    ({}, "x\u200d y", "x y"),
    ({}, "a\x00b", "a\x00b"),
    ({"strip_control_chars": True, "collapse_whitespace": False}, "a\x00b\x07c\td\ne\x7f",
     "abc\td\ne"),
    ({}, "a   b\t\tc\td\n\n\n\ne", "a b c d\n\ne"),
    ({"collapse_whitespace": False}, "a   b\n\n\n\nc", "a   b\n\n\n\nc"),
    ({}, "  \n hi \n ", "hi"),
    ({"trim": False}, "  hi ", " hi "),
    ({"preserve_emojis": False}, "Hi 👋 there 🎉! 👨\u200d👩\u200d👧 ❤️", "Hi there !"),
    ({}, "Hi 👋 ❤️", "Hi 👋 ❤️"),
])
def test_unicode_normalize(options: dict[str, Any], text: str, expected: str) -> None:
    assert UnicodeNormalizer(**options).normalize(text) == expected


async def test_unicode_normalizer_process_input_keeps_other_parts() -> None:
    image = ImagePart(url="https://example.com/a.png")
    msg = Message(role="user", content={"parts": [TextPart(text="  ｈｅｌｌｏ   "), image,
                                                  TextPart(text="wor\u200bld  ")]})
    untouched = Message.user("fine")
    ml = MessageList().add([msg, untouched], source="input")
    await ProcessorRunner([UnicodeNormalizer()]).run_input(ml)
    parts = ml.input()[0].content.parts
    assert parts == [TextPart(text="hello "), image, TextPart(text="world")]
    assert ml.input()[1] is untouched and ml.input()[0].id == msg.id


# -- RegexFilterProcessor -------------------------------------------------------------

SECRET = "ghp_" + "a1B2" * 9


async def test_regex_presets_redact_pii_secrets_and_urls() -> None:
    ml = user_list(f"mail bob@example.com, ip 10.0.0.1, token {SECRET}, see https://x.io/a")
    proc = RegexFilterProcessor(presets=["pii", "secrets", "urls"], strategy="redact")
    await ProcessorRunner([proc]).run_input(ml)
    assert ml.input()[0].text == "mail [EMAIL], ip [IP_ADDRESS], token [SECRET], see [URL]"


async def test_regex_block_metadata_names_rules_never_the_match() -> None:
    ml = user_list(f"use {SECRET} and {SECRET}")
    with pytest.raises(TripwireError) as err:
        await ProcessorRunner([RegexFilterProcessor(presets=["secrets"])]).run_input(ml)
    trip = err.value
    assert trip.processor_id == "regex-filter"
    assert trip.metadata["matches"] == [{"rule": "github-token", "count": 2}]
    assert SECRET not in repr(trip.metadata) and SECRET not in trip.reason


async def test_regex_warn_reports_and_lets_text_through() -> None:
    ml = user_list("visit https://example.com")
    runner = ProcessorRunner([RegexFilterProcessor(presets=["urls"], strategy="warn")])
    await runner.run_input(ml)
    assert ml.input()[0].text == "visit https://example.com"
    [violation] = runner.context.violations
    assert violation.detail["matches"] == [{"rule": "url", "count": 1}]
    assert "example.com" not in violation.message


async def test_regex_custom_rules_as_objects_and_dicts() -> None:
    proc = RegexFilterProcessor(strategy="redact", rules=[
        RegexRule("order-id", r"ORD-\d+", replacement="[ORDER]"),
        {"name": "codename", "pattern": "blue\\s*falcon", "replacement": r"\1", "flags": 2},
    ])
    ml = user_list("ORD-123 is Blue Falcon")
    await ProcessorRunner([proc]).run_input(ml)
    assert ml.input()[0].text == r"[ORDER] is \1"  # replacements are literal text


async def test_regex_output_stream_and_result() -> None:
    proc = RegexFilterProcessor(presets=["pii"], strategy="redact", phase="output")
    # The word in progress waits for more text, here the finish (a stream window).
    got = [c for cs in await stream(proc, [Chunk.text_delta("to a@b.io"), Chunk.finish("stop")])
           for c in cs]
    assert "".join(c.text for c in got[:-1]) == "to [EMAIL]" and got[-1].type == "finish"
    ml = MessageList().add(Message.assistant("reach me: a@b.io"), source="response")
    res = OutputResult(text="reach me: a@b.io")
    await ProcessorRunner([proc]).run_output_result(ml, res)
    assert ml.response()[0].text == res.text == "reach me: [EMAIL]"
    blocked = await stream(RegexFilterProcessor(presets=["pii"]),
                           [Chunk.text_delta("a@b.io"), Chunk.finish("stop")])
    assert blocked[1][0].type == "tripwire"


async def test_regex_phase_limits_where_it_checks() -> None:
    ml = user_list("a@b.io")
    await ProcessorRunner([RegexFilterProcessor(presets=["pii"], phase="output")]).run_input(ml)
    assert ml.input()[0].text == "a@b.io"
    [[out]] = await stream(RegexFilterProcessor(presets=["pii"], phase="input"),
                           [Chunk.text_delta("a@b.io")])
    assert out.text == "a@b.io"


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"rules": [RegexRule("broken", "(unclosed")]}, "rule 'broken' has an invalid pattern"),
    ({"rules": [{"name": "star", "pattern": "a*"}]}, "'star'.*matches the empty string"),
    ({"rules": [{"pattern": "x"}]}, r"rules\[0\] needs 'name'"),
    ({"presets": ["emails"]}, "unknown preset 'emails'"),
    ({}, "nothing to check"),
    ({"presets": ["urls"], "strategy": "mask"}, "strategy must be one of"),
    ({"presets": ["urls"], "phase": "both"}, "phase must be one of"),
    ({"rules": [RegexRule("x", "x"), RegexRule("x", "y")]}, "duplicate rule name"),
])
def test_regex_filter_validates(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        RegexFilterProcessor(**kwargs)


# -- BatchPartsProcessor --------------------------------------------------------------


def texts(*words: str) -> list[Chunk]:
    return [Chunk.text_delta(w) for w in words]


async def test_batch_parts_merges_every_batch_size_chunks() -> None:
    outs = await stream(BatchPartsProcessor(batch_size=3),
                        [*texts("a", "b", "c", "d", "e", "f", "g"), Chunk.finish("stop")])
    emitted = [[(c.type, c.text) for c in out] for out in outs]
    assert emitted == [[], [], [("text-delta", "abc")], [], [], [("text-delta", "def")], [],
                       [("text-delta", "g"), ("finish", "")]]


async def test_batch_parts_non_text_flushes_first() -> None:
    tool = ToolCallChunk("c1", "weather")
    outs = await stream(BatchPartsProcessor(), [*texts("a", "b"), tool, Chunk.finish("stop")])
    assert [[c.text or c.type for c in out] for out in outs] == [[], [], ["ab", "tool-call"],
                                                                  ["finish"]]


async def test_batch_parts_without_emit_on_non_text_keeps_order() -> None:
    tool = ToolCallChunk("c1", "weather")
    outs = await stream(BatchPartsProcessor(batch_size=4, emit_on_non_text=False),
                        [*texts("a", "b"), tool, *texts("c"), *texts("d"), Chunk.finish("x")])
    assert [[c.text or c.type for c in out] for out in outs] == [
        [], [], [], ["ab", "tool-call", "c"], [], ["d", "finish"]]


async def test_batch_parts_max_wait_time(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(batch_parts, "_clock", lambda: now[0])
    pipe = ProcessorRunner([BatchPartsProcessor(batch_size=10, max_wait_time=1.0)]).output_stream()
    got = []
    for t, word in ((100.0, "a"), (100.5, "b"), (101.2, "c"), (101.3, "d")):
        now[0] = t
        got.append([c.text for c in await pipe.process(Chunk.text_delta(word))])
    assert got == [[], [], ["abc"], []]


def test_batch_parts_validates() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        BatchPartsProcessor(batch_size=0)
    with pytest.raises(ValueError, match="max_wait_time"):
        BatchPartsProcessor(max_wait_time=0)
