"""The data model: messages and their parts, the live ``MessageList``, and stream chunks.

Messages and parts are pydantic models because they cross boundaries (provider
payloads, storage, step I/O). ``Chunk`` is a slotted dataclass, deliberately not
frozen: one is made per streamed token, and a frozen dataclass costs about four
times as much to build.
"""

from __future__ import annotations

import base64
import binascii
import os
import random
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Annotated, Any, Final, Literal, Self, TypeAlias, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    field_validator,
    model_validator,
)

__all__ = [
    "Chunk", "ChunkType", "FilePart", "ImagePart", "Message", "MessageContent", "MessageInput",
    "MessageList", "MessageRole", "MessageSource", "Part", "ReasoningPart", "TextPart",
    "ToolCallPart", "ToolResultPart",
]

MessageRole: TypeAlias = Literal["system", "user", "assistant", "tool"]
MessageSource: TypeAlias = Literal["input", "memory", "response", "context"]

_ROLES: tuple[MessageRole, ...] = get_args(MessageRole)
_SOURCES: tuple[MessageSource, ...] = get_args(MessageSource)


def _decode_bytes(value: object) -> object:
    # JSON carries bytes as base64 text, so a str here is base64 (see FilePart.data).
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except binascii.Error as exc:
            raise ValueError("expected raw bytes or a base64-encoded string") from exc
    return value


def _encode_bytes(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


_Base64Bytes = Annotated[
    bytes, BeforeValidator(_decode_bytes), PlainSerializer(_encode_bytes, when_used="json")
]


_ids = random.Random(os.urandom(32))
os.register_at_fork(after_in_child=lambda: _ids.seed(os.urandom(32)))


def new_id() -> str:
    """A fresh random id (32 hex characters: 128 random bits, as many as a uuid4 has).

    Drawn from a generator seeded by the OS (and reseeded in a forked child), not from
    the OS on every call: ids are made on hot paths (messages, spans), and they are
    names, not secrets. Ids that act as handles come from ``new_secret_id``.
    """
    return f"{_ids.getrandbits(128):032x}"


class _SecretBytes:
    """Bytes from the OS's CSPRNG (``os.urandom``, as ``secrets`` uses), read 4 KiB at a
    time and handed out once each: one system call per 256 ids instead of one per id.
    Thread-safe; a forked child drops what its parent read."""

    _CHUNK: Final = 4096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool = b""
        self._at = 0

    def take(self, size: int) -> bytes:
        with self._lock:
            at = self._at
            if at + size > len(self._pool):
                self._pool, at = os.urandom(self._CHUNK), 0
            self._at = at + size
            return self._pool[at:at + size]

    def forget(self) -> None:
        self._lock = threading.Lock()  # a lock held by another thread at fork is lost
        self._pool, self._at = b"", 0


_secret_bytes = _SecretBytes()
os.register_at_fork(after_in_child=_secret_bytes.forget)


def new_secret_id() -> str:
    """An unpredictable id (32 hex characters: 128 bits from the OS's CSPRNG), for ids
    that are handles someone could guess at: run ids (what ``resume`` and ``get_run``
    take) and thread ids. Each id's bytes are read from the OS and used once."""
    return _secret_bytes.take(16).hex()


class _PartBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextPart(_PartBase):
    """Plain text."""

    type: Literal["text"] = "text"
    text: str


class ReasoningPart(_PartBase):
    """The model's reasoning text, kept apart from the answer."""

    type: Literal["reasoning"] = "reasoning"
    text: str


class ToolCallPart(_PartBase):
    """A call the model asked for: which tool, with which arguments."""

    type: Literal["tool-call"] = "tool-call"
    tool_call_id: str
    tool_name: str
    args: dict[str, Any] = Field(default_factory=dict)


class ToolResultPart(_PartBase):
    """The result of a tool call.

    ``model_output``, when set, is what the model sees instead of ``result``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", protected_namespaces=())

    type: Literal["tool-result"] = "tool-result"
    tool_call_id: str
    tool_name: str
    result: Any = None
    is_error: bool = False
    model_output: Any = None


class _MediaPart(_PartBase):
    type: str
    url: str | None = None
    data: _Base64Bytes | None = None

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.url is None) == (self.data is None):
            raise ValueError(f"a {self.type} part needs exactly one of 'url' or 'data'")
        return self


class FilePart(_MediaPart):
    """A file given by ``url`` or by raw bytes ``data`` (base64 text in JSON), not both."""

    type: Literal["file"] = "file"
    media_type: str
    filename: str | None = None


class ImagePart(_MediaPart):
    """An image given by ``url`` or by raw bytes ``data`` (base64 text in JSON), not both."""

    type: Literal["image"] = "image"
    media_type: str | None = None


Part = Annotated[
    TextPart | ReasoningPart | ToolCallPart | ToolResultPart | FilePart | ImagePart,
    Field(discriminator="type"),
]


class MessageContent(BaseModel):
    """What a message says: its parts, metadata, and an optional flattened text fallback."""

    model_config = ConfigDict(extra="forbid")

    format: Literal[2] = 2
    parts: list[Part] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    content: str | None = None


_INPUT_KEYS = frozenset({"id", "role", "content", "created_at", "thread_id", "resource_id",
                         "metadata"})


class Message(BaseModel):
    """One message of a conversation."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(default_factory=new_id)
    role: MessageRole
    content: MessageContent = Field(default_factory=MessageContent)
    created_at: datetime = Field(default_factory=partial(datetime.now, UTC))
    thread_id: str | None = None
    resource_id: str | None = None

    @field_validator("created_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)

    @classmethod
    def _with_parts(cls, role: MessageRole, parts: Sequence[Part | dict[str, Any]],
                    kw: dict[str, Any]) -> Self:
        # One validating call for the whole tree (content given as a dict) is the
        # cheapest supported construction: built parts are taken as they are, not
        # re-validated, and no nested model's __init__ runs in Python.
        content = {"parts": parts, "metadata": kw.pop("metadata", None) or {}}
        return cls(role=role, content=content, **kw)

    @classmethod
    def of_parts(cls, role: MessageRole, parts: Sequence[Part], **kw: Any) -> Self:
        """A message of already-built ``parts`` (keywords as in ``user``)."""
        return cls._with_parts(role, parts, kw)

    @classmethod
    def user(cls, text: str, **kw: Any) -> Self:
        """A user message of one text part; ``kw`` sets other fields and content ``metadata``."""
        return cls._with_parts("user", [{"type": "text", "text": text}], kw)

    @classmethod
    def assistant(cls, text: str, **kw: Any) -> Self:
        """An assistant message of one text part (keywords as in ``user``)."""
        return cls._with_parts("assistant", [{"type": "text", "text": text}], kw)

    @classmethod
    def system(cls, text: str, **kw: Any) -> Self:
        """A system message of one text part (keywords as in ``user``)."""
        return cls._with_parts("system", [{"type": "text", "text": text}], kw)

    @classmethod
    def tool(cls, results: Sequence[ToolResultPart], **kw: Any) -> Self:
        """A tool message carrying tool results (keywords as in ``user``)."""
        return cls._with_parts("tool", list(results), kw)

    @classmethod
    def from_input(cls, obj: MessageInput) -> Message:
        """Turn what a caller passed into a ``Message``.

        Args:
            obj: A ``Message`` (returned as is), a ``str`` (a user message), or a dict
                ``{"role": ..., "content": ...}`` whose content is a str, a list of part
                dicts (or strs, read as text parts), or a ``MessageContent`` (or its dict).
                The dict may also carry ``id``, ``created_at``, ``thread_id``,
                ``resource_id`` and ``metadata``.

        Raises:
            ValueError: The object cannot be read as a message; pydantic's
                ``ValidationError`` (a ``ValueError``) when a part or field is invalid.
        """
        if isinstance(obj, Message):
            return obj
        if isinstance(obj, str):
            return cls.user(obj)
        if isinstance(obj, Mapping):
            return cls._from_mapping(obj)
        raise ValueError(
            f"cannot make a message from {type(obj).__name__}: expected a Message, a str "
            "(a user message) or a dict with 'role' and 'content'"
        )

    @classmethod
    def _from_mapping(cls, obj: Mapping[str, Any]) -> Message:
        data = dict(obj)
        unknown = sorted(str(key) for key in data if key not in _INPUT_KEYS)
        if unknown:
            raise ValueError(f"unknown message key(s) {unknown}; allowed: {sorted(_INPUT_KEYS)}")
        if "role" not in data:
            raise ValueError("message dict is missing 'role' (one of " + ", ".join(_ROLES) + ")")
        if data["role"] not in _ROLES:
            raise ValueError(f"message role {data['role']!r} is not one of {list(_ROLES)}")
        if "content" not in data:
            raise ValueError("message dict is missing 'content' (a str or a list of parts)")
        content = data["content"]
        if isinstance(content, MessageContent | Mapping):
            return cls.model_validate(data)
        if isinstance(content, str):
            parts: list[Any] = [TextPart(text=content)]
        elif isinstance(content, Sequence):
            parts = [TextPart(text=p) if isinstance(p, str) else p for p in content]
        else:
            raise ValueError(
                f"message content must be a str, a list of part dicts or a MessageContent, "
                f"got {type(content).__name__}"
            )
        data["content"] = {"parts": parts, "metadata": data.pop("metadata", None) or {}}
        return cls.model_validate(data)

    @property
    def text(self) -> str:
        """The text parts joined; ``content.content`` when there are no parts at all."""
        if not self.content.parts:
            return self.content.content or ""
        return "".join(p.text for p in self.content.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        """The tool-call parts, in order."""
        return [p for p in self.content.parts if isinstance(p, ToolCallPart)]

    @property
    def tool_results(self) -> list[ToolResultPart]:
        """The tool-result parts, in order."""
        return [p for p in self.content.parts if isinstance(p, ToolResultPart)]

    def with_text(self, text: str) -> Message:
        """Return a copy (same id) whose text parts are replaced by one text part.

        The new part takes the place of the first text part (or goes last when there
        is none); other parts keep their order. A set ``content.content`` becomes ``text``.
        """
        parts: list[Part] = []
        placed = False
        for part in self.content.parts:
            if not isinstance(part, TextPart):
                parts.append(part)
            elif not placed:
                parts.append(TextPart(text=text))
                placed = True
        if not placed:
            parts.append(TextPart(text=text))
        flat = text if self.content.content is not None else None
        content = self.content.model_copy(
            update={"parts": parts, "metadata": dict(self.content.metadata), "content": flat}
        )
        return self.model_copy(update={"content": content})


MessageInput: TypeAlias = Message | str | Mapping[str, Any]
"""Anything ``Message.from_input`` accepts."""


def _check_source(source: str) -> None:
    if source not in _SOURCES:
        raise ValueError(f"unknown message source {source!r}; expected one of {list(_SOURCES)}")


def _as_messages(msgs: MessageInput | Iterable[MessageInput]) -> list[Message]:
    if isinstance(msgs, Message | str | Mapping):
        return [Message.from_input(msgs)]
    return [Message.from_input(m) for m in msgs]


def _part_dict(part: Part) -> dict[str, Any]:
    # model_dump builds fresh containers, so edits to the prompt never reach the messages.
    data = part.model_dump()
    if isinstance(part, ToolResultPart):
        model_output = data.pop("model_output")
        if model_output is not None:
            data["result"] = model_output
    return data


def _prompt_entry(msg: Message) -> dict[str, Any]:
    parts = msg.content.parts
    if msg.role != "tool" and all(isinstance(p, TextPart) for p in parts):
        return {"role": msg.role, "content": msg.text}
    return {"role": msg.role, "content": [_part_dict(p) for p in parts]}


class MessageList:
    """The live list of a request's messages, each tagged with where it came from.

    Non-system messages keep insertion order and have a source ("input", "memory",
    "response" or "context"). System messages live in a list of their own, each with
    a source and an optional tag (e.g. "memory" for memory instructions).
    """

    __slots__ = ("_messages", "_sources", "_system", "_tags")

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._system: list[Message] = []
        self._sources: dict[str, MessageSource] = {}
        self._tags: dict[str, str | None] = {}  # only system messages have an entry

    def __len__(self) -> int:
        return len(self._messages)

    def __iter__(self) -> Iterator[Message]:
        return iter(self.all())

    def __repr__(self) -> str:
        counts = ", ".join(f"{s}={len(self.by_source(s))}" for s in _SOURCES)
        return f"MessageList(system={len(self._system)}, {counts})"

    def all(self) -> list[Message]:
        """The non-system messages, in insertion order."""
        return list(self._messages)

    def by_source(self, source: MessageSource) -> list[Message]:
        """The non-system messages that came from ``source``, in order."""
        _check_source(source)
        return [m for m in self._messages if self._sources[m.id] == source]

    def input(self) -> list[Message]:
        """The non-system messages of the caller's input."""
        return self.by_source("input")

    def memory(self) -> list[Message]:
        """The non-system messages recalled from memory."""
        return self.by_source("memory")

    def response(self) -> list[Message]:
        """The non-system messages the model (or tools) produced."""
        return self.by_source("response")

    def context(self) -> list[Message]:
        """The non-system messages added as context."""
        return self.by_source("context")

    def system(self, tag: str | None = None) -> list[Message]:
        """The system messages, in order; only those tagged ``tag`` when it is given."""
        if tag is None:
            return list(self._system)
        return [m for m in self._system if self._tags[m.id] == tag]

    def get(self, id: str) -> Message | None:
        """The message (system or not) with this id, or ``None``."""
        if id not in self._sources:
            return None
        return next(m for m in self._list_of(id) if m.id == id)

    def source_of(self, id: str) -> MessageSource:
        """The source of the message with this id.

        Raises:
            KeyError: No message has this id.
        """
        if id not in self._sources:
            raise self._unknown(id)
        return self._sources[id]

    def add(self, msgs: MessageInput | Iterable[MessageInput], source: MessageSource) -> Self:
        """Add one message or several, all from ``source``.

        System-role messages go to the system list. A message whose id is already present
        replaces that message in place and takes the new source.

        Raises:
            ValueError: ``source`` is unknown or a message cannot be read (nothing is added).
        """
        _check_source(source)
        for msg in _as_messages(msgs):
            self._put(msg, source, None)
        return self

    def add_system(self, msgs: MessageInput | Iterable[MessageInput],
                   tag: str | None = None) -> Self:
        """Add system messages (a str is read as a system message), with source "context".

        A message with the same tag and text as one already present is not added twice.

        Raises:
            ValueError: A message is not a system message.
        """
        items = [Message.system(m) if isinstance(m, str) else m
                 for m in ([msgs] if isinstance(msgs, Message | str | Mapping) else msgs)]
        messages = _as_messages(items)
        for msg in messages:
            if msg.role != "system":
                raise ValueError(f"add_system() got a {msg.role!r} message (id {msg.id!r}); "
                                 "use add() for non-system messages")
        for msg in messages:
            duplicate = any(self._tags[m.id] == tag and m.text == msg.text and m.id != msg.id
                            for m in self._system)
            if not duplicate:
                self._put(msg, "context", tag)
        return self

    def remove_by_ids(self, ids: str | Iterable[str]) -> list[Message]:
        """Remove the messages with these ids (unknown ids are ignored); return the removed."""
        wanted = {ids} if isinstance(ids, str) else set(ids)
        removed = [m for m in (*self._system, *self._messages) if m.id in wanted]
        self._system = [m for m in self._system if m.id not in wanted]
        self._messages = [m for m in self._messages if m.id not in wanted]
        for msg in removed:
            del self._sources[msg.id]
            self._tags.pop(msg.id, None)
        return removed

    def replace(self, id: str, msg: MessageInput) -> None:
        """Put ``msg`` where the message ``id`` is, keeping its source (and tag).

        Raises:
            KeyError: No message has this id.
            ValueError: The replacement would move a message between the system and
                non-system lists, or its id belongs to another message of the list.
        """
        if id not in self._sources:
            raise self._unknown(id)
        new = Message.from_input(msg)
        target = self._list_of(id)
        if (new.role == "system") != (target is self._system):
            raise ValueError(f"cannot replace message {id!r} with a {new.role!r} message: "
                             "system and non-system messages are kept apart")
        if new.id != id and new.id in self._sources:
            raise ValueError(f"cannot replace message {id!r} with message {new.id!r}: "
                             "that id is already in the list")
        target[self._index(target, id)] = new
        self._sources[new.id] = self._sources.pop(id)
        if target is self._system:
            self._tags[new.id] = self._tags.pop(id)

    def clear(self, source: MessageSource | None = None) -> list[Message]:
        """Remove every message (system ones included) or those from ``source``; return them."""
        if source is not None:
            _check_source(source)
        ids = [m.id for m in (*self._system, *self._messages)
               if source is None or self._sources[m.id] == source]
        return self.remove_by_ids(ids)

    def to_prompt(self) -> list[dict[str, Any]]:
        """The provider-facing prompt: system messages first, then the others, in order.

        Each entry is ``{"role": ..., "content": ...}``; content is a str for a message
        made only of text, else a list of part dicts (a tool result shows its
        ``model_output`` as ``result`` when set; file and image data stay raw bytes).
        The dicts are fresh: editing them does not change the messages.
        """
        return [_prompt_entry(m) for m in (*self._system, *self._messages)]

    def assign(self, other: MessageList) -> None:
        """Make this list hold exactly ``other``'s messages, sources and tags (in place).

        Used to apply the result of work done on a copy back to the live list.
        """
        self._messages = list(other._messages)
        self._system = list(other._system)
        self._sources = dict(other._sources)
        self._tags = dict(other._tags)

    def copy(self) -> MessageList:
        """An independent copy (messages deep-copied)."""
        clone = MessageList()
        clone._messages = [m.model_copy(deep=True) for m in self._messages]
        clone._system = [m.model_copy(deep=True) for m in self._system]
        clone._sources = dict(self._sources)
        clone._tags = dict(self._tags)
        return clone

    def _put(self, msg: Message, source: MessageSource, tag: str | None) -> None:
        target = self._system if msg.role == "system" else self._messages
        if msg.id in self._sources:
            current = self._list_of(msg.id)
            index = self._index(current, msg.id)
            if current is target:
                target[index] = msg
            else:
                del current[index]
                target.append(msg)
            previous_tag = self._tags.pop(msg.id, None)
            tag = tag if tag is not None else previous_tag
        else:
            target.append(msg)
        self._sources[msg.id] = source
        if target is self._system:
            self._tags[msg.id] = tag

    def _list_of(self, id: str) -> list[Message]:
        return self._system if id in self._tags else self._messages

    @staticmethod
    def _index(messages: list[Message], id: str) -> int:
        return next(i for i, m in enumerate(messages) if m.id == id)

    def _unknown(self, id: str) -> KeyError:
        known = list(self._sources)
        shown = ", ".join(repr(k) for k in known[:10]) + (", ..." if len(known) > 10 else "")
        return KeyError(f"no message with id {id!r} in this MessageList (known ids: "
                        f"{shown or 'none'})")


ChunkType: TypeAlias = Literal[
    "start", "step-start", "text-delta", "reasoning-delta", "tool-call", "tool-result",
    "step-finish", "finish", "error", "tripwire", "suspended",
]
_CHUNK_TYPES: frozenset[str] = frozenset(get_args(ChunkType))


@dataclass(slots=True)
class Chunk:
    """One part of a model or agent stream.

    Attributes:
        type: One of the known types ("start", "step-start", "text-delta",
            "reasoning-delta", "tool-call", "tool-result", "step-finish", "finish",
            "error", "tripwire") or a custom "data-<name>".
        payload: The type's fields (e.g. ``text`` for "text-delta").
        data: The value of a custom "data-*" chunk.
        metadata: Free-form extra information.
    """

    type: str
    payload: dict[str, Any] = field(default_factory=dict)
    data: Any = None
    metadata: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.type not in _CHUNK_TYPES and not (
            self.type.startswith("data-") and len(self.type) > 5
        ):
            raise ValueError(
                f"unknown chunk type {self.type!r}; expected one of "
                f"{', '.join(sorted(_CHUNK_TYPES))} or a custom 'data-<name>'"
            )

    @property
    def text(self) -> str:
        """The text of a "text-delta" chunk; "" for any other type."""
        return str(self.payload.get("text", "")) if self.type == "text-delta" else ""

    @classmethod
    def text_delta(cls, text: str) -> Chunk:
        """A "text-delta" chunk."""
        return cls("text-delta", {"text": text})

    @classmethod
    def finish(cls, finish_reason: str, usage: Mapping[str, Any] | None = None) -> Chunk:
        """A "finish" chunk with the finish reason and token usage."""
        return cls("finish", {"finish_reason": finish_reason,
                              "usage": dict(usage) if usage is not None else None})

    @classmethod
    def tripwire(cls, reason: str, processor_id: str | None = None, retry: bool = False,
                 metadata: Mapping[str, Any] | None = None) -> Chunk:
        """A "tripwire" chunk: a processor aborted the request."""
        return cls("tripwire", {"reason": reason, "processor_id": processor_id,
                                "retry": retry, "metadata": dict(metadata or {})})

    @classmethod
    def error(cls, error: BaseException | str) -> Chunk:
        """An "error" chunk carrying the error (an exception or a message)."""
        return cls("error", {"error": error})

    @classmethod
    def custom(cls, name: str, data: Any) -> Chunk:
        """A custom "data-<name>" chunk carrying ``data``.

        Raises:
            ValueError: ``name`` is empty.
        """
        if not name:
            raise ValueError("a custom chunk needs a non-empty name (its type is 'data-<name>')")
        return cls(f"data-{name}", data=data)
