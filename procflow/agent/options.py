"""The options of ``Agent.generate``/``stream``/``resume``, as typed keyword arguments.

``GenerateOptions`` is a ``TypedDict`` the methods take with ``Unpack``: a misspelled or
mistyped option is a type-checker error, and (at run time) a ``TypeError`` naming it and
listing the options.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeAlias, TypedDict

from procflow.context import RequestContext
from procflow.processors.args import ProcessInputStepArgs

__all__ = ["GenerateOptions", "MemoryOption", "ProcessorArray", "ResumeOptions", "ToolChoice",
           "check_options"]

ProcessorArray: TypeAlias = Sequence[Any] | Callable[[RequestContext], Sequence[Any]]
"""Processors (or processor workflows), or a function of the request context returning them."""

ToolChoice: TypeAlias = Literal["auto", "none", "required"] | Mapping[str, Any]
""""auto", "none", "required" or ``{"type": "tool", "tool_name": ...}``."""


class MemoryOption(TypedDict, total=False):
    """``memory=`` of a call: the conversation thread and its owner."""

    thread: str
    resource: str


class ResumeOptions(TypedDict, total=False):
    """What ``resume`` and ``resume_stream`` take besides the run and the decisions (and
    ``generate`` and ``stream`` too: see ``GenerateOptions``).

    Attributes:
        max_steps: Model calls for this request (tool loops); default the agent's.
        request_context: A ``RequestContext`` or a mapping of entries.
        memory: ``{"thread": ..., "resource": ...}`` (needs ``Agent(memory=...)``).
        tool_choice: "auto", "none", "required" or ``{"type": "tool", "tool_name": ...}``.
        prepare_step: A function of ``ProcessInputStepArgs`` run before each model call.
        input_processors: Replace the agent's input processors for this call.
        output_processors: Replace the agent's output processors for this call.
        error_processors: Replace the agent's error processors for this call.
        max_processor_retries: Retries processors may ask for in this call.
        output_retries: Times an answer that is not the ``output_type`` is sent back
            with the errors (default the agent's, 1).
    """

    max_steps: int
    request_context: RequestContext | Mapping[str, Any] | None
    memory: MemoryOption | Mapping[str, Any] | None
    tool_choice: ToolChoice | None
    prepare_step: Callable[[ProcessInputStepArgs], Any] | None
    input_processors: ProcessorArray
    output_processors: ProcessorArray
    error_processors: ProcessorArray
    max_processor_retries: int | None
    output_retries: int


class GenerateOptions(ResumeOptions, total=False):
    """What ``generate``, ``stream``, ``submit`` and ``generate_sync`` take besides the
    messages: every ``ResumeOptions`` entry, and

    Attributes:
        run_id: The id of the call's stored run (default: a fresh random one), such as
            your request's id; a run already stored under it is refused with
            ``RunStateError`` (never replaced).
    """

    run_id: str


_OPTIONS: frozenset[str] = frozenset(GenerateOptions.__annotations__)


def check_options(options: Mapping[str, Any], *, method: str) -> None:
    """Refuse options ``GenerateOptions`` does not name.

    Raises:
        TypeError: ``<method>() got an unexpected option 'name'; options: ...``.
    """
    for name in options:
        if name not in _OPTIONS:
            raise TypeError(f"{method}() got an unexpected option {name!r}; options: "
                            f"{', '.join(sorted(_OPTIONS))}")
