"""TripWire's one conversion to and from the dict that traces, results and chunks carry."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from procflow.errors import TripWire


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    # named, not a lambda: see tests/processors/test_response_cache.py (json_values)
    return st.lists(inner) | st.dictionaries(st.text(), inner)


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(), _containers,
                     max_leaves=10)


@given(reason=st.text(), retry=st.booleans(), processor_id=st.none() | st.text(),
       metadata=st.dictionaries(st.text(), _json))
def test_to_dict_round_trips(reason: str, retry: bool, processor_id: str | None,
                             metadata: dict[str, Any]) -> None:
    trip = TripWire(reason, retry=retry, metadata=metadata, processor_id=processor_id)

    data = trip.to_dict()
    again = TripWire.from_dict(data)

    assert data == {"reason": reason, "processor_id": processor_id, "retry": retry,
                    "metadata": metadata}
    assert again.to_dict() == data


def test_to_dict_copies_the_metadata() -> None:
    trip = TripWire("no", metadata={"k": 1})

    trip.to_dict()["metadata"]["k"] = 2

    assert trip.metadata == {"k": 1}
