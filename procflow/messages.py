"""The data model: messages and their parts, the live ``MessageList``, and stream chunks.

Messages and parts are pydantic models because they cross boundaries (provider
payloads, storage, step I/O). Chunks are a tagged union of small frozen slotted
dataclasses under the base ``Chunk``, one per type. One ``TextDelta`` is made per
streamed token, so it sets its slots directly instead of going through the generated
frozen ``__init__``.
"""

from __future__ import annotations

import base64
import binascii
import os
import random
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from datetime import UTC, datetime
from functools import partial
from typing import Annotated, Any, ClassVar, Final, Literal, Self, TypeAlias, cast, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    field_validator,
    model_validator,
)

from procflow.records import Tripwire, Usage

__all__ = [
    "Chunk", "ChunkType", "DataChunk", "ErrorChunk", "FilePart", "Finish", "ImagePart",
    "Message", "MessageContent", "MessageInput", "MessageList", "MessageRole",
    "MessageSource", "Part", "ReasoningDelta", "ReasoningPart", "Start", "StepFinish",
    "StepStart", "SuspendedChunk", "TextDelta", "TextPart", "ToolCallChunk", "ToolCallPart",
    "ToolResultChunk", "ToolResultPart", "TripwireChunk",
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
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


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

    model_config = ConfigDict(frozen=True, extra="forbid", protected_namespaces=(),
                              defer_build=True)

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

    model_config = ConfigDict(extra="forbid", defer_build=True)

    format: Literal[2] = 2
    parts: list[Part] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    content: str | None = None


_INPUT_KEYS = frozenset({"id", "role", "content", "created_at", "thread_id", "resource_id",
                         "metadata"})


class Message(BaseModel):
    """One message of a conversation."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

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
        content = self.content
        parts = content.parts
        if not parts:
            return content.content or ""
        if len(parts) == 1:  # the usual message: no join
            part = parts[0]
            return part.text if isinstance(part, TextPart) else ""
        return "".join([p.text for p in parts if isinstance(p, TextPart)])

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
    role = msg.role
    parts = msg.content.parts
    if role != "tool":
        for part in parts:
            if not isinstance(part, TextPart):
                break
        else:
            return {"role": role, "content": msg.text}
    return {"role": role, "content": [_part_dict(p) for p in parts]}


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

    def to_json(self) -> dict[str, Any]:
        """The list as JSON-ready data, what a durable storage keeps of it (``from_json``
        reads it back): ``{"system": [{"message", "tag", "source"}...], "messages":
        [{"message", "source"}...]}``, each message as ``model_dump(mode="json")``."""
        return {
            "system": [{"message": m.model_dump(mode="json"), "tag": self._tags.get(m.id),
                        "source": self._sources[m.id]} for m in self._system],
            "messages": [{"message": m.model_dump(mode="json"), "source": self._sources[m.id]}
                         for m in self._messages],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MessageList:
        """The list ``to_json`` gave ``data`` for (a system entry without a source is
        read as "context").

        Raises:
            ValueError: ``data`` is not what ``to_json`` gives (the message says where).
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"MessageList.from_json: expected a mapping, got "
                             f"{type(data).__name__}")
        ml = cls()
        for key in ("system", "messages"):
            items = data.get(key) or []
            if not isinstance(items, list):
                raise ValueError(f"MessageList.from_json: {key!r} must be a list, got "
                                 f"{type(items).__name__}")
            for i, item in enumerate(items):
                where = f"MessageList.from_json: {key}[{i}]"
                if not isinstance(item, Mapping) or "message" not in item:
                    raise ValueError(f"{where}: expected a mapping with a 'message', got "
                                     f"{item!r:.80}")
                try:
                    msg = Message.model_validate(item["message"])
                    source = item.get("source", "context" if key == "system" else None)
                    _check_source(source)
                except ValueError as exc:
                    raise ValueError(f"{where}: {exc}") from exc
                if (msg.role == "system") != (key == "system"):
                    raise ValueError(f"{where}: a {msg.role!r} message in {key!r}")
                if msg.id in ml._sources:
                    raise ValueError(f"{where}: message id {msg.id!r} appears twice")
                tag = item.get("tag") if key == "system" else None
                if tag is not None and not isinstance(tag, str):
                    raise ValueError(f"{where}: a tag is a str or None, got {tag!r}")
                ml._put(msg, cast(MessageSource, source), tag)
        return ml

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
"""The built-in chunk types; custom chunks are "data-<name>" (``DataChunk``)."""


class Chunk:
    """One part of a model or agent stream: the base of the chunk types.

    Each type is a small frozen dataclass with a ``type`` literal: ``Start``,
    ``StepStart``, ``TextDelta``, ``ReasoningDelta``, ``ToolCallChunk``,
    ``ToolResultChunk``, ``StepFinish``, ``Finish``, ``ErrorChunk``, ``TripwireChunk``,
    ``SuspendedChunk`` and ``DataChunk`` (a custom "data-<name>" chunk). Fields sit on
    the chunk itself (``chunk.text``, ``chunk.finish_reason``); ``payload`` is the chunk
    again, so ``chunk.payload.text`` reads the same field. Dispatch with ``match``
    (``case TextDelta(text=t):``) or ``isinstance``. ``to_dict()`` / ``Chunk.from_dict()``
    carry a chunk through storage and the wire.
    """

    __slots__ = ()

    _FIELDS: ClassVar[tuple[str, ...]] = ()
    _REQUIRED: ClassVar[frozenset[str]] = frozenset()
    _CHECKS: ClassVar[tuple[tuple[str, tuple[type, ...], str], ...]] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "Chunk is the base of the chunk types: build one of them (TextDelta(text), "
            "Finish(finish_reason, usage), DataChunk(name, data), ...), use a factory "
            "(Chunk.text_delta(...)) or Chunk.from_dict({...})"
        )

    @property
    def type(self) -> str:
        """The chunk's type: one of ``ChunkType`` or "data-<name>"."""
        raise NotImplementedError  # every chunk type sets it

    @property
    def text(self) -> str:
        """The text of a text or reasoning delta; "" for any other chunk."""
        return ""

    @property
    def metadata(self) -> Mapping[str, Any] | None:
        """Free-form extra information (a tripwire's structured details on a tripwire)."""
        return None

    @property
    def payload(self) -> Self:
        """The chunk itself: its fields read as ``chunk.payload.text`` or ``chunk.text``."""
        return self

    def to_dict(self) -> dict[str, Any]:
        """``{"type": ..., <fields>}``: plain values for storage and the wire (mappings
        copied, ``metadata`` left out when ``None``); ``Chunk.from_dict`` reads it back."""
        out: dict[str, Any] = {"type": self.type}
        for name in self._FIELDS:
            value = getattr(self, name)
            if isinstance(value, Mapping):
                value = dict(value)
            elif name == "metadata" and value is None:
                continue
            out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Chunk:
        """The chunk a ``to_dict()`` made. Also reads the older untyped shape
        ``{"type", "payload", "data", "metadata"}`` (stored caches and traces), whose
        payload keys unknown to the type are dropped.

        Raises:
            ValueError: The type is unknown, a field is unknown or missing, or a value
                is invalid (the message names the type and the field).
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"a chunk dict must be a mapping, got {type(data).__name__}")
        kind = data.get("type")
        if not isinstance(kind, str):
            raise ValueError(f"a chunk dict needs a 'type' string, got {kind!r}")
        if kind.startswith("data-") and len(kind) > 5:
            return DataChunk(kind[5:], data.get("data"), _chunk_metadata(kind, data))
        target = _CHUNK_CLASSES.get(kind)
        if target is None:
            raise ValueError(f"unknown chunk type {kind!r}; expected one of "
                             f"{', '.join(_CHUNK_CLASSES)} or a custom 'data-<name>'")
        if "payload" in data:  # the untyped shape, from before chunks were typed
            values = _old_values(target, kind, data)
        else:
            values = {k: v for k, v in data.items() if k != "type"}
            unknown = sorted(str(k) for k in values if k not in target._FIELDS)
            if unknown:
                raise ValueError(f"chunk {kind!r} has no field(s) {unknown}; its fields: "
                                 f"{list(target._FIELDS)}")
        if values.get("metadata", 0) is None:
            del values["metadata"]  # the type's default (None, or {} on a tripwire)
        missing = sorted(target._REQUIRED - values.keys())
        if missing:
            raise ValueError(f"chunk {kind!r} is missing field(s) {missing}")
        for name, types, expected in target._CHECKS:
            value = values.get(name)
            if name in values and not (isinstance(value, types) and (
                    bool in types or not isinstance(value, bool))):
                raise ValueError(f"chunk {kind!r}: field {name!r} must be {expected}, got "
                                 f"{type(value).__name__}")
        return target._build(values)

    @classmethod
    def _build(cls, values: dict[str, Any]) -> Chunk:
        chunk: Chunk = cls(**values)
        return chunk

    # -- factories (each returns its concrete type) --------------------------------

    @staticmethod
    def text_delta(text: str) -> TextDelta:
        """A "text-delta" chunk."""
        return TextDelta(text)

    @staticmethod
    def finish(finish_reason: str | None,
               usage: Usage | Mapping[str, Any] | None = None) -> Finish:
        """A "finish" chunk with the finish reason and token usage (a mapping is read
        with ``Usage.from_dict``)."""
        return Finish(finish_reason, None if usage is None else Usage.of(usage))

    @staticmethod
    def tripwire(reason: str, processor_id: str | None = None, retry: bool = False,
                 metadata: Mapping[str, Any] | None = None) -> TripwireChunk:
        """A "tripwire" chunk: a processor aborted the request."""
        return TripwireChunk(reason, processor_id, retry, dict(metadata or {}))

    @staticmethod
    def error(error: BaseException | str) -> ErrorChunk:
        """An "error" chunk carrying the error (an exception or a message)."""
        return ErrorChunk(error)

    @staticmethod
    def custom(name: str, data: Any) -> DataChunk:
        """A custom "data-<name>" chunk carrying ``data``.

        Raises:
            ValueError: ``name`` is empty.
        """
        if not name:
            raise ValueError("a custom chunk needs a non-empty name (its type is 'data-<name>')")
        return DataChunk(name, data)


def _chunk_metadata(kind: str, data: Mapping[str, Any]) -> Mapping[str, Any] | None:
    metadata = data.get("metadata")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ValueError(f"chunk {kind!r}: metadata must be a mapping or null, got "
                         f"{type(metadata).__name__}")
    return metadata


# What ``from_dict`` checks a field's value against, by its annotation; fields of other
# annotations (``Any``, ``Usage``, ...) are checked where they are built, or not at all.
_CHECKED: Final[dict[str, tuple[tuple[type, ...], str]]] = {
    "str": ((str,), "a string"),
    "str | None": ((str, type(None)), "a string or null"),
    "int": ((int,), "an integer"),
    "bool": ((bool,), "true or false"),
    "Mapping[str, Any]": ((Mapping,), "a mapping"),
    "Mapping[str, Any] | None": ((Mapping, type(None)), "a mapping or null"),
    "BaseException | str": ((BaseException, str), "a string"),
}


def _old_values(target: type[Chunk], kind: str, data: Mapping[str, Any]) -> dict[str, Any]:
    payload = data["payload"]
    if payload is None:
        payload = {}
    if not isinstance(payload, Mapping):
        raise ValueError(f"chunk {kind!r}: payload must be a mapping, got "
                         f"{type(payload).__name__}")
    values = {k: v for k, v in payload.items() if k in target._FIELDS}
    if target is not TripwireChunk or "metadata" not in values:
        values["metadata"] = data.get("metadata")
    return values


@dataclass(frozen=True, slots=True)
class Start(Chunk):
    """The stream began ("start").

    Attributes:
        agent_id: The agent whose stream it is.
        resumed: The run id, when the stream resumes a suspended run.
        run_id: The call's run: what ``agent.stream(resume_from=run_id)`` takes to pick
            the stream up again.
    """

    type: ClassVar[Literal["start"]] = "start"
    agent_id: str | None = None
    resumed: str | None = None
    metadata: Mapping[str, Any] | None = None
    run_id: str | None = None  # last: ``Start(agent_id, resumed, metadata)`` still works


@dataclass(frozen=True, slots=True)
class StepStart(Chunk):
    """A step of the agent loop (one model call) began ("step-start")."""

    type: ClassVar[Literal["step-start"]] = "step-start"
    step_number: int = 0
    metadata: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True, init=False)
class TextDelta(Chunk):
    """Answer text ("text-delta"), one per streamed piece."""

    type: ClassVar[Literal["text-delta"]] = "text-delta"
    text: str = field()  # field(): not the base's ``text`` property as a default
    metadata: Mapping[str, Any] | None = None

    # One is made per streamed token: set the slots directly, without the generated
    # frozen __init__'s object.__setattr__ calls (about a third cheaper).
    def __init__(self, text: str, metadata: Mapping[str, Any] | None = None) -> None:
        _set_text(self, text)
        _set_text_metadata(self, metadata)


_set_text = TextDelta.__dict__["text"].__set__
_set_text_metadata = TextDelta.__dict__["metadata"].__set__


@dataclass(frozen=True, slots=True)
class ReasoningDelta(Chunk):
    """The model's reasoning text ("reasoning-delta"), kept apart from the answer."""

    type: ClassVar[Literal["reasoning-delta"]] = "reasoning-delta"
    text: str = field()  # field(): not the base's ``text`` property as a default
    metadata: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ToolCallChunk(Chunk):
    """A tool call the model asked for ("tool-call")."""

    type: ClassVar[Literal["tool-call"]] = "tool-call"
    tool_call_id: str
    tool_name: str
    args: Mapping[str, Any] = field(default_factory=dict)
    metadata: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ToolResultChunk(Chunk):
    """The result of a tool call ("tool-result"); ``is_error`` when the tool raised
    (``result`` is then the error text)."""

    type: ClassVar[Literal["tool-result"]] = "tool-result"
    tool_call_id: str
    tool_name: str
    result: Any = None
    is_error: bool = False
    metadata: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class StepFinish(Chunk):
    """A step of the agent loop ended ("step-finish")."""

    type: ClassVar[Literal["step-finish"]] = "step-finish"
    step_number: int = 0
    finish_reason: str | None = None
    metadata: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Finish(Chunk):
    """A model call or agent stream ended ("finish"): why, and the tokens it used."""

    type: ClassVar[Literal["finish"]] = "finish"
    finish_reason: str | None = None
    usage: Usage | None = None
    metadata: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """As ``Chunk.to_dict``, with ``usage`` as its counts (``Usage.to_dict``)."""
        out = Chunk.to_dict(self)
        if self.usage is not None:
            out["usage"] = self.usage.to_dict()
        return out

    @classmethod
    def _build(cls, values: dict[str, Any]) -> Chunk:
        usage = values.get("usage")
        if usage is not None and not isinstance(usage, Usage):
            if not isinstance(usage, Mapping):
                raise ValueError(f"chunk 'finish': usage must be a mapping or null, got "
                                 f"{type(usage).__name__}")
            try:
                values["usage"] = Usage.from_dict(usage)
            except ValueError as exc:
                raise ValueError(f"chunk 'finish': {exc}") from None
        return super(Finish, cls)._build(values)


@dataclass(frozen=True, slots=True)
class ErrorChunk(Chunk):
    """The stream failed ("error"): the error, an exception or a message."""

    type: ClassVar[Literal["error"]] = "error"
    # field(): not the base's ``Chunk.error`` factory as a default; on an instance the
    # field hides the factory (the base keeps it for ``Chunk.error(...)``).
    error: BaseException | str = field()  # type: ignore[assignment]
    metadata: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """As ``Chunk.to_dict``, with an exception as "<ExceptionType>: <message>"."""
        out = Chunk.to_dict(self)
        if isinstance(self.error, BaseException):
            out["error"] = f"{type(self.error).__name__}: {self.error}"
        return out


@dataclass(frozen=True, slots=True)
class TripwireChunk(Chunk):
    """A processor aborted the request ("tripwire").

    Attributes:
        reason: Why it aborted.
        processor_id: The processor that aborted, when known.
        retry: Whether a retry with the reason added for the model was asked for.
        metadata: The abort's structured details.
    """

    type: ClassVar[Literal["tripwire"]] = "tripwire"
    reason: str
    processor_id: str | None = None
    retry: bool = False
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_tripwire(self) -> Tripwire:
        """The abort as a ``Tripwire`` value (what ``FullOutput.tripwire`` holds)."""
        return Tripwire(self.reason, self.processor_id, self.retry, self.metadata)


@dataclass(frozen=True, slots=True)
class SuspendedChunk(Chunk):
    """The agent run suspended on tool calls awaiting ``resume`` ("suspended").

    Attributes:
        run_id: The run to resume.
        calls: ``{"tool_call_id", "tool_name", "args", "payload"}`` per suspended call.
    """

    type: ClassVar[Literal["suspended"]] = "suspended"
    run_id: str
    calls: tuple[Mapping[str, Any], ...] = ()
    metadata: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """As ``Chunk.to_dict``, with ``calls`` a list of dicts."""
        out = Chunk.to_dict(self)
        out["calls"] = [dict(c) for c in self.calls]
        return out

    @classmethod
    def _build(cls, values: dict[str, Any]) -> Chunk:
        calls = values.get("calls")
        if calls is not None:
            if not isinstance(calls, list | tuple) or not all(isinstance(c, Mapping)
                                                               for c in calls):
                raise ValueError("chunk 'suspended': calls must be a list of mappings")
            values["calls"] = tuple(calls)
        return super(SuspendedChunk, cls)._build(values)


@dataclass(frozen=True, slots=True)
class DataChunk(Chunk):
    """A custom chunk of type "data-<name>" carrying ``data`` (no rules on its shape)."""

    name: str
    data: Any = None
    metadata: Mapping[str, Any] | None = None

    @property
    def type(self) -> str:
        """"data-<name>"."""
        return "data-" + self.name

    def to_dict(self) -> dict[str, Any]:
        """``{"type": "data-<name>", "data": ..., "metadata": ...}`` (no ``name`` key)."""
        out: dict[str, Any] = {"type": self.type, "data": self.data}
        if self.metadata is not None:
            out["metadata"] = dict(self.metadata)
        return out


_CHUNK_CLASSES: dict[str, type[Chunk]] = {
    "start": Start, "step-start": StepStart, "text-delta": TextDelta,
    "reasoning-delta": ReasoningDelta, "tool-call": ToolCallChunk,
    "tool-result": ToolResultChunk, "step-finish": StepFinish, "finish": Finish,
    "error": ErrorChunk, "tripwire": TripwireChunk, "suspended": SuspendedChunk,
}
_cls: type[Chunk]
for _cls in (*_CHUNK_CLASSES.values(), DataChunk):
    _cls._FIELDS = tuple(f.name for f in fields(cast(Any, _cls)))
    _cls._REQUIRED = frozenset(f.name for f in fields(cast(Any, _cls))
                               if f.default is MISSING and f.default_factory is MISSING)
    _cls._CHECKS = tuple((f.name, *_CHECKED[str(f.type)]) for f in fields(cast(Any, _cls))
                         if str(f.type) in _CHECKED)
del _cls
