"""``Processor``: the base class of every processor, with no-op hooks."""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from procflow.errors import ProcessorError
from procflow.processors._hooks import HOOKS
from procflow.processors.args import (
    ProcessAPIErrorArgs,
    ProcessInputArgs,
    ProcessInputStepArgs,
    ProcessLLMRequestArgs,
    ProcessLLMResponseArgs,
    ProcessorContext,
    ProcessorViolation,
    ProcessOutputResultArgs,
    ProcessOutputStepArgs,
    ProcessOutputStreamArgs,
    ProcessToolResultArgs,
)

if TYPE_CHECKING:
    from procflow.tools import Tool

__all__ = ["ASYNC_HOOKS", "HOOKS", "Processor"]

logger = logging.getLogger("procflow.processors")

_WORD_TAIL = re.compile(r"\S*\Z")
ASYNC_HOOKS: dict[tuple[type, str], bool] = {}
"""(processor class, hook) -> whether the hook is a coroutine function: the cache
``Processor.hook_is_async`` fills, readable directly on the hot path."""


class Processor:
    """Base class of processors: override any hooks (sync or async); the rest do nothing.

    Example::

        class Lowercase(Processor):
            id = "lowercase"

            async def process_input(self, args: ProcessInputArgs):
                return [m.with_text(m.text.lower()) for m in args.messages]

    Attributes:
        id: Unique within an array; keys the processor's state and its step id
            (``processor:<id>``).
        name: Display name (defaults to the id).
        description: Free text.
        process_data_parts: Let ``process_output_stream`` see custom "data-*" chunks
            (the model's and those tools send with ``writer.custom()``); the hook may
            edit them or drop them (return ``None``).
        stream_window: ``process_output_stream`` sees text in a window spanning chunk
            boundaries: the stream keeps back the tail that ``hold_back`` names, gives
            the hook the rest as one text delta (with ``args.text_before`` /
            ``args.text_after`` as context) and flushes what is held before any other
            chunk and at the end of every model call. Set it on a processor that
            rewrites text, so a value split across deltas is still found.
        on_violation: Called with a ``ProcessorViolation`` on every abort and warning;
            errors it raises are logged and swallowed.
    """

    id: str = ""
    name: str | None = None
    description: str | None = None
    process_data_parts: bool = False
    stream_window: bool = False
    stream_window_limit: int = 4096
    """Held text is released anyway past this many characters (a window cannot grow
    without bound); only a value longer than this can then be split."""
    on_violation: Callable[[ProcessorViolation], Any] | None = None

    step_adapter: ClassVar[Callable[[Processor], Any] | None] = None
    """Makes a processor a workflow step (``processors.step`` sets ``ProcessorStep``)."""

    _hooks_cache: ClassVar[dict[type, frozenset[str]]] = {}

    # -- hooks (no-ops; returning None leaves everything unchanged) ---------------

    def process_input(self, args: ProcessInputArgs) -> Any:
        """Once, before the agent loop. Return messages to replace the input ones, a
        ``ProcessInputResult``, the (same) ``MessageList``, or ``None``."""
        return None

    def process_input_step(self, args: ProcessInputStepArgs) -> Any:
        """Before every model call. Return a ``ProcessInputStepResult`` to override the
        step's model/tools/tool choice/system messages, messages, or ``None``."""
        return None

    def process_llm_request(self, args: ProcessLLMRequestArgs) -> Any:
        """Just before the provider call. Return a ``ProcessLLMRequestResult`` (or a
        prompt list) to rewrite this call's prompt or answer from cached chunks."""
        return None

    def process_llm_response(self, args: ProcessLLMResponseArgs) -> Any:
        """After the call's chunks are collected (``args.from_cache`` on a replay)."""
        return None

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        """For each streamed chunk. Return the chunk to emit (possibly changed), or
        ``None`` to drop it. (Only overridden hooks run, so the default never drops.)"""
        return args.part

    def process_output_step(self, args: ProcessOutputStepArgs) -> Any:
        """After each model step, before tools. Abort with ``retry=True`` to ask again.

        Return a list of messages to replace the step's messages, or ``None`` / an
        empty list for no change: an empty list never erases the answer (the seed's
        validators ``return []``). To remove messages, call
        ``args.message_list.remove_by_ids(...)``.
        """
        return None

    def process_output_result(self, args: ProcessOutputResultArgs) -> Any:
        """Once, at the end. Return messages to replace the response ones, or ``None``."""
        return None

    def process_tool_result(self, args: ProcessToolResultArgs) -> Any:
        """After a tool succeeded. Return ``ProcessToolResultResult(result)`` to replace
        its result, or ``None``."""
        return None

    def process_api_error(self, args: ProcessAPIErrorArgs) -> Any:
        """When the provider rejects a call. Return ``APIErrorResult(retry=True)`` to retry
        (after fixing ``args.message_list`` if needed)."""
        return None

    # -- helpers ---------------------------------------------------------------------

    def offered_tools(self) -> Sequence[Tool]:
        """The tools this processor may add to a step (``process_input_step`` returning
        ``tools=``), for drawing: ``procflow graph`` shows them under the agent's tool
        step. Override it when the processor adds tools; the default is none."""
        return ()

    def hold_back(self, text: str) -> int:
        """With ``stream_window``: how many trailing characters of the held ``text``
        could still be the start of a match, and must wait for more text.

        The default holds back the word in progress (the trailing run of non-space
        characters). Override it for values that span spaces; return 0 to release all.
        """
        m = _WORD_TAIL.search(text)
        return 0 if m is None else m.end() - m.start()

    def implemented_hooks(self) -> frozenset[str]:
        """The hooks this processor's class overrides."""
        cls = type(self)
        cached = Processor._hooks_cache.get(cls)
        if cached is None:
            cached = frozenset(h for h in HOOKS if getattr(cls, h) is not getattr(Processor, h))
            Processor._hooks_cache[cls] = cached
        return cached

    def hook_is_async(self, hook: str) -> bool:
        """Whether this processor's ``hook`` is a coroutine function (cached per class)."""
        key = (type(self), hook)
        cached = ASYNC_HOOKS.get(key)
        if cached is None:
            cached = inspect.iscoroutinefunction(getattr(type(self), hook, None))
            if "process_" in hook and hook in vars(self):  # a hook set on the instance
                return inspect.iscoroutinefunction(getattr(self, hook))
            ASYNC_HOOKS[key] = cached
        return cached

    def report_violation(self, violation: ProcessorViolation,
                         context: ProcessorContext | None = None) -> None:
        """Record a violation and call ``on_violation`` (its errors are logged, not raised)."""
        if context is not None:
            context.violations.append(violation)
        callback = self.on_violation
        if callback is None:
            return
        try:
            out = callback(violation)
            if inspect.iscoroutine(out):
                out.close()
                logger.warning("on_violation of processor %r is async; it must be a plain "
                               "function (it was not awaited)", self.id)
        except Exception:
            logger.exception("on_violation of processor %r raised; ignored", self.id)

    def as_step(self) -> Any:
        """This processor as a workflow step (a ``ProcessorStep``, id ``processor:<id>``)."""
        adapter = Processor.step_adapter
        if adapter is None:  # pragma: no cover - procflow.processors imports the adapter
            raise ProcessorError("procflow.processors.step is not loaded")
        return adapter(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r})"
