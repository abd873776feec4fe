from __future__ import annotations

from datetime import datetime
from typing import Any, get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from procflow.messages import (
    Chunk,
    FilePart,
    ImagePart,
    Message,
    MessageContent,
    MessageList,
    MessageSource,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

SOURCES: tuple[MessageSource, ...] = get_args(MessageSource)


def _assistant_with_call() -> Message:
    call = ToolCallPart(tool_call_id="c1", tool_name="lookup", args={"q": "x"})
    return Message(role="assistant",
                   content=MessageContent(parts=[TextPart(text="looking"), call]))


# --- Message -------------------------------------------------------------------------


def test_constructors_set_role_text_and_defaults() -> None:
    msg = Message.user("hi", thread_id="t1", metadata={"k": 1})
    assert (msg.role, msg.text, msg.thread_id) == ("user", "hi", "t1")
    assert msg.content.metadata == {"k": 1} and msg.content.format == 2
    assert len(msg.id) == 32 and msg.id != Message.user("hi").id
    assert msg.created_at.tzinfo is not None
    assert Message.assistant("a").role == "assistant"
    assert Message.system("s").role == "system"


def test_tool_message_carries_results() -> None:
    result = ToolResultPart(tool_call_id="c1", tool_name="lookup", result={"ok": True})
    msg = Message.tool([result])
    assert msg.role == "tool" and msg.tool_results == [result] and msg.text == ""


def test_text_joins_text_parts_and_falls_back_to_flat_content() -> None:
    parts: list[Any] = [TextPart(text="a"), ReasoningPart(text="why"), TextPart(text="b")]
    assert Message(role="assistant", content=MessageContent(parts=parts)).text == "ab"
    assert Message(role="user", content=MessageContent(content="flat")).text == "flat"
    assert Message(role="user").text == ""


def test_with_text_replaces_text_parts_keeping_others_in_place() -> None:
    msg = _assistant_with_call()
    new = msg.with_text("LOOKING")
    assert new is not msg and new.id == msg.id
    assert [p.type for p in new.content.parts] == ["text", "tool-call"]
    assert new.text == "LOOKING" and msg.text == "looking"


def test_with_text_appends_when_there_is_no_text_part() -> None:
    msg = Message(role="assistant", content=MessageContent(
        parts=[ToolCallPart(tool_call_id="c", tool_name="t")], content="old"))
    new = msg.with_text("x")
    assert [p.type for p in new.content.parts] == ["tool-call", "text"]
    assert new.content.content == "x"


def test_tool_calls_property() -> None:
    assert [c.tool_name for c in _assistant_with_call().tool_calls] == ["lookup"]


def test_naive_created_at_becomes_utc() -> None:
    msg = Message.user("x", created_at=datetime(2024, 1, 1))
    assert msg.created_at.utcoffset() is not None


# --- from_input -----------------------------------------------------------------------


def test_from_input_accepts_message_str_and_dicts() -> None:
    msg = Message.user("x")
    assert Message.from_input(msg) is msg
    assert Message.from_input("hello").role == "user"
    parsed = Message.from_input({"role": "assistant", "content": [
        {"type": "text", "text": "hi"},
        {"type": "tool-call", "tool_call_id": "1", "tool_name": "t", "args": {"a": 1}},
    ]})
    assert parsed.text == "hi" and parsed.tool_calls[0].args == {"a": 1}
    assert Message.from_input({"role": "system", "content": "be nice", "id": "s"}).id == "s"


@pytest.mark.parametrize(("obj", "match"), [
    pytest.param({"role": "robot", "content": "x"}, "robot", id="bad-role"),
    pytest.param({"content": "x"}, "missing 'role'", id="no-role"),
    pytest.param({"role": "user"}, "missing 'content'", id="no-content"),
    pytest.param({"role": "user", "content": 3}, "got int", id="bad-content"),
    pytest.param({"role": "user", "content": "x", "txt": 1}, "txt", id="unknown-key"),
    pytest.param(42, "int", id="bad-type"),
])
def test_from_input_rejects_bad_input_naming_the_problem(obj: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Message.from_input(obj)


def test_from_input_unknown_part_type_is_a_validation_error() -> None:
    with pytest.raises(ValidationError, match="bogus"):
        Message.from_input({"role": "user", "content": [{"type": "bogus"}]})


# --- parts ----------------------------------------------------------------------------


def test_parts_parse_from_dicts_by_type() -> None:
    adapter: TypeAdapter[Part] = TypeAdapter(Part)
    assert isinstance(adapter.validate_python({"type": "reasoning", "text": "r"}), ReasoningPart)
    image = adapter.validate_python({"type": "image", "url": "http://x/i.png"})
    assert isinstance(image, ImagePart)


@pytest.mark.parametrize("kwargs", [
    pytest.param({}, id="neither"),
    pytest.param({"url": "http://x", "data": b"1"}, id="both"),
])
def test_file_part_needs_exactly_one_of_url_or_data(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="exactly one of 'url' or 'data'"):
        FilePart(media_type="text/plain", **kwargs)


def test_message_json_round_trip_keeps_every_part() -> None:
    parts: list[Any] = [
        TextPart(text="t"), ReasoningPart(text="r"),
        ToolCallPart(tool_call_id="1", tool_name="f", args={"a": [1]}),
        ToolResultPart(tool_call_id="1", tool_name="f", result={"v": 2}, is_error=True),
        FilePart(data=b"\x00\xffbin", media_type="application/octet-stream", filename="b"),
        ImagePart(url="http://x/i.png", media_type="image/png"),
    ]
    msg = Message(role="assistant", content=MessageContent(parts=parts, metadata={"m": 1}))
    dumped = msg.model_dump(mode="json")
    assert dumped["content"]["parts"][4]["data"] == "AP9iaW4="
    assert Message.model_validate(dumped) == msg


# --- MessageList ----------------------------------------------------------------------


def test_sources_and_system_messages_are_kept_apart() -> None:
    ml = MessageList()
    ml.add(["hi", {"role": "system", "content": "sys"}], "input")
    ml.add(Message.assistant("old"), "memory")
    assert [m.text for m in ml.all()] == ["hi", "old"]
    assert [m.text for m in ml.input()] == ["hi"] and [m.text for m in ml.memory()] == ["old"]
    assert [m.text for m in ml.system()] == ["sys"] and len(ml) == 2
    assert ml.source_of(ml.system()[0].id) == "input"


def test_add_with_known_id_replaces_in_place() -> None:
    ml = MessageList().add([Message.user("a", id="1"), Message.user("b", id="2")], "input")
    ml.add(Message.assistant("A", id="1"), "response")
    assert [m.text for m in ml] == ["A", "b"] and ml.source_of("1") == "response"


def test_add_rejects_unknown_source() -> None:
    with pytest.raises(ValueError, match="'inbox'"):
        MessageList().add("x", "inbox")  # type: ignore[arg-type]


def test_add_system_tags_and_skips_duplicates() -> None:
    ml = MessageList().add_system("be brief").add_system(["remember", "remember"], tag="memory")
    assert [m.text for m in ml.system()] == ["be brief", "remember"]
    assert [m.text for m in ml.system(tag="memory")] == ["remember"]
    with pytest.raises(ValueError, match="add_system"):
        ml.add_system(Message.user("no"))


def test_replace_and_remove_by_ids() -> None:
    ml = MessageList().add([Message.user("a", id="1"), Message.user("b", id="2")], "input")
    ml.replace("1", Message.user("z", id="9"))
    assert [m.id for m in ml] == ["9", "2"] and ml.source_of("9") == "input"
    removed = ml.remove_by_ids(["2", "missing"])
    assert [m.id for m in removed] == ["2"] and [m.id for m in ml] == ["9"]
    assert ml.get("2") is None and ml.get("9") is not None


def test_unknown_ids_raise_key_error_naming_the_id() -> None:
    ml = MessageList().add(Message.user("a", id="1"), "input")
    with pytest.raises(KeyError, match="nope"):
        ml.replace("nope", "x")
    with pytest.raises(KeyError, match="nope"):
        ml.source_of("nope")


def test_replace_cannot_turn_a_message_into_a_system_message() -> None:
    ml = MessageList().add(Message.user("a", id="1"), "input")
    with pytest.raises(ValueError, match="apart"):
        ml.replace("1", Message.system("s"))


def test_clear_by_source_and_all() -> None:
    ml = MessageList().add("a", "input").add("b", "memory").add_system("s")
    assert [m.text for m in ml.clear("memory")] == ["b"]
    ml.clear()
    assert len(ml) == 0 and ml.system() == []


def test_copy_is_independent() -> None:
    ml = MessageList().add(Message.user("a", id="1"), "input")
    clone = ml.copy()
    clone.add("b", "input")
    clone.remove_by_ids("1")
    assert [m.text for m in ml] == ["a"] and [m.text for m in clone] == ["b"]


def test_to_prompt_shapes() -> None:
    result = ToolResultPart(tool_call_id="c1", tool_name="lookup", result={"raw": 1},
                            model_output="short")
    ml = MessageList().add(["q", _assistant_with_call(), Message.tool([result])], "input")
    ml.add_system("sys")
    assert ml.to_prompt() == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "looking"},
            {"type": "tool-call", "tool_call_id": "c1", "tool_name": "lookup",
             "args": {"q": "x"}},
        ]},
        {"role": "tool", "content": [
            {"type": "tool-result", "tool_call_id": "c1", "tool_name": "lookup",
             "result": "short", "is_error": False},
        ]},
    ]


def test_to_prompt_is_a_copy() -> None:
    ml = MessageList().add(_assistant_with_call(), "response")
    ml.to_prompt()[0]["content"][1]["args"]["q"] = "changed"
    assert ml.all()[0].tool_calls[0].args == {"q": "x"}


@settings(database=None, max_examples=60)
@given(st.lists(st.tuples(st.text(max_size=5), st.sampled_from(SOURCES)), max_size=20))
def test_all_preserves_order_and_sources_partition_it(
    items: list[tuple[str, MessageSource]],
) -> None:
    ml = MessageList()
    added = []
    for text, source in items:
        msg = Message.user(text)
        ml.add(msg, source)
        added.append((msg.id, source))
    assert [m.id for m in ml.all()] == [i for i, _ in added]
    parts = [ml.input(), ml.memory(), ml.response(), ml.context()]
    assert sorted(m.id for part in parts for m in part) == sorted(i for i, _ in added)
    for source, part in zip(SOURCES, parts, strict=True):
        assert [m.id for m in part] == [i for i, s in added if s == source]


_ENTRY = st.tuples(st.sampled_from(["system", "user", "assistant"]), st.text(max_size=20),
                   st.sampled_from(SOURCES), st.sampled_from([None, "memory", "rules"]))


def _listed(ml: MessageList) -> list[tuple[str, str, str, str, str | None]]:
    """Every message of ``ml`` with its role, text, source and tag, system ones first."""
    return ([(m.id, m.role, m.text, ml.source_of(m.id), ml._tags[m.id]) for m in ml.system()]
            + [(m.id, m.role, m.text, ml.source_of(m.id), None) for m in ml.all()])


@settings(max_examples=150)
@given(st.lists(_ENTRY, max_size=8))
def test_message_list_json_round_trips_sources_tags_and_order(
        entries: list[tuple[str, str, MessageSource, str | None]]) -> None:
    import json

    ml = MessageList()
    for role, text, source, tag in entries:
        msg = Message(role=role, content=MessageContent(parts=[TextPart(text=text)]))
        if role == "system" and tag is not None:
            ml.add_system(msg, tag=tag)
        else:
            ml.add(msg, source)  # a system message added so keeps its source
    data = json.loads(json.dumps(ml.to_json()))  # JSON through and through
    back = MessageList.from_json(data)
    assert _listed(back) == _listed(ml)
    assert back.to_prompt() == ml.to_prompt()


@pytest.mark.parametrize(("data", "error"), [
    ([], "expected a mapping"),
    ({"messages": {"a": 1}}, "'messages' must be a list"),
    ({"messages": [{"source": "input"}]}, r"messages\[0\]: expected a mapping with a 'message'"),
    ({"messages": [{"message": {"role": "user", "content": {"parts": []}}, "source": "inbox"}]},
     r"messages\[0\]: unknown message source 'inbox'"),
    ({"messages": [{"message": {"role": "robot"}, "source": "input"}]}, r"messages\[0\]"),
    ({"system": [{"message": Message.user("u").model_dump(mode="json")}]},
     r"system\[0\]: a 'user' message in 'system'"),
    ({"system": [{"message": Message.system("s").model_dump(mode="json"), "tag": 3}]},
     r"system\[0\]: a tag is a str or None"),
    ({"messages": [{"message": Message.user("u", id="x").model_dump(mode="json"),
                    "source": "input"}] * 2}, r"messages\[1\]: message id 'x' appears twice"),
])
def test_message_list_from_json_names_what_is_wrong_and_where(data: Any, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        MessageList.from_json(data)


# --- Chunk ----------------------------------------------------------------------------


def test_chunk_constructors() -> None:
    assert Chunk.text_delta("hi").text == "hi"
    finish = Chunk.finish("stop")
    assert (finish.payload.finish_reason, finish.usage) == ("stop", None)
    trip = Chunk.tripwire("blocked", processor_id="pii", retry=True, metadata={"k": 1})
    assert trip.to_dict() == {"type": "tripwire", "reason": "blocked", "processor_id": "pii",
                              "retry": True, "metadata": {"k": 1}}
    assert Chunk.error("boom").payload.error == "boom"
    custom = Chunk.custom("moderation", {"ok": True})
    assert (custom.type, custom.data, custom.text) == ("data-moderation", {"ok": True}, "")


def test_chunk_rejects_unknown_type_listing_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"'text'.*text-delta.*data-<name>"):
        Chunk.from_dict({"type": "text"})
    with pytest.raises(ValueError, match="non-empty name"):
        Chunk.custom("", None)
    with pytest.raises(TypeError, match="base of the chunk types"):
        Chunk("text-delta")


def test_new_ids_are_distinct_and_a_forked_child_does_not_repeat_its_parent() -> None:
    import os

    from procflow.messages import new_id

    ids = {new_id() for _ in range(10_000)}
    assert len(ids) == 10_000
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its next id and leave at once
        os.write(write, new_id().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 64).decode()
    os.close(read)
    assert len(child) == 32 and child != new_id()
