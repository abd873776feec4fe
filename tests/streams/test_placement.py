"""No silent no-ops (issue 11 point 6): a processor whose hooks cannot run where it is
placed is an error at build time naming the processor, the hook and the right place."""

from __future__ import annotations

from typing import Any

import pytest

from procflow.agent import Agent
from procflow.cache import InMemoryServerCache
from procflow.errors import WorkflowDefinitionError
from procflow.models import ScriptedModel
from procflow.processors import Processor, ProcessorStepSchema
from procflow.processors.builtin import ResponseCache
from procflow.workflows import create_workflow


class StreamOnly(Processor):
    id = "stream-only"

    def process_output_stream(self, args: Any) -> Any:
        return args.part


def test_response_cache_in_a_processor_workflow_is_an_error() -> None:
    """Bullet 6: ResponseCache inside a processor workflow no longer does nothing."""
    with pytest.raises(WorkflowDefinitionError) as err:
        create_workflow(id="wf", input_schema=ProcessorStepSchema,
                        output_schema=ProcessorStepSchema).then(
            ResponseCache(cache=InMemoryServerCache()))
    message = str(err.value)
    assert "response-cache" in message and "process_llm_request" in message
    assert "input_processors" in message


def test_output_only_processor_among_inputs_is_an_error() -> None:
    with pytest.raises(WorkflowDefinitionError) as err:
        Agent(id="a", model=ScriptedModel(["x"]), input_processors=[StreamOnly()])
    message = str(err.value)
    assert "stream-only" in message and "process_output_stream" in message
    assert "output_processors" in message


def test_stream_hook_in_error_processors_is_an_error() -> None:
    with pytest.raises(WorkflowDefinitionError, match="output_processors"):
        Agent(id="a", model=ScriptedModel(["x"]), error_processors=[StreamOnly()])


def test_the_right_place_still_works() -> None:
    Agent(id="a", model=ScriptedModel(["x"]), output_processors=[StreamOnly()],
          input_processors=[ResponseCache(cache=InMemoryServerCache())])
