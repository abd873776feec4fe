"""The value codec: how values crossing a step boundary become JSON, losslessly.

Persistent backends store step inputs, outputs, state, payloads and results as JSON.
JSON carries ``None``, ``bool``, ``int``, finite ``float``, ``str``, lists and dicts with
string keys; this codec stores every other supported value as a tagged object
``{"$pf": tag, "v": ...}`` and rebuilds the same type when it is read back:

========================  ===================================================
Python value              stored as
========================  ===================================================
``float`` nan/inf/-inf    ``{"$pf": "float", "v": "nan"}``
``tuple``                 ``{"$pf": "tuple", "v": [...]}``
``set`` / ``frozenset``   ``{"$pf": "set" | "frozenset", "v": [...]}``
``bytes`` / ``bytearray`` ``{"$pf": "bytes" | "bytearray", "v": base64}``
``datetime``              ``{"$pf": "datetime", "v": isoformat, "tz": zone key}``
``date`` / ``time``       ``{"$pf": "date" | "time", "v": isoformat}``
``timedelta``             ``{"$pf": "timedelta", "v": [days, seconds, microseconds]}``
``Decimal`` / ``UUID``    ``{"$pf": "decimal" | "uuid", "v": str}``
a dict with a key that    ``{"$pf": "dict", "v": [[key, value], ...]}``
is not a ``str`` (or is
``"$pf"``)
a pydantic model          ``{"$pf": "model", "cls": "module:Name", "v": {field: ...}}``
an ``Enum`` member        ``{"$pf": "enum", "cls": "module:Name", "v": value}``
a registered type         ``{"$pf": "user", "type": name, "v": encode(value)}``
========================  ===================================================

Pydantic models and enums are rebuilt from their class, looked up by module and name
among the modules already imported (storage never imports a module by itself); a model
whose class cannot be found comes back as a dict of its fields, which the runtime
validates against the step's schema. Other types are registered with
``register_type(cls, encode, decode, name=...)``.

Anything else (an object of an unregistered class, a cycle, nesting deeper than
``MAX_DEPTH``) is refused: ``encode_value`` raises ``UnstorableValueError`` naming the
path inside the value and the type, and the runtime turns it into a
``StepValidationError`` for the step that produced the value, before anything is written.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import importlib
import math
import re
import sys
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Final
from uuid import UUID
from zoneinfo import ZoneInfo

from pydantic import BaseModel

__all__ = [
    "MAX_DEPTH",
    "SKIP_BLOBS",
    "TAG",
    "UndecodableValueError",
    "UnreadBlob",
    "UnstorableValueError",
    "blob_refs",
    "decode_value",
    "encode_value",
    "register_type",
]

TAG: Final = "$pf"
"""The key marking a tagged object."""

MAX_DEPTH: Final = 64
"""How deeply containers (lists, dicts, tuples, sets, models, registered types) may nest
in one stored value."""


class UnstorableValueError(ValueError):
    """A value the codec cannot store.

    Attributes:
        path: Where in the value, e.g. ``"items[3].price"`` (``""`` for the value itself).
        type_name: The offending value's type.
        reason: Why it is refused.
    """

    def __init__(self, type_name: str, reason: str) -> None:
        super().__init__(reason)
        self.parts: list[str] = []
        self.type_name = type_name
        self.reason = reason

    @property
    def path(self) -> str:
        return "".join(reversed(self.parts)).removeprefix(".")

    def where(self, root: str) -> str:
        """The path below ``root`` (e.g. ``"output"`` → ``"output.items[3].price"``)."""
        path = "".join(reversed(self.parts))
        return root + path if root else path.removeprefix(".")


@dataclasses.dataclass(frozen=True, slots=True)
class _UserType:
    cls: type[Any]
    name: str
    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]


_BY_CLASS: dict[type[Any], _UserType] = {}
_BY_NAME: dict[str, _UserType] = {}


def register_type(cls: type[Any], encode: Callable[[Any], Any],
                  decode: Callable[[Any], Any], *, name: str | None = None) -> None:
    """Teach persistent storage to keep values of ``cls`` (and its subclasses).

    Args:
        cls: The class.
        encode: Turns a value into something storable (any value this codec stores).
        decode: Turns what ``encode`` returned back into the value.
        name: The name stored with each value (default ``"module.QualName"``); keep it
            stable, runs stored under it are read back through it.

    Raises:
        ValueError: ``name`` is already registered for another class.
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_type() takes a class, got {cls!r}")
    key = name or f"{cls.__module__}.{cls.__qualname__}"
    known = _BY_NAME.get(key)
    if known is not None and known.cls is not cls:
        raise ValueError(f"storage type name {key!r} is already registered for "
                         f"{known.cls.__qualname__}; pass another name=")
    entry = _UserType(cls, key, encode, decode)
    _BY_CLASS[cls] = entry
    _BY_NAME[key] = entry


def _register_procflow_types() -> None:
    """procflow's own data types that are no pydantic model: the live message list and
    the stream chunks (a processor workflow's envelope holds them)."""
    from procflow.messages import Chunk, MessageList

    register_type(MessageList, MessageList.to_json, MessageList.from_json,
                  name="procflow.MessageList")
    register_type(Chunk, Chunk.to_dict, Chunk.from_dict, name="procflow.Chunk")


def _type_name(value: Any) -> str:
    cls = type(value)
    return cls.__qualname__ if cls.__module__ == "builtins" else \
        f"{cls.__module__}.{cls.__qualname__}"


def _class_path(cls: type[Any]) -> str | None:
    """``"module:QualName"`` when the class can be found again by that name."""
    module = sys.modules.get(cls.__module__)
    found: Any = module
    for part in cls.__qualname__.split("."):
        found = getattr(found, part, None)
    return f"{cls.__module__}:{cls.__qualname__}" if found is cls else None


def _find_class(path: Any) -> type[Any] | None:
    if not isinstance(path, str) or ":" not in path:
        return None
    module_name, _, qualname = path.partition(":")
    found: Any = sys.modules.get(module_name)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found if isinstance(found, type) else None


# --------------------------------------------------------------------------- encoding


class _Encoder:
    """One encoding pass; ``blobs`` collects large strings and bytes (see ``blob``)."""

    __slots__ = ("blob_size", "blobs", "digests")

    def __init__(self, blob_size: int | None,
                 digests: dict[int, tuple[Any, str]] | None = None) -> None:
        self.blob_size = blob_size
        self.blobs: dict[str, str | bytes] = {}
        self.digests = digests

    def value(self, value: Any, depth: int) -> Any:
        cls = type(value)
        if cls is str:
            if self.blob_size is not None and len(value) > self.blob_size:
                return self.blob("str", value)
            if not value.isascii():  # (O(1): CPython keeps the flag)
                _check_text(value)
            return value
        if cls is int or cls is bool or value is None:
            return value
        if cls is float:
            return value if math.isfinite(value) else {TAG: "float", "v": repr(value)}
        if depth >= MAX_DEPTH and (cls in _CONTAINERS or isinstance(value, BaseModel)):
            raise UnstorableValueError(
                _type_name(value), f"it nests deeper than {MAX_DEPTH} levels (or holds "
                "itself)")
        if cls is list:
            return self.items(value, depth)
        if cls is dict:
            return self.mapping(value, depth)
        if cls is tuple:
            return {TAG: "tuple", "v": self.items(value, depth)}
        encode = _SCALARS.get(cls)
        if encode is not None:
            return encode(self, value)
        if cls is set or cls is frozenset:
            return {TAG: cls.__name__, "v": self.items(_sorted(value), depth)}
        return self.other(value, depth)

    def items(self, values: Any, depth: int) -> list[Any]:
        out = []
        for index, item in enumerate(values):
            try:
                out.append(self.value(item, depth + 1))
            except UnstorableValueError as exc:
                exc.parts.append(f"[{index}]")
                raise
        return out

    def mapping(self, value: dict[Any, Any], depth: int) -> Any:
        if all(type(key) is str for key in value) and TAG not in value:
            out = {}
            for key, item in value.items():
                try:
                    if not key.isascii():
                        _check_text(key, key=True)
                    out[key] = self.value(item, depth + 1)
                except UnstorableValueError as exc:
                    exc.parts.append(f".{key}" if key.isidentifier() else f"[{key!r}]")
                    raise
            return out
        pairs = []
        for key, item in value.items():
            try:
                pairs.append([self.value(key, depth + 1), self.value(item, depth + 1)])
            except UnstorableValueError as exc:
                exc.parts.append(f"[{key!r}]")
                raise
        return {TAG: "dict", "v": pairs}

    def other(self, value: Any, depth: int) -> Any:
        cls = type(value)
        user = _BY_CLASS.get(cls) or next(
            (entry for base in cls.__mro__[1:] if (entry := _BY_CLASS.get(base))), None)
        if user is not None:
            return {TAG: "user", "type": user.name, "module": user.cls.__module__,
                    "v": self.value(user.encode(value), depth + 1)}
        if isinstance(value, BaseModel):
            fields = {name: getattr(value, name) for name in type(value).model_fields}
            if value.model_extra:
                fields.update(value.model_extra)
            return {TAG: "model", "cls": _class_path(cls), "v": self.mapping(fields, depth)}
        if isinstance(value, enum.Enum):
            path = _class_path(cls)
            if path is None:
                raise UnstorableValueError(_type_name(value), "its enum class cannot be "
                                           "found by module and name; define it at module "
                                           "level")
            return {TAG: "enum", "cls": path, "v": self.value(value.value, depth + 1)}
        raise UnstorableValueError(
            _type_name(value), "storage cannot keep this type; return a pydantic model or "
            "a supported value, or call procflow.storage.register_type() for it")

    def blob(self, kind: str, value: str | bytes | bytearray) -> Any:
        import hashlib

        digests = self.digests
        if digests is not None and kind != "bytearray":
            # The same (immutable) object again, e.g. a value passed on unchanged: its
            # digest is known and its content was collected the first time.
            known = digests.get(id(value))
            if known is not None and known[0] is value:
                self.blobs[known[1]] = value if isinstance(value, str) else bytes(value)
                return {TAG: "blob", "kind": kind, "sha256": known[1]}
        try:
            data = value.encode() if isinstance(value, str) else bytes(value)
        except UnicodeEncodeError as exc:
            raise UnstorableValueError("str", f"the text is not valid Unicode: {exc}") from exc
        # The kind is hashed too: the same bytes as text and as bytes are two blobs.
        digest = hashlib.sha256(kind.encode() + b"\0" + data).hexdigest()
        self.blobs[digest] = value if isinstance(value, str) else data
        if digests is not None and kind != "bytearray":
            digests[id(value)] = (value, digest)
        return {TAG: "blob", "kind": kind, "sha256": digest}


_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_text(text: str, *, key: bool = False) -> None:
    """Refuse text UTF-8 cannot encode: a lone surrogate, as ``os.fsdecode`` and
    ``surrogateescape`` give for bytes that are not UTF-8 (``"ok \\udcff"``). Such text
    is refused rather than stored in an escaped form: read back, it would not be the
    same string.

    Raises:
        UnstorableValueError: ``text`` holds a lone surrogate.
    """
    found = _SURROGATE.search(text)
    if found is not None:
        what = "mapping key" if key else "text"
        raise UnstorableValueError(
            "str", f"the {what} holds a lone surrogate ({found.group()!r} at index "
            f"{found.start()}), which UTF-8 cannot encode (bytes that are not UTF-8, "
            "decoded with surrogateescape?); decode it properly or pass bytes")


def _sorted(values: Any) -> list[Any]:
    """A set's members in a stable order (sorted when they sort, else as they come)."""
    try:
        return sorted(values)
    except TypeError:
        return list(values)


def _bytes(encoder: _Encoder, value: bytes | bytearray) -> Any:
    if encoder.blob_size is not None and len(value) > encoder.blob_size:
        return encoder.blob(type(value).__name__, value)
    return {TAG: type(value).__name__, "v": base64.b64encode(value).decode("ascii")}


def _datetime(encoder: _Encoder, value: datetime) -> Any:
    stored: dict[str, Any] = {TAG: "datetime", "v": value.isoformat()}
    if isinstance(value.tzinfo, ZoneInfo):
        stored["tz"] = value.tzinfo.key
    if value.fold:
        stored["fold"] = 1
    return stored


_SCALARS: Final[dict[type[Any], Callable[[_Encoder, Any], Any]]] = {
    bytes: _bytes,
    bytearray: _bytes,
    datetime: _datetime,
    date: lambda _, v: {TAG: "date", "v": v.isoformat()},
    time: lambda _, v: {TAG: "time", "v": v.isoformat(), **({"fold": 1} if v.fold else {})},
    timedelta: lambda _, v: {TAG: "timedelta", "v": [v.days, v.seconds, v.microseconds]},
    Decimal: lambda _, v: {TAG: "decimal", "v": str(v)},
    UUID: lambda _, v: {TAG: "uuid", "v": str(v)},
}
_CONTAINERS: Final = frozenset({list, dict, tuple, set, frozenset})


def encode_value(value: Any, *, blob_size: int | None = None,
                 blobs: dict[str, str | bytes] | None = None,
                 digests: dict[int, tuple[Any, str]] | None = None) -> Any:
    """``value`` as JSON-ready data that ``decode_value`` turns back into it.

    Args:
        value: What to encode.
        blob_size: Strings and bytes longer than this are stored as references to
            content-addressed blobs (``None``: inline everything).
        blobs: Where the blobs' contents go (by sha256 hex digest): the string itself,
            or the bytes.
        digests: A cache of the digests of large strings and bytes by identity, kept
            across calls so an unchanged value is not hashed again.

    Raises:
        UnstorableValueError: The value (or something inside it) cannot be stored.
    """
    cls = type(value)
    if value is None or cls is int or cls is bool:  # nothing to walk or refuse
        return value
    encoder = _Encoder(blob_size, digests)
    out = encoder.value(value, 0)
    if blobs is not None:
        blobs.update(encoder.blobs)
    return out


# --------------------------------------------------------------------------- decoding


class UndecodableValueError(ValueError):
    """Stored data that is not what ``encode_value`` writes (a damaged row)."""


def _fail(message: str) -> UndecodableValueError:
    return UndecodableValueError(message)


def _decode_tagged(data: dict[str, Any], blobs: Any) -> Any:
    tag = data.get(TAG)
    raw: Any = data.get("v")
    try:
        if tag == "tuple":
            return tuple(decode_value(item, blobs) for item in raw)
        if tag == "set" or tag == "frozenset":
            items = [decode_value(item, blobs) for item in raw]
            return set(items) if tag == "set" else frozenset(items)
        if tag == "dict":
            return {decode_value(k, blobs): decode_value(v, blobs) for k, v in raw}
        if tag == "float":
            return float(raw)
        if tag in ("bytes", "bytearray"):
            decoded = base64.b64decode(raw, validate=True)
            return decoded if tag == "bytes" else bytearray(decoded)
        if tag == "blob":
            return _from_blob(data, blobs)
        if tag == "datetime":
            moment = datetime.fromisoformat(raw)
            if "tz" in data:
                moment = moment.astimezone(ZoneInfo(data["tz"]))
            return moment.replace(fold=1) if data.get("fold") else moment
        if tag == "date":
            return date.fromisoformat(raw)
        if tag == "time":
            clock = time.fromisoformat(raw)
            return clock.replace(fold=1) if data.get("fold") else clock
        if tag == "timedelta":
            days, seconds, micros = raw
            return timedelta(days=days, seconds=seconds, microseconds=micros)
        if tag == "decimal":
            return Decimal(raw)
        if tag == "uuid":
            return UUID(raw)
        if tag == "model":
            return _model(data, blobs)
        if tag == "enum":
            cls = _find_class(data.get("cls"))
            if cls is None:
                raise _fail(f"enum class {data.get('cls')!r} is not imported")
            return cls(decode_value(raw, blobs))
        if tag == "user":
            user = _registered(data)
            if user is None:
                raise _fail(f"type {data.get('type')!r} is not registered; call "
                            "procflow.storage.register_type() before loading")
            return user.decode(decode_value(raw, blobs))
    except UndecodableValueError:
        raise
    except Exception as exc:
        raise _fail(f"bad {tag!r} value: {type(exc).__name__}: {exc}") from exc
    raise _fail(f"unknown tag {tag!r}")


def _registered(data: dict[str, Any]) -> _UserType | None:
    """The registered type of a stored value; procflow's own types register themselves
    when their module is imported, so that module is imported (never a user module)."""
    name, module = data.get("type"), data.get("module")
    if not isinstance(name, str):
        return None
    if name not in _BY_NAME and isinstance(module, str) and module.startswith("procflow."):
        importlib.import_module(module)
    return _BY_NAME.get(name)


def _model(data: dict[str, Any], blobs: Any) -> Any:
    fields = decode_value(data.get("v"), blobs)
    if not isinstance(fields, dict):
        raise _fail("a model's fields are not an object")
    cls = _find_class(data.get("cls"))
    if cls is None or not issubclass(cls, BaseModel):
        return fields  # validated against the step's schema by the runtime
    known = cls.model_fields
    values = {k: v for k, v in fields.items() if k in known}
    model = cls.model_construct(_fields_set=set(values), **values)
    extra = {k: v for k, v in fields.items() if k not in known}
    if extra and model.__pydantic_extra__ is not None:
        model.__pydantic_extra__.update(extra)
    return model


@dataclasses.dataclass(frozen=True, slots=True)
class UnreadBlob:
    """A large value a listing did not read (``SKIP_BLOBS``); load the run to get it.

    Attributes:
        sha256: The content's digest.
        kind: "str", "bytes" or "bytearray".
    """

    sha256: str
    kind: str


SKIP_BLOBS: Final = object()
"""Pass as ``blobs`` to decode blob references as ``UnreadBlob`` (run listings)."""


def _from_blob(data: dict[str, Any], blobs: Any) -> Any:
    digest = data.get("sha256")
    if blobs is SKIP_BLOBS:
        return UnreadBlob(str(digest), str(data.get("kind")))
    content = None if blobs is None else blobs.get(digest)
    if content is None:
        raise _fail(f"blob {digest!r} is missing")
    kind = data.get("kind")
    if kind == "str" and isinstance(content, str):
        return content
    if kind in ("bytes", "bytearray") and isinstance(content, bytes | bytearray):
        return bytes(content) if kind == "bytes" else bytearray(content)
    raise _fail(f"blob {digest!r} does not hold {kind!r} content")


def decode_value(data: Any, blobs: Any = None) -> Any:
    """The value ``encode_value`` turned into ``data``.

    Args:
        data: Parsed JSON.
        blobs: A mapping of sha256 digest to blob content, for blob references.

    Raises:
        UndecodableValueError: ``data`` holds a tag that cannot be decoded (a damaged
            row, a missing blob, an unregistered type).
    """
    cls = type(data)
    if cls is dict:
        if TAG in data:
            return _decode_tagged(data, blobs)
        return {key: decode_value(item, blobs) for key, item in data.items()}
    if cls is list:
        return [decode_value(item, blobs) for item in data]
    return data


def blob_refs(data: Any, found: set[str]) -> None:
    """Add the blob digests referenced in parsed ``data`` to ``found``."""
    cls = type(data)
    if cls is dict:
        if data.get(TAG) == "blob":
            digest = data.get("sha256")
            if isinstance(digest, str):
                found.add(digest)
            return
        for item in data.values():
            blob_refs(item, found)
    elif cls is list:
        for item in data:
            blob_refs(item, found)


_register_procflow_types()
