from __future__ import annotations

import math

import pytest

from procflow.context import RESOURCE_ID_KEY, THREAD_ID_KEY, RequestContext


def test_constructor_merges_mapping_and_keywords() -> None:
    ctx = RequestContext({"a": 1, "b": 2}, b=3)
    assert ctx.to_dict() == {"a": 1, "b": 3} and len(ctx) == 2


def test_get_set_has_delete() -> None:
    ctx = RequestContext()
    ctx.set("limit", 4000)
    assert ctx.get("limit") == 4000 and ctx["limit"] == 4000 and ctx.has("limit")
    assert ctx.get("missing", "default") == "default"
    assert ctx.delete("limit") is True and ctx.delete("limit") is False
    assert not ctx.has("limit")


def test_behaves_as_a_mutable_mapping() -> None:
    ctx = RequestContext(a=1)
    ctx["b"] = 2
    del ctx["a"]
    assert list(ctx) == ["b"] and "b" in ctx and ctx == {"b": 2}
    with pytest.raises(KeyError):
        ctx["a"]


def test_rejects_non_str_keys() -> None:
    with pytest.raises(TypeError, match="keys must be str"):
        RequestContext({1: "x"})  # type: ignore[dict-item]


def test_to_dict_and_copy_are_independent() -> None:
    ctx = RequestContext(a=1)
    snapshot, clone = ctx.to_dict(), ctx.copy()
    snapshot["a"] = 2
    clone["b"] = 3
    assert ctx.to_dict() == {"a": 1}


def test_json_safe_drops_values_json_cannot_hold() -> None:
    ctx = RequestContext(n=1, s="x", nested={"l": [1, None]}, fn=print, obj=object(),
                         nan=math.nan)
    assert ctx.json_safe() == {"n": 1, "s": "x", "nested": {"l": [1, None]}}


def test_resource_and_thread_id_properties() -> None:
    ctx = RequestContext({RESOURCE_ID_KEY: "user-1"})
    assert ctx.resource_id == "user-1" and ctx.thread_id is None
    ctx.thread_id = "t-1"
    assert ctx[THREAD_ID_KEY] == "t-1"
    ctx.thread_id = None
    assert THREAD_ID_KEY not in ctx


def test_non_str_resource_id_is_an_error_not_a_silent_none() -> None:
    ctx = RequestContext({RESOURCE_ID_KEY: 42})
    with pytest.raises(TypeError, match=RESOURCE_ID_KEY):
        _ = ctx.resource_id


def test_only_marked_entries_and_the_ids_persist() -> None:
    ctx = RequestContext(api_key="sk-secret", nan=math.nan)
    ctx.set("plan", "pro", persist=True)
    ctx.set("broken", object(), persist=True)
    ctx.resource_id, ctx.thread_id = "user-1", "t-1"

    assert ctx.persisted() == {"plan": "pro", RESOURCE_ID_KEY: "user-1", THREAD_ID_KEY: "t-1"}
    assert ctx.persisted_keys == {"plan", "broken"}


def test_persistence_marks_travel_with_copies_and_stop_at_delete() -> None:
    ctx = RequestContext()
    ctx.set("plan", "pro", persist=True)
    merged = RequestContext(token="x")
    merged.update(ctx)

    assert ctx.copy().persisted() == {"plan": "pro"} == RequestContext(ctx).persisted()
    assert merged.persisted() == {"plan": "pro"}
    ctx.delete("plan")
    ctx["plan"] = "free"
    assert ctx.persisted() == {}
    assert RequestContext.restored({"plan": "pro"}).persisted() == {"plan": "pro"}
