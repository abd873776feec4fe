"""Typed chunks: one frozen dataclass per type under ``Chunk``, attribute access,
``match`` dispatch, ``to_dict``/``from_dict`` (the older untyped shape included), and
the typed ``Tripwire`` of a run that survives storage."""

from __future__ import annotations

import dataclasses
import json
import runpy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import procflow
from procflow import StepContext, Tripwire, Usage, create_step, create_workflow
from procflow.agent import Agent
from procflow.cache import InMemoryServerCache
from procflow.messages import (
    Chunk,
    ChunkType,
    DataChunk,
    ErrorChunk,
    Finish,
    ReasoningDelta,
    Start,
    StepFinish,
    StepStart,
    SuspendedChunk,
    TextDelta,
    ToolCallChunk,
    ToolResultChunk,
    TripwireChunk,
)
from procflow.models import ScriptedModel
from procflow.processors.builtin.cache.codec import decode_chunks, encode_chunks
from procflow.processors.builtin.cache.response import ResponseCache
from procflow.records import RunSnapshot
from procflow.storage import SQLiteStorage
from procflow.storage.codec import dump_snapshot, load_snapshot_json

ONE_OF_EACH: list[Chunk] = [
    Start("agent", resumed="run-1"),
    StepStart(2),
    TextDelta("hello", {"source": "model"}),
    ReasoningDelta("thinking"),
    ToolCallChunk("call_1", "lookup", {"id": 7}),
    ToolResultChunk("call_1", "lookup", {"status": "ok"}, is_error=False),
    StepFinish(2, "tool-calls"),
    Finish("stop", Usage(input_tokens=3, output_tokens=4, total_tokens=7)),
    ErrorChunk("boom"),
    TripwireChunk("blocked", "pii", True, {"entity": "email"}),
    SuspendedChunk("run-1", ({"tool_call_id": "call_1", "tool_name": "pay", "args": {},
                              "payload": {"question": "ok?"}},)),
    DataChunk("progress", {"pct": 50}),
]


# -- the types -------------------------------------------------------------------------


def test_there_is_one_type_per_chunk_type_and_each_names_its_type() -> None:
    builtin = {c.type for c in ONE_OF_EACH if not isinstance(c, DataChunk)}
    assert builtin == set(ChunkType.__args__)  # type: ignore[attr-defined]
    assert DataChunk("progress").type == "data-progress"
    for chunk in ONE_OF_EACH:
        assert isinstance(chunk, Chunk)
        assert dataclasses.is_dataclass(chunk)
        assert not hasattr(chunk, "__dict__"), f"{type(chunk).__name__} is not slotted"


@pytest.mark.parametrize("chunk", ONE_OF_EACH, ids=lambda c: c.type)
def test_every_chunk_is_frozen(chunk: Chunk) -> None:
    name = dataclasses.fields(chunk)[0].name  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(chunk, name, "changed")
    with pytest.raises((dataclasses.FrozenInstanceError, AttributeError, TypeError)):
        chunk.extra = 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("chunk", ONE_OF_EACH, ids=lambda c: c.type)
def test_payload_is_the_chunk_itself(chunk: Chunk) -> None:
    assert chunk.payload is chunk


def test_fields_read_as_attributes_on_the_chunk_and_on_payload() -> None:
    delta = TextDelta("hi")
    assert delta.text == delta.payload.text == "hi"
    trip = TripwireChunk("no", "guard")
    assert (trip.payload.reason, trip.payload.processor_id, trip.retry, trip.metadata) == (
        "no", "guard", False, {})
    assert trip.to_tripwire() == Tripwire("no", "guard")
    assert [c.text for c in ONE_OF_EACH] == [
        "", "", "hello", "thinking", "", "", "", "", "", "", "", ""]
    assert TextDelta("a").metadata is None and TextDelta("a", {"k": 1}).metadata == {"k": 1}


def test_equal_chunks_compare_and_hash_equal() -> None:
    assert TextDelta("a") == TextDelta("a") != ReasoningDelta("a")
    assert hash(TextDelta("a")) == hash(TextDelta("a"))
    assert dataclasses.replace(TextDelta("a", {"k": 1}), text="b") == TextDelta("b", {"k": 1})


def test_the_base_is_not_built_directly() -> None:
    with pytest.raises(TypeError, match=r"base of the chunk types.*TextDelta"):
        Chunk("text-delta", {"text": "hi"})


def test_the_factories_return_the_concrete_types() -> None:
    assert Chunk.text_delta("hi") == TextDelta("hi")
    finish = Chunk.finish("stop", {"input_tokens": 2, "output_tokens": 3})
    assert finish == Finish("stop", Usage(2, 3, 5))
    assert Chunk.finish("length") == Finish("length", None)
    assert Chunk.tripwire("no", "guard", True, {"k": 1}) == TripwireChunk("no", "guard", True,
                                                                         {"k": 1})
    error = ValueError("bad")
    assert Chunk.error(error) == ErrorChunk(error)
    assert Chunk.custom("progress", 5) == DataChunk("progress", 5)
    with pytest.raises(ValueError, match="non-empty name"):
        Chunk.custom("", 5)


def _describe(chunk: Chunk) -> str:
    match chunk:
        case TextDelta(text=text):
            return f"text {text}"
        case ToolCallChunk(tool_name=name, args={"id": ident}):
            return f"call {name} {ident}"
        case Finish(finish_reason=reason, usage=Usage(total_tokens=total)):
            return f"finish {reason} {total}"
        case TripwireChunk(reason=reason, processor_id=pid):
            return f"tripwire {pid}: {reason}"
        case DataChunk(name="progress", data={"pct": pct}):
            return f"progress {pct}"
        case Chunk(type=kind):
            return f"other {kind}"
    return "not a chunk"


def test_match_dispatches_on_the_classes() -> None:
    assert [_describe(c) for c in ONE_OF_EACH] == [
        "other start", "other step-start", "text hello", "other reasoning-delta",
        "call lookup 7", "other tool-result", "other step-finish", "finish stop 7",
        "other error", "tripwire pii: blocked", "other suspended", "progress 50"]
    assert TextDelta.__match_args__ == ("text", "metadata")
    match TextDelta("positional"):
        case TextDelta(text):
            assert text == "positional"


# -- to_dict / from_dict ---------------------------------------------------------------

def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    # named, not a lambda: see tests/processors/test_response_cache.py (json_values)
    return st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False),
    _containers, max_leaves=8)
_mapping = st.dictionaries(st.text(max_size=5), _json, max_size=3)
_metadata = st.none() | _mapping
_text = st.text(max_size=10)
_maybe_text = st.none() | _text


@st.composite
def _usage(draw: st.DrawFn) -> Usage:
    counts = st.integers(min_value=0, max_value=10**9)
    given_in, given_out = draw(counts), draw(counts)
    return Usage(given_in, given_out, given_in + given_out, draw(counts), draw(counts))


chunks = st.one_of(
    st.builds(Start, _maybe_text, _maybe_text, _metadata, _maybe_text),
    st.builds(StepStart, st.integers(min_value=0, max_value=100), _metadata),
    st.builds(TextDelta, _text, _metadata),
    st.builds(ReasoningDelta, _text, _metadata),
    st.builds(ToolCallChunk, _text, _text, _mapping, _metadata),
    st.builds(ToolResultChunk, _text, _text, _json, st.booleans(), _metadata),
    st.builds(StepFinish, st.integers(min_value=0, max_value=100), _maybe_text, _metadata),
    st.builds(Finish, _maybe_text, st.none() | _usage(), _metadata),
    st.builds(ErrorChunk, _text, _metadata),
    st.builds(TripwireChunk, _text, _maybe_text, st.booleans(), _mapping),
    st.builds(SuspendedChunk, _text, st.lists(_mapping, max_size=3).map(tuple), _metadata),
    st.builds(DataChunk, st.text(min_size=1, max_size=8), _json, _metadata),
)


@given(chunks)
def test_to_dict_and_from_dict_round_trip_through_json(chunk: Chunk) -> None:
    data = chunk.to_dict()
    assert data["type"] == chunk.type
    assert Chunk.from_dict(data) == chunk
    wire = json.loads(json.dumps(data))
    assert Chunk.from_dict(wire) == chunk


def test_to_dict_is_plain_data() -> None:
    assert [c.to_dict() for c in ONE_OF_EACH[:3]] == [
        {"type": "start", "agent_id": "agent", "resumed": "run-1", "run_id": None},
        {"type": "step-start", "step_number": 2},
        {"type": "text-delta", "text": "hello", "metadata": {"source": "model"}}]
    assert ONE_OF_EACH[7].to_dict() == {"type": "finish", "finish_reason": "stop", "usage": {
        "input_tokens": 3, "output_tokens": 4, "total_tokens": 7}}
    assert DataChunk("progress", 1).to_dict() == {"type": "data-progress", "data": 1}
    assert ErrorChunk(ValueError("bad")).to_dict() == {"type": "error",
                                                       "error": "ValueError: bad"}
    metadata = {"k": [1]}
    assert TextDelta("a", metadata).to_dict()["metadata"] is not metadata


OLD = [  # as the untyped Chunk wrote them (response caches, traces)
    ({"type": "start", "payload": {"agent_id": "a"}, "data": None, "metadata": None},
     Start("a")),
    ({"type": "text-delta", "payload": {"text": "hé", "extra": 1}, "data": None,
      "metadata": {"m": 1}}, TextDelta("hé", {"m": 1})),
    ({"type": "reasoning-delta", "payload": {"text": "hmm"}, "data": None, "metadata": None},
     ReasoningDelta("hmm")),
    ({"type": "tool-call", "payload": {"tool_call_id": "c", "tool_name": "t", "args": {"a": 1}},
      "data": None, "metadata": None}, ToolCallChunk("c", "t", {"a": 1})),
    ({"type": "tool-result", "payload": {"tool_call_id": "c", "tool_name": "t", "result": 2,
                                         "is_error": False}}, ToolResultChunk("c", "t", 2)),
    ({"type": "step-finish", "payload": {"step_number": 0, "finish_reason": "stop"}},
     StepFinish(0, "stop")),
    ({"type": "finish", "payload": {"finish_reason": "stop", "usage": {
        "input_tokens": 1, "output_tokens": 2, "total_tokens": 3}}, "data": None,
      "metadata": None}, Finish("stop", Usage(1, 2, 3))),
    ({"type": "finish", "payload": {"finish_reason": None}}, Finish(None)),
    ({"type": "error", "payload": {"error": "boom"}}, ErrorChunk("boom")),
    ({"type": "tripwire", "payload": {"reason": "no", "processor_id": "p", "retry": False,
                                      "metadata": {"k": 1}}, "data": None, "metadata": None},
     TripwireChunk("no", "p", False, {"k": 1})),
    ({"type": "suspended", "payload": {"run_id": "r", "calls": [{"tool_call_id": "c"}]}},
     SuspendedChunk("r", ({"tool_call_id": "c"},))),
    ({"type": "data-progress", "payload": {}, "data": {"pct": 5}, "metadata": {"t": True}},
     DataChunk("progress", {"pct": 5}, {"t": True})),
]


@pytest.mark.parametrize(("old", "typed"), OLD, ids=lambda v: str(v)[:30])
def test_the_old_untyped_shape_loads(old: dict[str, Any], typed: Chunk) -> None:
    assert Chunk.from_dict(old) == typed


@pytest.mark.parametrize(("data", "message"), [
    ({"type": "text"}, r"unknown chunk type 'text'; expected one of start, .*data-<name>"),
    ({"type": "data-"}, r"unknown chunk type 'data-'"),
    ({"text": "hi"}, r"needs a 'type' string"),
    ({"type": "text-delta"}, r"chunk 'text-delta' is missing field\(s\) \['text'\]"),
    ({"type": "text-delta", "text": "a", "txt": "b"}, r"no field\(s\) \['txt'\]"),
    ({"type": "text-delta", "text": 5}, r"'text' must be a string, got int"),
    ({"type": "step-start", "step_number": True}, r"'step_number' must be an integer"),
    ({"type": "tool-result", "tool_call_id": "c", "tool_name": "t", "is_error": "no"},
     r"'is_error' must be true or false"),
    ({"type": "tool-call", "tool_call_id": "c", "tool_name": "t", "args": [1]},
     r"'args' must be a mapping"),
    ({"type": "text-delta", "text": "a", "metadata": 3}, r"'metadata' must be a mapping"),
    ({"type": "finish", "usage": {"input_tokens": -1}}, r"chunk 'finish': usage input_tokens"),
    ({"type": "finish", "usage": 5}, r"chunk 'finish': usage must be a mapping"),
    ({"type": "suspended", "run_id": "r", "calls": "x"}, r"calls must be a list of mappings"),
    ({"type": "text-delta", "payload": [1]}, r"payload must be a mapping"),
])
def test_bad_dicts_are_refused_naming_what_is_wrong(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Chunk.from_dict(data)


def test_a_non_mapping_is_refused() -> None:
    with pytest.raises(ValueError, match="must be a mapping, got list"):
        Chunk.from_dict([("type", "text-delta")])  # type: ignore[arg-type]


def test_a_tripwire_without_metadata_gets_an_empty_mapping() -> None:
    loaded = Chunk.from_dict({"type": "tripwire", "reason": "no", "metadata": None})
    assert loaded == TripwireChunk("no")


# -- where chunks are stored -----------------------------------------------------------


def test_the_response_cache_codec_round_trips_and_reads_old_entries() -> None:
    stream = [TextDelta("hi "), TextDelta("there"), Finish("stop", Usage(1, 2, 3))]
    entry = encode_chunks(stream)
    assert entry is not None and entry["format"] == 2
    assert decode_chunks(json.loads(json.dumps(entry))) == stream
    old = {"format": 1, "chunks": [
        {"type": "text-delta", "payload": {"text": "hi"}, "data": None, "metadata": None},
        {"type": "finish", "payload": {"finish_reason": "stop", "usage": None}, "data": None,
         "metadata": None}]}
    assert decode_chunks(old) == [TextDelta("hi"), Finish("stop")]
    assert decode_chunks({"format": 1, "chunks": [{"type": "nope", "payload": {}}]}) is None


async def test_an_answer_cached_in_the_old_shape_is_replayed() -> None:
    cache = InMemoryServerCache()
    agent = Agent(id="search", instructions="Answer concisely.", model=ScriptedModel([]),
                  input_processors=[ResponseCache(cache, key=lambda inputs: "fixed")])
    await cache.set("procflow:agent-response:procflow-response-cache:shared:custom:fixed", {
        "format": 1, "chunks": [
            {"type": "text-delta", "payload": {"text": "from "}, "data": None,
             "metadata": None},
            {"type": "text-delta", "payload": {"text": "cache"}, "data": None,
             "metadata": None},
            {"type": "finish", "payload": {"finish_reason": "stop", "usage": {
                "input_tokens": 1, "output_tokens": 2, "total_tokens": 3}},
             "data": None, "metadata": None}]})
    out = await agent.generate("what?")
    assert out.text == "from cache" and out.steps[0].from_cache


def _blocked(ctx: StepContext) -> None:
    ctx.abort("not allowed", metadata={"rule": 7})


async def test_a_stored_run_reloads_with_a_typed_tripwire(tmp_path: Path) -> None:
    wf = create_workflow(id="guarded").then(create_step(id="guard", execute=_blocked)).commit()
    async with SQLiteStorage(tmp_path / "runs.db") as storage:
        result = await wf.create_run(storage=storage).start()
    assert result.tripwire == Tripwire("not allowed", "guard", False, {"rule": 7})
    async with SQLiteStorage(tmp_path / "runs.db") as storage:
        run = await wf.get_run(result.run_id, storage=storage)
    reloaded = run.last_result
    assert reloaded is not None and reloaded.status == "tripwire"
    assert reloaded.tripwire is not None
    assert reloaded.tripwire.reason == "not allowed"
    assert reloaded.tripwire.processor_id == "guard"
    assert reloaded.tripwire.metadata == {"rule": 7}


def test_a_snapshot_stores_the_tripwire_as_a_dict_and_reads_old_dicts() -> None:
    snapshot = RunSnapshot("wf", "run", "tripwire", tripwire=Tripwire("no", "p", True, {"k": 1}))
    document = json.loads(dump_snapshot(snapshot))
    assert document["tripwire"] == {"reason": "no", "processor_id": "p", "retry": True,
                                    "metadata": {"k": 1}}
    loaded = load_snapshot_json(json.dumps(document), workflow_id="wf", run_id="run")
    assert loaded.tripwire == Tripwire("no", "p", True, {"k": 1})
    document["tripwire"] = {"reason": "older", "processor_id": None}  # fewer keys
    loaded = load_snapshot_json(json.dumps(document), workflow_id="wf", run_id="run")
    assert loaded.tripwire == Tripwire("older")


# -- the public surface ----------------------------------------------------------------


def test_the_chunk_types_are_exported() -> None:
    for name in ("Chunk", "TextDelta", "ReasoningDelta", "ToolCallChunk", "ToolResultChunk",
                 "Finish", "ErrorChunk", "TripwireChunk", "DataChunk", "Start", "StepStart",
                 "StepFinish", "SuspendedChunk"):
        assert getattr(procflow, name) is getattr(procflow.messages, name)
        assert name in procflow.__all__ and name in procflow.messages.__all__
    assert procflow.Tripwire is Tripwire


def test_the_typed_chunk_file_runs() -> None:
    api = runpy.run_path(str(Path(__file__).parent / "typing" / "check_chunks.py"))
    assert api["attributes"]() == "hi"
    with pytest.raises(dataclasses.FrozenInstanceError):
        api["mutate"](TextDelta("x"))
    assert api["describe"](TextDelta("x")) == "x"
    assert api["describe"](Finish("stop", Usage(1, 1, 2))) == "finish after 2 tokens"
    assert api["describe"](StepStart()) == "step-start"
