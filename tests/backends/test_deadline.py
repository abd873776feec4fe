"""Shielded cleanup has a deadline of its own (issue 42): it survives the caller's
cancellation, but a cleanup stuck on a frozen server is given up with a logged
``StorageError`` instead of blocking forever."""

from __future__ import annotations

import logging

import anyio
import anyio.lowlevel
import pytest

from procflow._backends.deadline import shielded
from procflow.errors import StorageError


async def test_a_stuck_cleanup_is_given_up_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    reached_end = False
    with caplog.at_level(logging.WARNING, logger="procflow"):
        with shielded("saving the trace of run 'r1'", timeout=0.05) as scope:
            await anyio.sleep_forever()
        reached_end = True

    assert reached_end and scope.cancelled_caught
    (record,) = [r for r in caplog.records if "given up" in r.getMessage()]
    assert "saving the trace of run 'r1'" in record.getMessage()
    assert record.exc_info is not None and isinstance(record.exc_info[1], StorageError)


async def test_the_callers_cancellation_waits_for_the_cleanup_within_its_deadline() -> None:
    done: list[str] = []
    with pytest.raises(TimeoutError):
        with anyio.fail_after(0.01):  # the caller's deadline passes during the cleanup
            try:
                await anyio.sleep_forever()
            finally:
                with shielded("releasing a lease", timeout=5):
                    await anyio.sleep(0.1)  # a cleanup that finishes, shielded
                    done.append("released")
                with shielded("saving a status", timeout=0.05):
                    await anyio.sleep_forever()  # one that never would
                done.append("after")

    assert done == ["released", "after"]


async def test_a_quick_cleanup_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="procflow"), \
            shielded("closing", timeout=1) as scope:
        await anyio.lowlevel.checkpoint()

    assert not scope.cancelled_caught and not caplog.records
