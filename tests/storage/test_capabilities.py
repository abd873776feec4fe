"""What the runtime asks of a storage beyond its methods is declared on ``Storage``
(``persistent``, ``keeps_objects``, ``process_local``) with a default, and every
backend states its own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from procflow import create_step, create_workflow
from procflow.records import RunSnapshot, StepResult
from procflow.storage import (
    InMemoryStorage,
    NullStorage,
    PostgresStorage,
    RedisStorage,
    SQLiteStorage,
    Storage,
)

CAPABILITIES = ("persistent", "keeps_objects", "process_local")


@pytest.mark.parametrize(("backend", "declared"), [
    pytest.param(InMemoryStorage, (True, True, True), id="memory"),
    pytest.param(NullStorage, (False, False, False), id="null"),
    pytest.param(SQLiteStorage, (True, False, False), id="sqlite"),
    pytest.param(RedisStorage, (True, False, False), id="redis"),
    pytest.param(PostgresStorage, (True, False, False), id="postgres"),
])
def test_each_backend_declares_its_capabilities(backend: type[Storage],
                                                declared: tuple[bool, ...]) -> None:
    assert Storage in backend.__mro__  # a subclass: it inherits the defaults
    assert all(name in vars(backend) for name in CAPABILITIES)
    assert tuple(getattr(backend, name) for name in CAPABILITIES) == declared


def test_the_protocol_gives_defaults() -> None:
    assert (Storage.persistent, Storage.keeps_objects, Storage.process_local) == (
        True, False, False)


class Counting(NullStorage):
    """Stores nothing, counts the snapshots the runtime hands it."""

    def __init__(self) -> None:
        self.saves = 0

    async def save_snapshot(self, snapshot: RunSnapshot,
                            steps: Mapping[str, StepResult]) -> None:
        self.saves += 1


class CountingPersistent(Counting):
    persistent = True


async def _saves(storage: Counting) -> int:
    async def one(ctx: Any) -> int:
        return 1

    wf = create_workflow(id="caps", storage=storage).then(create_step(id="one", execute=one))
    result = await wf.commit().create_run().start(input_data=None)
    assert result.status == "success"
    return storage.saves


async def test_the_runtime_reads_the_declared_capability() -> None:
    assert await _saves(Counting()) == 0  # persistent = False: no snapshot is built
    assert await _saves(CountingPersistent()) > 0
