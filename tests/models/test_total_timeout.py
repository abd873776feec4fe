"""A provider call has an overall deadline as well as its idle limit (issue 42): a
stream whose events keep trickling in never ends the call on the idle limit alone."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from procflow.errors import APICallError
from procflow.models.http import DEFAULT_TOTAL_TIMEOUT, post_event_stream


async def _events(server: Any, total_timeout: float | None) -> list[str]:
    async with httpx.AsyncClient() as client:
        stream = post_event_stream(client, f"{server.url}/v1/stream", provider="Test",
                                   headers={}, payload={}, secrets=[], request_timeout=5.0,
                                   total_timeout=total_timeout)
        return [event.data async for event in stream]


async def test_a_trickling_stream_is_given_up_at_the_overall_deadline(server: Any) -> None:
    server.sse([f"data: {i}\n\n" for i in range(400)], delay=0.02)  # 8 s of events

    with pytest.raises(APICallError, match="total_timeout") as caught:
        await _events(server, total_timeout=0.3)

    assert caught.value.is_retryable


async def test_a_stream_within_the_deadline_is_read_whole(server: Any) -> None:
    server.sse([f"data: {i}\n\n" for i in range(5)])

    assert await _events(server, total_timeout=DEFAULT_TOTAL_TIMEOUT) == ["0", "1", "2", "3",
                                                                          "4"]
