"""``ToolCallFilter``: keep tool calls and their results out of what the model sees.

On ``process_input`` it strips tool traffic from the prior history (every
non-"response" message of the request's message list: input, memory, context).
Only the request's list is edited, so stored memory keeps every call. With
``filter_after_tool_steps=n`` it also filters inside the agent loop, before each
model call, keeping the calls and results of the ``n`` most recent tool steps.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from procflow.messages import (
    Message,
    MessageList,
    Part,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from procflow.processors.args import ProcessInputArgs, ProcessInputStepArgs
from procflow.processors.base import Processor

__all__ = ["ToolCallFilter"]


def _record(call: ToolCallPart, result: ToolResultPart) -> TextPart:
    """A compact text record of a completed call: the model-facing output only."""
    output = result.model_output
    if isinstance(output, dict) and output.get("type") in ("text", "json") and "value" in output:
        output = output["value"]
    shown = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False,
                                                             default=str)
    verb = "failed" if result.is_error else "returned"
    return TextPart(text=f"[Tool {call.tool_name} {verb}: {shown}]")


class ToolCallFilter(Processor):
    """Removes tool calls and their results from the messages sent to the model.

    Args:
        exclude: Only filter these tools (by name); ``None`` (default) filters every
            tool, an empty list none.
        filter_after_tool_steps: Also filter inside the agent loop (before each model
            call), keeping the tool calls and results of this many most recent tool
            steps (an int >= 1). A tool step is one assistant message carrying tool
            calls. ``None`` (default): only the prior history is filtered.
        preserve_model_output: Instead of removing a completed call entirely, put a
            compact text record of its result's ``model_output`` where the call was
            (raw arguments and raw result are dropped). Results without a
            ``model_output`` are removed as usual.

    Raises:
        ValueError: A setting is invalid.

    Messages left with no part are removed. A tool call and its results are always
    removed together.
    """

    id = "tool-call-filter"

    def __init__(self, *, exclude: Sequence[str] | None = None,
                 filter_after_tool_steps: int | None = None,
                 preserve_model_output: bool = False) -> None:
        if exclude is not None and (isinstance(exclude, str)
                                    or not all(isinstance(n, str) for n in exclude)):
            raise ValueError(f"ToolCallFilter: exclude must be a list of tool names (e.g. "
                             f"exclude=['search']), got {exclude!r}")
        if filter_after_tool_steps is not None and (
                isinstance(filter_after_tool_steps, bool)
                or not isinstance(filter_after_tool_steps, int) or filter_after_tool_steps < 1):
            raise ValueError("ToolCallFilter: filter_after_tool_steps must be an int >= 1 (the "
                             "model must see its latest tool results) or None, got "
                             f"{filter_after_tool_steps!r}")
        self.exclude: frozenset[str] | None = None if exclude is None else frozenset(exclude)
        self.filter_after_tool_steps = filter_after_tool_steps
        self.preserve_model_output = bool(preserve_model_output)

    def _matches(self, tool_name: str) -> bool:
        return self.exclude is None or tool_name in self.exclude

    def _targets(self, messages: Iterable[Message]) -> set[str]:
        return {p.tool_call_id for m in messages for p in m.content.parts
                if isinstance(p, ToolCallPart | ToolResultPart) and self._matches(p.tool_name)}

    def filter_messages(self, messages: Sequence[Message],
                        call_ids: set[str] | None = None) -> list[Message | None]:
        """Strip tool traffic from ``messages`` (pure: the messages are not changed).

        Args:
            messages: The messages, in order.
            call_ids: The tool-call ids to remove; default every call of a filtered tool.

        Returns:
            One entry per message: itself when untouched, a copy without the filtered
            parts, or ``None`` when nothing is left of it.
        """
        targets = self._targets(messages) if call_ids is None else call_ids
        if not targets:
            return list(messages)
        results: dict[str, ToolResultPart] = {}
        if self.preserve_model_output:
            results = {p.tool_call_id: p for m in messages for p in m.content.parts
                       if isinstance(p, ToolResultPart) and p.tool_call_id in targets
                       and p.model_output is not None}
        out: list[Message | None] = []
        for msg in messages:
            parts: list[Part] = []
            for p in msg.content.parts:
                if isinstance(p, ToolCallPart | ToolResultPart) and p.tool_call_id in targets:
                    if isinstance(p, ToolCallPart) and p.tool_call_id in results:
                        parts.append(_record(p, results[p.tool_call_id]))
                else:
                    parts.append(p)
            if len(parts) == len(msg.content.parts) and all(
                    a is b for a, b in zip(parts, msg.content.parts, strict=True)):
                out.append(msg)
            elif parts:
                content = msg.content.model_copy(update={"parts": parts})
                out.append(msg.model_copy(update={"content": content}))
            else:
                out.append(None)
        return out

    @staticmethod
    def _apply(ml: MessageList, old: Sequence[Message], new: Sequence[Message | None]) -> None:
        ml.remove_by_ids([o.id for o, n in zip(old, new, strict=True) if n is None])
        for o, n in zip(old, new, strict=True):
            if n is not None and n is not o:
                ml.replace(o.id, n)

    def process_input(self, args: ProcessInputArgs) -> list[Message] | None:
        """Strip tool traffic from the prior history (all non-"response" messages)."""
        ml = args.message_list
        if ml is None:
            return [m for m in self.filter_messages(args.messages) if m is not None]
        history = [m for m in ml.all() if ml.source_of(m.id) != "response"]
        self._apply(ml, history, self.filter_messages(history))
        return None

    def process_input_step(self, args: ProcessInputStepArgs) -> list[Message] | None:
        """With ``filter_after_tool_steps``, strip tool traffic of all but the most recent
        tool steps before each model call."""
        keep_steps = self.filter_after_tool_steps
        if keep_steps is None:
            return None
        messages = args.messages
        steps = [m for m in messages if m.role == "assistant"
                 and any(self._matches(p.tool_name) for p in m.tool_calls)]
        kept = self._targets(steps[-keep_steps:])
        targets = self._targets(messages) - kept
        if not targets:
            return None
        filtered = self.filter_messages(messages, targets)
        if args.message_list is None:
            return [m for m in filtered if m is not None]
        self._apply(args.message_list, messages, filtered)
        return None

    def __repr__(self) -> str:
        shown: Any = sorted(self.exclude) if self.exclude is not None else "all"
        return (f"ToolCallFilter(exclude={shown!r}, "
                f"filter_after_tool_steps={self.filter_after_tool_steps!r}, "
                f"preserve_model_output={self.preserve_model_output!r})")
