"""The hook table is the one place hook rules live: it covers every hook, in order."""

from __future__ import annotations

import inspect
from typing import get_args

from procflow.processors import Processor, ProcessorArgs
from procflow.processors._hooks import HOOKS, PHASES, TABLE
from procflow.processors.step import Phase


def test_every_processor_hook_has_one_row_in_run_order() -> None:
    methods = [n for n, v in vars(Processor).items()
               if n.startswith("process_") and inspect.isfunction(v)]
    assert list(HOOKS) == methods == list(TABLE)


def test_envelope_phases_are_the_table_phases() -> None:
    assert set(get_args(Phase)) == set(PHASES)
    assert [h.name for h in TABLE.values() if h.stream] == ["process_output_stream"]


def test_rows_are_consistent() -> None:
    for hook in TABLE.values():
        assert issubclass(hook.args, ProcessorArgs), hook.name
        assert hook.label.endswith("processor"), hook.name
        assert set(hook.env_out) <= {"model", "tools", "tool_choice", "result"}, hook.name
        if hook.phase is None:
            assert not hook.env_in and not hook.required, hook.name


def test_a_processor_becomes_a_step_through_the_adapter() -> None:
    from procflow.processors import ProcessorStep

    class Upper(Processor):
        id = "upper"

    made = Upper().as_step()
    assert isinstance(made, ProcessorStep) and made.id == "processor:upper"
