"""Values crossing a step boundary are stored losslessly by every backend, or refused at
the step that produced them (``procflow.storage.values``)."""

from __future__ import annotations

import enum
import math
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from procflow import StepContext, StepValidationError, create_step, create_workflow
from procflow.records import RunSnapshot, StepResult
from procflow.storage import SQLiteStorage, Storage
from procflow.storage.values import (
    MAX_DEPTH,
    UnstorableValueError,
    decode_value,
    encode_value,
    register_type,
)

pytest_plugins = ["tests.storage.test_contract"]


class Money:
    def __init__(self, cents: int) -> None:
        self.cents = cents

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Money) and other.cents == self.cents

    def __hash__(self) -> int:
        return hash(self.cents)


class Price(BaseModel):
    amount: Decimal
    tags: frozenset[str] = frozenset()
    raw: bytes = b""


class Colour(enum.Enum):
    RED = "red"
    BLUE = 2


register_type(Money, lambda m: m.cents, Money, name="tests.Money")

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(),
    st.binary(), st.datetimes(), st.datetimes(timezones=st.just(UTC)), st.dates(),
    st.times(), st.timedeltas(), st.decimals(allow_nan=False), st.uuids(),
    st.sampled_from([math.inf, -math.inf]), st.builds(Money, st.integers()),
    st.sampled_from(list(Colour)),
    st.builds(Price, amount=st.decimals(allow_nan=False, allow_infinity=False)),
)
hashable = st.one_of(st.integers(), st.text(), st.tuples(st.integers(), st.text()),
                     st.frozensets(st.integers(), max_size=3))
def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    # named, not a lambda: see tests/processors/test_response_cache.py (json_values)
    return st.one_of(
        st.lists(inner, max_size=4), st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=5), inner, max_size=4),
        st.dictionaries(hashable, inner, max_size=3),
        st.sets(hashable, max_size=4), st.frozensets(st.integers(), max_size=4))


values = st.recursive(scalars, _containers, max_leaves=12)


def same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (nan equals nan)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


@given(value=values)
def test_the_codec_round_trips_every_supported_value(value: Any) -> None:
    assert same(decode_value(encode_value(value)), value)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=values, nan=st.booleans())
async def test_values_round_trip_through_every_backend(storage: Storage, value: Any,
                                                       nan: bool) -> None:
    if nan:
        value = [value, math.nan]
    snapshot = RunSnapshot("wf", "r", "running", input=value, state={"v": value},
                           created_at=1.0, updated_at=2.0)
    step = StepResult("success", output=value, partial={1: value}, resume_data=value)
    await storage.save_snapshot(snapshot, {"s": step})
    loaded = await storage.load_snapshot("wf", "r")
    assert loaded is not None
    stored, steps = loaded
    assert same(stored.input, value) and same(stored.state, {"v": value})
    assert same(steps["s"].output, value) and same(steps["s"].partial, {1: value})
    assert same(steps["s"].resume_data, value)


def test_refusals_name_the_path_and_the_type() -> None:
    with pytest.raises(UnstorableValueError) as refused:
        encode_value({"items": [1, 2, 3, {"price": object()}]})
    assert (refused.value.where("output"), refused.value.type_name) == (
        "output.items[3].price", "object")


def test_nesting_deeper_than_the_limit_is_refused() -> None:
    deep: Any = "x"
    for _ in range(MAX_DEPTH):
        deep = [deep]
    assert decode_value(encode_value(deep)) == deep
    with pytest.raises(UnstorableValueError, match="deeper"):
        encode_value([deep])


async def test_a_step_returning_an_unstorable_value_fails_at_that_step(
        tmp_path: Path) -> None:
    ran: list[str] = []

    def priced(ctx: StepContext) -> Any:
        return {"items": [{"price": 1}, {"price": 2}, {"price": 3}, {"price": object()}]}

    def after(ctx: StepContext) -> Any:
        ran.append("after")
        return ctx.input_data

    async with SQLiteStorage(tmp_path / "r.db") as storage:
        wf = create_workflow(id="shop", storage=storage).then(
            create_step(id="price", execute=priced)).then(
            create_step(id="after", execute=after)).commit()
        result = await wf.create_run("r1").start()
        assert result.status == "failed" and ran == []
        error = result.error
        assert isinstance(error, StepValidationError)
        assert error.step_id == "price" and error.field == "output.items[3].price"
        assert "object" in str(error) and "'price'" in str(error)
        loaded = await storage.load_snapshot("shop", "r1")
        assert loaded is not None and loaded[1]["price"].status == "failed"


async def test_input_nested_too_deep_is_refused_at_start(tmp_path: Path) -> None:
    deep: Any = 1
    for _ in range(1000):
        deep = [deep]
    async with SQLiteStorage(tmp_path / "r.db") as storage:
        wf = create_workflow(id="w", storage=storage).then(
            create_step(id="s", execute=lambda ctx: ctx.input_data)).commit()
        result = await wf.create_run("deep").start(input_data=deep)
        assert result.status == "failed"
        assert isinstance(result.error, StepValidationError)
        assert result.error.field.startswith("input[0]")
        run = await wf.get_run("deep", storage=storage)  # loadable: no bare KeyError
        assert run.status == "failed"


async def test_values_keep_their_types_across_a_restart(tmp_path: Path) -> None:
    crash = {"yes": True}
    value = {"money": Money(1234), "raw": b"\xff\x00", "nan": math.nan, "set": {1, 2},
             "when": datetime(2024, 1, 2, 3, 4, tzinfo=UTC), "day": date(2024, 1, 2),
             "at": time(3, 4), "span": timedelta(seconds=3), "id": UUID(int=7),
             "colour": Colour.BLUE, "pair": (1, "a"), "price": Price(amount=Decimal("1.5"))}

    def make(ctx: StepContext) -> Any:
        return value

    def check(ctx: StepContext) -> Any:
        if crash["yes"]:
            raise RuntimeError("crash")
        return ctx.input_data

    async with SQLiteStorage(tmp_path / "r.db") as storage:
        wf = create_workflow(id="w", storage=storage).then(
            create_step(id="make", execute=make)).then(
            create_step(id="check", execute=check)).commit()
        assert (await wf.create_run("r").start()).status == "failed"
    crash["yes"] = False
    async with SQLiteStorage(tmp_path / "r.db") as storage:
        run = await wf.get_run("r", storage=storage)
        result = await run.restart()
    assert result.status == "success"
    assert same(result.result, value)
