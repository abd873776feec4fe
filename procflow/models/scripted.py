"""``ScriptedModel``: a model that replays scripted turns offline, for tests and examples."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, final

from procflow.errors import APICallError
from procflow.messages import Chunk
from procflow.models._offline import ModelResponse, ToolCall, assistant_turns, stream_response
from procflow.models.base import ModelRequest

__all__ = ["ScriptedModel", "ToolCall", "Turn"]


Turn: TypeAlias = str | Sequence[ToolCall] | Exception
"""One scripted answer: a text reply, a list of tool calls, or an exception to raise."""


def _check_turn(index: int, turn: object) -> Turn:
    if isinstance(turn, str | Exception):
        return turn
    if (isinstance(turn, Sequence) and turn
            and all(isinstance(call, ToolCall) for call in turn)):
        return tuple(turn)
    raise TypeError(f"ScriptedModel turn {index} is {turn!r}; a turn is a str (a text reply), "
                    "a non-empty list of ToolCall, or an Exception instance to raise")


@dataclass(frozen=True, slots=True)
class _Position:
    """The script at one position of a conversation: the errors raised before the answer
    (flat indexes into the turns) and the answer's flat index (``None`` past the end)."""

    errors: tuple[int, ...]
    answer: int | None


def _positions(turns: Sequence[Turn]) -> list[_Position]:
    positions: list[_Position] = []
    errors: list[int] = []
    for index, turn in enumerate(turns):
        if isinstance(turn, Exception):
            errors.append(index)
            continue
        positions.append(_Position(tuple(errors), index))
        errors = []
    if errors:
        positions.append(_Position(tuple(errors), None))
    return positions


@final
class ScriptedModel:
    """A model that answers from a script, picking the turn from the conversation it is sent.

    The answer to a request is the script's turn number *n* (counting from 0), where *n*
    is how many assistant messages the request's prompt already holds: an assistant
    message that called tools is a turn, tool results are not. So a tool loop walks the
    script (call a tool, then answer), a conversation kept in memory goes on where it
    was, and a run resumed in another process, with a fresh ``ScriptedModel``, continues
    the script instead of starting it again. Two independent calls (no shared history)
    both get the first turn. A model whose first request comes past the end of its
    script starts the script there (a model made afresh for each request answers with
    its own turns).

    A ``str`` turn is streamed one word per "text-delta" (each word with its following
    whitespace) and finishes with "stop"; a list of ``ToolCall`` is streamed as
    "tool-call" chunks and finishes with "tool-calls" (a call without an id gets
    ``call_<n>``, counting the conversation's tool calls from 1). An ``Exception``
    instance is raised, to script provider errors such as ``APICallError``: it belongs
    to the answer after it and is raised once by this model object, the retry getting
    that answer (``[APICallError(...), "hi"]`` fails the first call, answers "hi" to its
    retry). Every request is recorded in ``requests``. It is meant for tests and
    examples, never as a fallback.

    Example::

        model = ScriptedModel([[ToolCall("lookup", {"id": 7})], "Order 7 has shipped."])

    Args:
        turns: The answers, in conversation order.
        model_id: The id it reports.
        usage_per_word: Tokens counted per word, for the "finish" chunk's usage
            (input: words of the prompt's text; output: words streamed).

    Raises:
        TypeError: A turn is not a str, a non-empty list of ``ToolCall`` or an exception.
        ValueError: ``usage_per_word`` is negative.
    """

    __slots__ = ("_model_id", "_positions", "_raised", "_start", "_turns",
                 "_usage_per_word", "_used", "requests")

    def __init__(self, turns: Sequence[Turn], *, model_id: str = "scripted",
                 usage_per_word: int = 1) -> None:
        if isinstance(turns, str):
            raise TypeError("ScriptedModel takes a list of turns; wrap a single reply: "
                            "ScriptedModel([reply])")
        if usage_per_word < 0:
            raise ValueError(f"usage_per_word must be 0 or more, got {usage_per_word}")
        self._turns: list[Turn] = [_check_turn(i, turn) for i, turn in enumerate(turns)]
        self._positions = _positions(self._turns)
        self._model_id = model_id
        self._usage_per_word = usage_per_word
        self._raised: dict[int, int] = {}  # position -> errors of it raised so far
        self._used: set[int] = set()
        self._start: int | None = None  # the conversation turn its script's turn 0 answers
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
        """How many turns this object has not given (answered or raised) yet."""
        return len(self._turns) - len(self._used)

    def __repr__(self) -> str:
        return (f"ScriptedModel(model_id={self._model_id!r}, turns={len(self._turns)}, "
                f"used={len(self._used)})")

    def _turn_for(self, prompt: Sequence[Mapping[str, Any]]) -> Turn:
        turns = assistant_turns(prompt)
        if self._start is None:  # the first request: a script too short to reach it
            self._start = turns if turns >= len(self._positions) else 0  # starts here
        position = turns - self._start
        if not 0 <= position < len(self._positions):
            started = (f", started at turn {self._start} of its first conversation"
                       if self._start else "")
            raise APICallError(
                f"ScriptedModel has no turn for a conversation with {turns} assistant "
                f"turns (its script answers {len(self._positions)}{started}); add a turn "
                "for every model call the test makes")
        script = self._positions[position]
        raised = self._raised.get(position, 0)
        if raised < len(script.errors):
            self._raised[position] = raised + 1
            index = script.errors[raised]
        elif script.answer is None:
            raise APICallError(
                f"ScriptedModel has no answer after its last error (it was given "
                f"{len(self._turns)} turns); add a turn for every model call the test makes")
        else:
            index = script.answer
        self._used.add(index)
        return self._turns[index]

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        """Record ``request`` and stream the turn its conversation has reached.

        Raises:
            APICallError: The script has no turn for this conversation.
            Exception: The turn's exception, when the turn is one.
        """
        self.requests.append(request)
        turn = self._turn_for(request.prompt)
        if isinstance(turn, Exception):
            raise turn
        response = (ModelResponse(text=turn) if isinstance(turn, str)
                    else ModelResponse(tool_calls=turn))
        async for chunk in stream_response(response, request,
                                           usage_per_word=self._usage_per_word):
            yield chunk

