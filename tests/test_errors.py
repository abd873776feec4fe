"""TripwireError's one conversion to and from the dict that traces, results and chunks carry."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from procflow.errors import TripwireError


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    # named, not a lambda: see tests/processors/test_response_cache.py (json_values)
    return st.lists(inner) | st.dictionaries(st.text(), inner)


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(), _containers,
                     max_leaves=10)


@given(reason=st.text(), retry=st.booleans(), processor_id=st.none() | st.text(),
       metadata=st.dictionaries(st.text(), _json))
def test_to_dict_round_trips(reason: str, retry: bool, processor_id: str | None,
                             metadata: dict[str, Any]) -> None:
    trip = TripwireError(reason, retry=retry, metadata=metadata, processor_id=processor_id)

    data = trip.to_dict()
    again = TripwireError.from_dict(data)

    assert data == {"reason": reason, "processor_id": processor_id, "retry": retry,
                    "metadata": metadata}
    assert again.to_dict() == data


def test_to_dict_copies_the_metadata() -> None:
    trip = TripwireError("no", metadata={"k": 1})

    trip.to_dict()["metadata"]["k"] = 2

    assert trip.metadata == {"k": 1}


def test_the_old_name_is_a_deprecated_alias_that_still_catches() -> None:
    import procflow
    from procflow import errors

    with pytest.warns(DeprecationWarning, match="use TripwireError"):
        old = procflow.TripWire
    with pytest.warns(DeprecationWarning, match="procflow.errors.TripWire is deprecated"):
        assert errors.TripWire is old
    with pytest.raises(old):
        raise TripwireError("blocked")
    assert "TripWire" not in procflow.__all__ and "TripWire" not in dir(errors)


def test_the_record_and_the_exception_are_distinct() -> None:
    from procflow import Tripwire

    trip = TripwireError("no", processor_id="p")
    assert not issubclass(Tripwire, BaseException)
    assert Tripwire.from_dict(trip.to_dict()) == Tripwire("no", "p")
