"""``ScriptedModel``: a model that replays scripted turns offline, for tests and examples."""

from __future__ import annotations

import copy
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias, final

from procflow.errors import APICallError
from procflow.messages import Chunk, Finish, TextDelta, ToolCallChunk
from procflow.models.base import ModelRequest
from procflow.records import Usage

__all__ = ["ScriptedModel", "ToolCall", "Turn"]

_WORD = re.compile(r"\S+\s*")
_LEADING_SPACE = re.compile(r"\s*")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call a ``ScriptedModel`` turn makes.

    Attributes:
        name: The tool to call.
        args: Its arguments (each call gets a deep copy).
        id: The call's id; ``call_<n>`` (counting the model's calls from 1) when ``None``.
    """

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


Turn: TypeAlias = str | Sequence[ToolCall] | Exception
"""One scripted answer: a text reply, a list of tool calls, or an exception to raise."""


def _words(text: str) -> list[str]:
    """``text`` as words, each with its following whitespace (leading space goes first)."""
    words = _WORD.findall(text)
    lead = _LEADING_SPACE.match(text)
    leading = lead.group() if lead else ""
    if leading and words:
        words[0] = leading + words[0]
    elif leading:
        words = [leading]
    return words


def _prompt_words(prompt: Sequence[Mapping[str, Any]]) -> int:
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


def _check_turn(index: int, turn: object) -> Turn:
    if isinstance(turn, str | Exception):
        return turn
    if (isinstance(turn, Sequence) and turn
            and all(isinstance(call, ToolCall) for call in turn)):
        return tuple(turn)
    raise TypeError(f"ScriptedModel turn {index} is {turn!r}; a turn is a str (a text reply), "
                    "a non-empty list of ToolCall, or an Exception instance to raise")


@final
class ScriptedModel:
    """A model that answers each ``stream()`` call with the next scripted turn.

    A ``str`` turn is streamed one word per "text-delta" (each word with its following
    whitespace) and finishes with "stop"; a list of ``ToolCall`` is streamed as
    "tool-call" chunks and finishes with "tool-calls"; an ``Exception`` instance is
    raised (to script provider errors such as ``APICallError``). Every request is
    recorded in ``requests``. It is meant for tests and examples, never as a fallback.

    Example::

        model = ScriptedModel([[ToolCall("lookup", {"id": 7})], "Order 7 has shipped."])

    Args:
        turns: The answers, in order; one is used per call.
        model_id: The id it reports.
        usage_per_word: Tokens counted per word, for the "finish" chunk's usage
            (input: words of the prompt's text; output: words streamed).

    Raises:
        TypeError: A turn is not a str, a non-empty list of ``ToolCall`` or an exception.
        ValueError: ``usage_per_word`` is negative.
    """

    __slots__ = ("_calls", "_model_id", "_turns", "_usage_per_word", "requests")

    def __init__(self, turns: Sequence[Turn], *, model_id: str = "scripted",
                 usage_per_word: int = 1) -> None:
        if isinstance(turns, str):
            raise TypeError("ScriptedModel takes a list of turns; wrap a single reply: "
                            "ScriptedModel([reply])")
        if usage_per_word < 0:
            raise ValueError(f"usage_per_word must be 0 or more, got {usage_per_word}")
        self._turns: list[Turn] = [_check_turn(i, turn) for i, turn in enumerate(turns)]
        self._model_id = model_id
        self._usage_per_word = usage_per_word
        self._calls = 0
        self.requests: list[ModelRequest] = []

    @property
    def provider(self) -> str:
        """Always ``"scripted"``."""
        return "scripted"

    @property
    def model_id(self) -> str:
        """The id given at construction."""
        return self._model_id

    @property
    def turns_left(self) -> int:
        """How many turns have not been used yet."""
        return len(self._turns) - len(self.requests)

    def __repr__(self) -> str:
        return (f"ScriptedModel(model_id={self._model_id!r}, turns={len(self._turns)}, "
                f"used={len(self.requests)})")

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        """Record ``request`` and stream the next turn.

        Raises:
            APICallError: No turn is left.
            Exception: The turn's exception, when the turn is one.
        """
        index = len(self.requests)
        self.requests.append(request)
        if index >= len(self._turns):
            raise APICallError(
                f"ScriptedModel has no turn left (it was given {len(self._turns)} turns) "
                f"for call {index + 1}; add a turn for every model call the test makes")
        turn = self._turns[index]
        if isinstance(turn, Exception):
            raise turn
        input_tokens = _prompt_words(request.prompt) * self._usage_per_word
        if isinstance(turn, str):
            words = _words(turn)
            for word in words:
                yield TextDelta(word)
            output_tokens = len(turn.split()) * self._usage_per_word
            reason = "stop"
        else:
            for call in turn:
                self._calls += 1
                yield ToolCallChunk(call.id or f"call_{self._calls}", call.name,
                                    copy.deepcopy(call.args))
            output_tokens = 0
            reason = "tool-calls"
        yield Finish(reason, Usage(input_tokens, output_tokens, input_tokens + output_tokens))
