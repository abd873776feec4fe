"""``ResponseCache``: answer repeated model calls from a ``ServerCache``.

An *input* processor working at the request/response boundary of every model call of
the agent loop: ``process_llm_request`` derives a key from the provider-facing prompt
(after memory and earlier input processors changed it) and, on a hit, answers with the
stored chunks, which the loop replays with ``from_cache=True``; ``process_llm_response``
writes a finished call's chunks. Each step of a tool loop is cached on its own.

Keys are ``procflow:agent-response:<agent_id>:<scope part>:<hash>`` where the scope
part is ``shared`` or ``scope-<sha256(scope)>`` (all 64 hex digits: tenants are never
told apart by a short digest), and ``hash`` is the first 32 hex digits of the SHA-256 of
the key inputs as canonical JSON (sorted keys; bytes replaced by their digest), or
``custom:<key>`` for a fixed key or key function. The scope defaults to the request's
resource id, so one tenant never reads another's entries. Per-call overrides are read
only from what ``ResponseCache.context()``/``apply_context()`` wrote: any other value
under ``RESPONSE_CACHE_CONTEXT_KEY`` (a dict from user data, say) cannot set a scope.

Cache trouble never fails a request: a backend error or a corrupted entry is logged
as a warning and the call goes to the model; a key function that raises falls back
to the default key.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from procflow.cache.base import ServerCache, check_ttl
from procflow.context import RequestContext
from procflow.messages import Finish
from procflow.models.fallback import FallbackModel
from procflow.processors.args import (
    ProcessLLMRequestArgs,
    ProcessLLMRequestResult,
    ProcessLLMResponseArgs,
)
from procflow.processors.base import Processor
from procflow.processors.builtin.cache.codec import (
    canonical,
    decode_chunks,
    encode_chunks,
    not_cacheable,
)

__all__ = [
    "DEFAULT_RESPONSE_CACHE_AGENT_ID",
    "DEFAULT_RESPONSE_CACHE_TTL_SECONDS",
    "RESPONSE_CACHE_CONTEXT_KEY",
    "RESPONSE_CACHE_KEY_NAMESPACE",
    "ResponseCache",
    "ResponseCacheContextOptions",
    "ResponseCacheKey",
    "ResponseCacheKeyInputs",
    "build_response_cache_key",
]

logger = logging.getLogger("procflow.processors.response_cache")

DEFAULT_RESPONSE_CACHE_TTL_SECONDS: Final = 300
"""Seconds a cached response lives by default (5 minutes)."""

DEFAULT_RESPONSE_CACHE_AGENT_ID: Final = "procflow-response-cache"
"""The default ``agent_id``: the logical namespace of the keys a ``ResponseCache`` writes."""

RESPONSE_CACHE_CONTEXT_KEY: Final = "procflow__responseCache"
"""The ``RequestContext`` key holding per-call overrides. Only values written by
``ResponseCache.context()`` and ``ResponseCache.apply_context()`` count (anything else
found there is ignored, with a warning); delete the key to drop the overrides
mid-pipeline."""

RESPONSE_CACHE_KEY_NAMESPACE: Final = "procflow:agent-response"
"""The first segment of every key a ``ResponseCache`` reads and writes."""

_PENDING: Final = "pending"  # state entry: the key and TTL a miss will write
_UNSAVED: Final = "unsaved"  # state entry: the responses to write once the run is accepted


class _Unset(enum.Enum):
    UNSET = enum.auto()


_UNSET: Final = _Unset.UNSET


@dataclass(frozen=True, slots=True)
class ResponseCacheKeyInputs:
    """What a cache key is derived from (and what a ``key`` function receives).

    Attributes:
        agent_id: The logical namespace (``ResponseCache(agent_id=...)``).
        scope: The tenant scope of this request; ``None`` when entries are shared.
        model: ``{"provider": ..., "model_id": ...}`` of the model about to be called.
        prompt: The provider-facing prompt (role/content dicts), exactly as it will be sent.
        step_number: The 0-based step of the agent loop (tool steps are > 0).
    """

    agent_id: str
    scope: str | None
    model: Mapping[str, Any]
    prompt: Sequence[Mapping[str, Any]]
    step_number: int


ResponseCacheKey: TypeAlias = str | Callable[[ResponseCacheKeyInputs], str | Awaitable[str]]
"""A fixed key, or a (sync or async) function of the key inputs returning one."""


@dataclass(frozen=True, slots=True)
class ResponseCacheContextOptions:
    """Per-call overrides carried in a ``RequestContext`` (unset fields change nothing).

    ``cache``, ``ttl`` and ``agent_id`` cannot be overridden per call: they belong to
    the processor instance.

    Attributes:
        key: A fixed key or key function for this call.
        scope: The tenant scope for this call (``None``: shared).
        bust: Skip the read (the response is still written).
    """

    key: ResponseCacheKey | _Unset = _UNSET
    scope: str | _Unset | None = _UNSET
    bust: bool | _Unset = _UNSET

    def merged(self, newer: ResponseCacheContextOptions) -> ResponseCacheContextOptions:
        """These options with every field ``newer`` sets replaced."""
        changes = {f.name: getattr(newer, f.name) for f in dataclasses.fields(newer)
                   if getattr(newer, f.name) is not _UNSET}
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, slots=True)
class _IssuedOptions(ResponseCacheContextOptions):
    """Overrides written by ``ResponseCache.apply_context`` (the only ones read back):
    a scope cannot come from request data that merely looks like options."""


def build_response_cache_key(inputs: ResponseCacheKeyInputs | Mapping[str, Any]) -> str:
    """The default, deterministic cache key of ``inputs``.

    Equal inputs give equal keys in every process: mapping order does not matter,
    tuples count as lists, and bytes (inline media) count by their SHA-256.

    Args:
        inputs: A ``ResponseCacheKeyInputs``, or a mapping with its five fields.

    Returns:
        ``procflow:agent-response:<agent_id>:<shared | scope-<sha256 of scope>>:<32 hex
        digits>``.

    Raises:
        ValueError: A mapping lacks one of the fields.
        TypeError: ``agent_id`` or ``scope`` has the wrong type.
    """
    given = _as_inputs(inputs)
    document = {"agent_id": given.agent_id, "scope": given.scope, "model": given.model,
                "prompt": given.prompt, "step_number": given.step_number}
    text = json.dumps(canonical(document), sort_keys=True, separators=(",", ":"))
    return _namespace(given.agent_id, given.scope) + hashlib.sha256(
        text.encode("ascii")).hexdigest()[:32]


class ResponseCache(Processor):
    """Caches model responses per prompt, model, step and tenant in a ``ServerCache``.

    Register it in ``input_processors`` (last, so the key covers every prompt change
    made before it). A hit replays the stored chunks instead of calling the model
    (``FullOutput.steps[i].from_cache`` is ``True``). A miss writes the call's chunks
    once it finished with "stop", "length" or "tool-calls" and carried no "error" or
    "tripwire" chunk, when the run ends accepted: an answer an output processor
    rejected (a tripwire, or ``abort(retry=True)``) or a failed run is not stored.

    Example::

        cache = InMemoryServerCache()
        agent = Agent(id="search", model=model,
                      input_processors=[ResponseCache(cache, ttl=600)])
        await agent.generate("What is the capital of France?")   # the model answers
        await agent.generate("What is the capital of France?")   # replayed
        await agent.generate("What is the capital of France?",   # refreshed
                             request_context=ResponseCache.context(bust=True))

    Args:
        cache: The backend (``InMemoryServerCache``, ``RedisCache`` or a subclass).
        ttl: Seconds an entry lives (> 0); ``None`` uses the backend's default TTL.
        scope: The tenant scope mixed into every key; ``None`` shares entries between
            all callers. Not given: the request's resource id (``RESOURCE_ID_KEY``),
            and shared entries when a request has none.
        key: A fixed key, or a (sync or async) function of ``ResponseCacheKeyInputs``
            returning one, instead of the default hash. It is still namespaced by
            ``agent_id`` and scope; a function that raises or returns no str falls
            back to the default key.
        bust: Skip every read (responses are still written).
        agent_id: The logical namespace of the keys; set it to the agent's id to keep
            agents from sharing entries.

    Raises:
        TypeError: ``cache`` is not a ``ServerCache`` or an option has the wrong type.
        ValueError: ``ttl`` is not positive, or ``key``/``agent_id`` is an empty str.
    """

    id = "response-cache"
    description = "answers repeated model calls from a cache"

    def __init__(self, cache: ServerCache, *,
                 ttl: float | None = DEFAULT_RESPONSE_CACHE_TTL_SECONDS,
                 scope: str | _Unset | None = _UNSET, key: ResponseCacheKey | None = None,
                 bust: bool = False, agent_id: str = DEFAULT_RESPONSE_CACHE_AGENT_ID) -> None:
        if not isinstance(cache, ServerCache):
            raise TypeError(f"ResponseCache: cache must be a ServerCache (InMemoryServerCache, "
                            f"RedisCache or a subclass), got {type(cache).__name__}")
        if not isinstance(agent_id, str) or not agent_id:
            raise ValueError(f"ResponseCache: agent_id must be a non-empty str, got {agent_id!r}")
        self.cache = cache
        self.ttl = check_ttl(ttl, "ResponseCache: ttl")
        self.agent_id = agent_id
        options = _checked_options(key=_UNSET if key is None else key, scope=scope, bust=bust)
        self._defaults = options

    @property
    def scope(self) -> str | _Unset | None:
        """The configured scope (unset: the request's resource id)."""
        return self._defaults.scope

    @property
    def key(self) -> ResponseCacheKey | None:
        """The configured fixed key or key function (``None``: the default hash)."""
        return None if self._defaults.key is _UNSET else self._defaults.key

    @property
    def bust(self) -> bool:
        """Whether every read is skipped."""
        return self._defaults.bust is True

    @staticmethod
    def context(*, key: ResponseCacheKey | _Unset = _UNSET,
                scope: str | _Unset | None = _UNSET,
                bust: bool | _Unset = _UNSET) -> RequestContext:
        """A new ``RequestContext`` carrying per-call overrides.

        Example::

            await agent.generate("hello", request_context=ResponseCache.context(bust=True))

        Args:
            key: A fixed key or key function for this call.
            scope: The tenant scope for this call (``None``: shared).
            bust: Skip the read for this call (the response is still written).

        Raises:
            TypeError: An option has the wrong type.
        """
        return ResponseCache.apply_context(RequestContext(), key=key, scope=scope, bust=bust)

    @staticmethod
    def apply_context(request_context: RequestContext, *,
                      key: ResponseCacheKey | _Unset = _UNSET,
                      scope: str | _Unset | None = _UNSET,
                      bust: bool | _Unset = _UNSET) -> RequestContext:
        """Merge per-call overrides into ``request_context`` (options set earlier and not
        given now are kept).

        Args:
            request_context: The context to change.
            key: A fixed key or key function for this call.
            scope: The tenant scope for this call (``None``: shared).
            bust: Skip the read for this call (the response is still written).

        Returns:
            ``request_context`` itself, for chaining.

        Raises:
            TypeError: An option has the wrong type.
        """
        newer = _checked_options(key=key, scope=scope, bust=bust)
        current = _overrides_in(request_context) or _IssuedOptions()
        request_context[RESPONSE_CACHE_CONTEXT_KEY] = current.merged(newer)
        return request_context

    async def process_llm_request(self, args: ProcessLLMRequestArgs) -> Any:
        """Resolve this call's key; return the cached chunks on a hit, else ``None``."""
        args.state.pop(_PENDING, None)
        unsaved = args.state.get(_UNSAVED)
        if unsaved and unsaved[-1]["retry_count"] != args.retry_count:
            unsaved.pop()  # a processor asked for a retry: that answer was rejected
        options = self._options_for(args.request_context)
        try:
            scope = (options.scope if options.scope is not _UNSET
                     else args.request_context.resource_id)
        except TypeError as exc:
            logger.warning("ResponseCache %r: no cache for this call: %s", self.agent_id, exc)
            return None
        # A FallbackModel's answers are kept under the model that gave them: each of
        # its models has a key, read in order; the answer is written under its own.
        models = args.model.models if isinstance(args.model, FallbackModel) else (args.model,)
        keys: dict[str, str] = {}
        for model in models:
            inputs = ResponseCacheKeyInputs(self.agent_id, scope, _model_info(model),
                                            args.prompt, args.step_number)
            keys.setdefault(_model_name(model), await self._resolve_key(options.key, inputs))
        key = next(iter(keys.values()))
        args.state[_PENDING] = {"key": key, "keys": keys, "ttl": self.ttl,
                                "step_number": args.step_number}
        if options.bust is True:
            return None
        stored = None
        for key in dict.fromkeys(keys.values()):
            try:
                stored = await self.cache.get(key)
            except Exception as exc:
                args.state.pop(_PENDING, None)  # the backend is down: do not wait on it twice
                logger.warning("ResponseCache %r: reading key %r failed, calling the model "
                               "instead: %s: %s", self.agent_id, key, type(exc).__name__, exc)
                return None
            if stored is not None:
                break
        if stored is None:
            return None
        chunks = decode_chunks(stored)
        if chunks is None:
            logger.warning("ResponseCache %r: the entry under key %r is corrupted; treated "
                           "as a miss (the next response replaces it)", self.agent_id, key)
            return None
        args.state.pop(_PENDING, None)
        return ProcessLLMRequestResult(response=chunks)

    async def process_llm_response(self, args: ProcessLLMResponseArgs) -> None:
        """Write a finished, successful call's chunks under the key of its request."""
        pending = args.state.pop(_PENDING, None)
        if (args.from_cache or not isinstance(pending, dict)
                or pending.get("step_number") != args.step_number):
            return
        key = pending["key"]
        answered = next((c.metadata.get("model") for c in reversed(args.chunks)
                         if isinstance(c, Finish) and c.metadata), None)
        if isinstance(answered, str):
            key = pending.get("keys", {}).get(answered, key)
        why_not = not_cacheable(args.chunks)
        if why_not is not None:
            logger.debug("ResponseCache %r: not caching key %r: %s", self.agent_id, key, why_not)
            return
        value = encode_chunks(args.chunks)
        if value is None:
            logger.warning("ResponseCache %r: not caching key %r: the chunks are not "
                           "JSON-serialisable", self.agent_id, key)
            return
        # Written once the run is accepted: an answer an output processor rejects (a
        # tripwire, a retry) is never stored, so never served.
        unsaved = args.state.get(_UNSAVED)
        if unsaved is None:
            unsaved = args.state[_UNSAVED] = []
            args.context.on_accepted.append(lambda: self._save(unsaved))
        unsaved.append({"key": key, "value": value, "ttl": pending["ttl"],
                        "retry_count": args.retry_count})

    async def _save(self, unsaved: list[dict[str, Any]]) -> None:
        """Write the accepted run's responses."""
        for entry in unsaved:
            key = entry["key"]
            try:
                await self.cache.set(key, entry["value"], ttl_seconds=entry["ttl"])
            except Exception as exc:
                logger.warning("ResponseCache %r: writing key %r failed: %s: %s",
                               self.agent_id, key, type(exc).__name__, exc)
        unsaved.clear()

    def _options_for(self, request_context: RequestContext) -> ResponseCacheContextOptions:
        overrides = _overrides_in(request_context)
        return self._defaults if overrides is None else self._defaults.merged(overrides)

    async def _resolve_key(self, option: ResponseCacheKey | _Unset,
                           inputs: ResponseCacheKeyInputs) -> str:
        if option is _UNSET:
            return build_response_cache_key(inputs)
        if isinstance(option, str):
            return _namespace(inputs.agent_id, inputs.scope) + "custom:" + option
        try:
            made = option(inputs)
            if inspect.isawaitable(made):
                made = await made
        except Exception as exc:
            logger.warning("ResponseCache %r: the key function raised %s: %s; using the "
                           "default key", self.agent_id, type(exc).__name__, exc)
            return build_response_cache_key(inputs)
        if not isinstance(made, str) or not made:
            logger.warning("ResponseCache %r: the key function returned %r, not a non-empty "
                           "str; using the default key", self.agent_id, made)
            return build_response_cache_key(inputs)
        return _namespace(inputs.agent_id, inputs.scope) + "custom:" + made


def _checked_options(*, key: Any, scope: Any, bust: Any) -> ResponseCacheContextOptions:
    if key is not _UNSET and not (callable(key) or isinstance(key, str)):
        raise TypeError(f"ResponseCache: key must be a str or a function of "
                        f"ResponseCacheKeyInputs, got {type(key).__name__}")
    if isinstance(key, str) and not key:
        raise ValueError("ResponseCache: key must not be empty")
    if scope is not _UNSET and scope is not None and not isinstance(scope, str):
        raise TypeError(f"ResponseCache: scope must be a str or None (shared), "
                        f"got {type(scope).__name__}")
    if bust is not _UNSET and not isinstance(bust, bool):
        raise TypeError(f"ResponseCache: bust must be a bool, got {bust!r}")
    return ResponseCacheContextOptions(key=key, scope=scope, bust=bust)


def _overrides_in(request_context: MutableMapping[str, Any]
                  ) -> ResponseCacheContextOptions | None:
    found = request_context.get(RESPONSE_CACHE_CONTEXT_KEY)
    if found is None or type(found) is _IssuedOptions:
        return found
    # A dict (request data copied into the context, a restored snapshot) or options
    # built by hand: none may choose a tenant scope.
    logger.warning("ResponseCache: ignoring request context entry %r: only overrides "
                   "written by ResponseCache.context()/apply_context() count, got %s",
                   RESPONSE_CACHE_CONTEXT_KEY, type(found).__name__)
    return None


def _as_inputs(inputs: ResponseCacheKeyInputs | Mapping[str, Any]) -> ResponseCacheKeyInputs:
    if isinstance(inputs, ResponseCacheKeyInputs):
        given = inputs
    else:
        names = [f.name for f in dataclasses.fields(ResponseCacheKeyInputs)]
        missing = [n for n in names if n not in inputs]
        if missing:
            raise ValueError(f"response cache key inputs lack {missing}; expected the "
                             f"fields {names}, got {sorted(inputs)}")
        given = ResponseCacheKeyInputs(**{n: inputs[n] for n in names})
    if not isinstance(given.agent_id, str):
        raise TypeError(f"agent_id must be a str, got {type(given.agent_id).__name__}")
    if given.scope is not None and not isinstance(given.scope, str):
        raise TypeError(f"scope must be a str or None, got {type(given.scope).__name__}")
    return given


def _namespace(agent_id: str, scope: str | None) -> str:
    if scope is None:
        return f"{RESPONSE_CACHE_KEY_NAMESPACE}:{agent_id}:shared:"
    digest = hashlib.sha256(scope.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{RESPONSE_CACHE_KEY_NAMESPACE}:{agent_id}:scope-{digest}:"


def _model_name(model: Any) -> str:
    info = _model_info(model)
    return f"{info['provider']}/{info['model_id']}"


def _model_info(model: Any) -> dict[str, Any]:
    if isinstance(model, str):
        provider, _, model_id = model.rpartition("/")
        return {"provider": provider or None, "model_id": model_id}
    return {"provider": getattr(model, "provider", None),
            "model_id": getattr(model, "model_id", None)}
