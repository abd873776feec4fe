"""What the offline models share: ``ToolCall``, ``ModelResponse``, and streaming an answer
as a provider would (text word by word, then tool calls, then "finish")."""

from __future__ import annotations

import copy
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from procflow.messages import Chunk, Finish, ReasoningDelta, TextDelta, ToolCallChunk
from procflow.models.base import ModelRequest
from procflow.records import Usage

__all__ = ["ModelResponse", "ToolCall", "assistant_turns", "stream_response"]

_WORD = re.compile(r"\S+\s*")
_LEADING_SPACE = re.compile(r"\s*")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call an offline model's answer makes.

    Attributes:
        name: The tool to call.
        args: Its arguments (each call gets a deep copy).
        id: The call's id; ``call_<n>`` when ``None``, counting the tool calls of the
            conversation (the ones already in the prompt, then this answer's) from 1.
    """

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """A whole answer of an offline model, for a ``FunctionModel`` that wants more than
    text or tool calls.

    Attributes:
        text: The answer's text (streamed one word per "text-delta").
        tool_calls: The tools it calls (streamed after the text).
        reasoning: Reasoning text, streamed first as "reasoning-delta" chunks.
        finish_reason: Why it stopped; ``None`` means "tool-calls" when it calls
            tools, else "stop".
        usage: The tokens it used; ``None`` counts one token a word (input: the
            prompt's words; output: the text's).
    """

    text: str = ""
    tool_calls: Sequence[ToolCall] = ()
    reasoning: str = ""
    finish_reason: str | None = None
    usage: Usage | None = None


def words(text: str) -> list[str]:
    """``text`` as words, each with its following whitespace (leading space goes first)."""
    found = _WORD.findall(text)
    lead = _LEADING_SPACE.match(text)
    leading = lead.group() if lead else ""
    if leading and found:
        found[0] = leading + found[0]
    elif leading:
        found = [leading]
    return found


def prompt_words(prompt: Sequence[Mapping[str, Any]]) -> int:
    """How many words the text of ``prompt`` holds."""
    count = 0
    for entry in prompt:
        content = entry.get("content")
        if isinstance(content, str):
            count += len(content.split())
            continue
        for part in content or []:
            if isinstance(part, Mapping) and part.get("type") == "text":
                count += len(str(part.get("text", "")).split())
    return count


def assistant_turns(prompt: Sequence[Mapping[str, Any]]) -> int:
    """How many assistant messages ``prompt`` holds: the model turns already taken.

    An assistant message that calls tools is a turn; tool results are not.
    """
    return sum(1 for entry in prompt if entry.get("role") == "assistant")


def _tool_calls_made(prompt: Sequence[Mapping[str, Any]]) -> int:
    count = 0
    for entry in prompt:
        content = entry.get("content")
        if entry.get("role") != "assistant" or isinstance(content, str):
            continue
        count += sum(1 for part in content or []
                     if isinstance(part, Mapping) and part.get("type") == "tool-call")
    return count


async def stream_response(response: ModelResponse, request: ModelRequest, *,
                          usage_per_word: int = 1) -> AsyncIterator[Chunk]:
    """Stream ``response`` as a provider would: reasoning and text one word per delta,
    then tool calls, then one "finish" chunk.

    Args:
        response: The answer.
        request: The request it answers (its prompt numbers the calls and counts the
            input tokens).
        usage_per_word: Tokens a word counts for, when ``response.usage`` is ``None``.
    """
    for word in words(response.reasoning) if response.reasoning else ():
        yield ReasoningDelta(word)
    for word in words(response.text) if response.text else ():
        yield TextDelta(word)
    made = _tool_calls_made(request.prompt) if response.tool_calls else 0
    for number, call in enumerate(response.tool_calls, start=made + 1):
        yield ToolCallChunk(call.id or f"call_{number}", call.name, copy.deepcopy(call.args))
    usage = response.usage
    if usage is None:
        input_tokens = prompt_words(request.prompt) * usage_per_word
        output_tokens = len(response.text.split()) * usage_per_word
        usage = Usage(input_tokens, output_tokens, input_tokens + output_tokens)
    reason = response.finish_reason or ("tool-calls" if response.tool_calls else "stop")
    yield Finish(reason, usage)
