"""Anthropic's Messages API over httpx, streamed (SSE)."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, final

import httpx

from procflow.errors import APICallError
from procflow.messages import Chunk, Finish, ReasoningDelta, TextDelta, ToolCallChunk
from procflow.models.base import ModelRequest, ToolSpec
from procflow.models.hosted import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_MAX_RETRIES,
    DEFAULT_MAX_RETRY_WAIT,
    HostedModel,
    StreamDecoder,
)
from procflow.models.http import (
    base64_text,
    image_media_type,
    joined_text,
    parse_tool_args,
    redact,
    to_text,
)
from procflow.records import Usage

__all__ = ["AnthropicModel"]

DEFAULT_BASE_URL: Final = "https://api.anthropic.com"
API_VERSION: Final = "2023-06-01"
_PROVIDER: Final = "anthropic"
_RESERVED = frozenset({"model", "messages", "stream", "system", "tools", "tool_choice"})
_STOP_REASONS: Final = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
                        "tool_use": "tool-calls", "refusal": "content-filter"}
_PREFILL_ERROR = re.compile(r"prefill|final message must be a user message|must end with a "
                            r"user message", re.IGNORECASE)
_RETRYABLE_STREAM_ERRORS = frozenset({"overloaded_error", "api_error", "rate_limit_error",
                                      "timeout_error"})


@final
class AnthropicModel(HostedModel):
    """A Claude model behind Anthropic's Messages API (``POST /v1/messages``).

    The API key and base URL come from the arguments, else from ``ANTHROPIC_API_KEY``
    and ``ANTHROPIC_BASE_URL`` (default ``https://api.anthropic.com``), read at call
    time. A missing key is an error at call time, never a silent fallback.

    Call settings: ``max_tokens`` (else the model's), ``temperature``, ``top_p`` and
    ``stop`` (sent as ``stop_sequences``); ``seed`` is ignored (the API has none) and
    ``response_format`` other than ``{"type": "text"}`` is refused; any other setting
    (``top_k``, ``thinking``, ``metadata``...) is passed through verbatim.

    Args:
        model_id: The model's id, e.g. ``"claude-sonnet-4-5"``.
        api_key: The API key (else ``ANTHROPIC_API_KEY``).
        base_url: The API root (else ``ANTHROPIC_BASE_URL``).
        client: The client to send with (else one shared per event-loop run).
        timeout: Seconds for each phase of a request, overriding the client's timeouts.
        max_tokens: The answer's token budget when the call settings give none
            (the API requires one).
        headers: Extra request headers (e.g. ``anthropic-beta``); values of
            credential-like headers are redacted from errors like the key.
        max_retries: How calls are retried and bounded (see ``HostedModel``).
        idle_timeout: How calls are retried and bounded (see ``HostedModel``).
        deadline: How calls are retried and bounded (see ``HostedModel``).
        max_response_bytes: How calls are retried and bounded (see ``HostedModel``).
        max_retry_wait: How calls are retried and bounded (see ``HostedModel``).

    Raises:
        ValueError: ``model_id`` is empty or ``max_tokens`` is not positive.
    """

    PROVIDER = _PROVIDER
    KEY_ENV = "ANTHROPIC_API_KEY"
    URL_ENV = "ANTHROPIC_BASE_URL"
    DEFAULT_URL = DEFAULT_BASE_URL
    EXAMPLE_ID = "claude-sonnet-4-5"
    ENDPOINT = "/v1/messages"
    KEEPALIVE_EVENTS = frozenset({"ping"})
    __slots__ = ("_max_tokens",)

    def __init__(self, model_id: str, *, api_key: str | None = None,
                 base_url: str | None = None, client: httpx.AsyncClient | None = None,
                 timeout: float | None = None, max_tokens: int = 1024,
                 headers: Mapping[str, str] | None = None,
                 max_retries: int = DEFAULT_MAX_RETRIES,
                 idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
                 deadline: float | None = None,
                 max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
                 max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT) -> None:
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
        super().__init__(model_id, api_key=api_key, base_url=base_url, client=client,
                         timeout=timeout, headers=headers, max_retries=max_retries,
                         idle_timeout=idle_timeout, deadline=deadline,
                         max_response_bytes=max_response_bytes,
                         max_retry_wait=max_retry_wait)
        self._max_tokens = max_tokens

    def _auth_headers(self, key: str) -> dict[str, str]:
        return {"x-api-key": key, "anthropic-version": API_VERSION}

    def _payload(self, request: ModelRequest) -> dict[str, Any]:
        return build_payload(self._model_id, request, max_tokens=self._max_tokens)

    def _decoder(self, secrets: list[str], request: ModelRequest) -> _StreamState:
        schema = request.output_schema
        return _StreamState(secrets, output_tool=None if schema is None else schema.name)

    def _repair(self, payload: dict[str, Any], err: APICallError) -> dict[str, Any] | None:
        """Models that refuse an answer prefilled by a final assistant message ("does
        not support assistant message prefill") get a hidden user turn asking them to
        continue, as ``PrefillErrorHandler`` adds (on by default, here)."""
        messages = payload.get("messages") or []
        if err.status_code != 400 or not _PREFILL_ERROR.search(str(err)) or not messages \
                or messages[-1].get("role") != "assistant":
            return None
        return {**payload, "messages": [*messages, {"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>continue</system-reminder>"}]}]}


# -- request ------------------------------------------------------------------------


def build_payload(model_id: str, request: ModelRequest, *, max_tokens: int) -> dict[str, Any]:
    """The JSON body of a streamed Messages API call for ``request``.

    Raises:
        ValueError: ``tool_choice`` or a setting is invalid.
        APICallError: The prompt holds content the API cannot take.
    """
    system, messages = convert_prompt(request.prompt)
    payload: dict[str, Any] = {"model": model_id, "max_tokens": max_tokens,
                               "messages": messages, "stream": True}
    if system:
        payload["system"] = system
    choice = _tool_choice(request.tool_choice)
    tools = [_tool(spec) for spec in request.tools or ()] if choice != "none" else []
    schema = request.output_schema
    if schema is not None:
        # The answer is the input of a tool the model must call (its JSON streams as text).
        choice = {"type": "any"} if tools else {"type": "tool", "name": schema.name}
        tools.append({"name": schema.name, "input_schema": schema.schema,
                      "description": schema.description or "Give the final answer."})
    if tools:
        payload["tools"] = tools
        if choice is not None:
            payload["tool_choice"] = choice
    payload.update(_settings(request.settings))
    return payload


def _tool(spec: ToolSpec) -> dict[str, Any]:
    return {"name": spec.name, "description": spec.description,
            "input_schema": spec.parameters}


def _tool_choice(choice: Any) -> Any:
    if choice is None or choice == "none":
        return choice
    if choice == "auto":
        return {"type": "auto"}
    if choice == "required":
        return {"type": "any"}
    if (isinstance(choice, Mapping) and choice.get("type") == "tool"
            and isinstance(choice.get("tool_name"), str)):
        return {"type": "tool", "name": choice["tool_name"]}
    raise ValueError(f"unknown tool_choice {choice!r}; expected 'auto', 'none', 'required' "
                     "or {'type': 'tool', 'tool_name': <name>}")


def _settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if key in _RESERVED:
            raise ValueError(f"setting {key!r} is set by AnthropicModel itself; reserved "
                             f"settings: {sorted(_RESERVED)}")
        if value is None or key == "seed":
            continue
        if key == "response_format":
            if not (isinstance(value, Mapping) and value.get("type") == "text"):
                raise ValueError(f"AnthropicModel does not support response_format {value!r}; "
                                 "ask for JSON in the prompt or use a tool with a schema")
            continue
        if key == "stop":
            out["stop_sequences"] = [value] if isinstance(value, str) else list(value)
        else:
            out[key] = value
    return out


def convert_prompt(
    prompt: Sequence[Mapping[str, Any]],
) -> tuple[str | None, list[dict[str, Any]]]:
    """Turn a procflow prompt into Anthropic's top-level ``system`` and ``messages``.

    System messages are joined into ``system``; tool results become user
    ``tool_result`` blocks; consecutive messages of one role are merged, since the API
    wants user and assistant turns to alternate. Empty text is left out (the API
    refuses empty text blocks) and reasoning parts are not sent back.

    Raises:
        APICallError: A message holds content the API cannot take.
    """
    system: list[str] = []
    messages: list[dict[str, Any]] = []
    for entry in prompt:
        role, content = entry["role"], entry["content"]
        if role == "system":
            system.append(joined_text(content))
            continue
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        blocks = [b for b in (_block(role, p) for p in parts) if b is not None]
        api_role = "assistant" if role == "assistant" else "user"
        if not blocks:
            continue
        if messages and messages[-1]["role"] == api_role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": api_role, "content": blocks})
    return "\n\n".join(s for s in system if s) or None, messages


def _block(role: str, part: Mapping[str, Any]) -> dict[str, Any] | None:
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": part["text"]} if part["text"] else None
    if kind == "reasoning":
        return None
    if kind == "tool-call" and role == "assistant":
        return {"type": "tool_use", "id": part["tool_call_id"], "name": part["tool_name"],
                "input": dict(part.get("args") or {})}
    if kind == "tool-result":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part["tool_call_id"],
                                 "content": to_text(part["result"])}
        if part.get("is_error"):
            block["is_error"] = True
        return block
    if kind in ("image", "file") and role == "user":
        return _media_block(part)
    raise APICallError(f"Anthropic's Messages API cannot take a {kind!r} part in a "
                       f"{role!r} message")


def _media_block(part: Mapping[str, Any]) -> dict[str, Any]:
    media_type = str(part.get("media_type") or "")
    url, data = part.get("url"), part.get("data")
    is_image = part["type"] == "image" or media_type.startswith("image/")
    if is_image or media_type == "application/pdf":
        if url:
            source: dict[str, Any] = {"type": "url", "url": url}
        else:
            source = {"type": "base64", "data": base64_text(data or b""),
                      "media_type": image_media_type(part) if is_image else media_type}
        return {"type": "image" if is_image else "document", "source": source}
    if media_type.startswith("text/") and data is not None:
        raw = data if isinstance(data, bytes) else base64.b64decode(data)
        return {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                               "data": raw.decode("utf-8", errors="replace")}}
    raise APICallError(f"Anthropic's Messages API cannot take a {media_type or 'file'} file "
                       f"({'by URL' if url else 'as bytes'}); it takes images, PDFs and text")


# -- response -----------------------------------------------------------------------


@dataclass(slots=True)
class _Block:
    type: str
    id: str = ""
    name: str = ""
    start_input: dict[str, Any] = field(default_factory=dict)
    json: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _StreamState(StreamDecoder):
    """What a Messages API stream has said so far."""

    output_tool: str | None = None
    """The tool whose input is the answer (structured output): streamed as text."""
    stop_reason: str | None = None
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    blocks: dict[int, _Block] = field(default_factory=dict)
    answered: bool = False
    called: bool = False

    def feed(self, data: Mapping[str, Any]) -> list[Chunk]:
        """Take one event's JSON; return the chunks it yields now."""
        kind = data.get("type")
        if kind == "message_start":
            self._take_usage((data.get("message") or {}).get("usage") or {})
        elif kind == "content_block_start":
            return self._start(int(data.get("index", 0)), data.get("content_block") or {})
        elif kind == "content_block_delta":
            return self._delta(int(data.get("index", 0)), data.get("delta") or {})
        elif kind == "content_block_stop":
            return self._stop(int(data.get("index", 0)))
        elif kind == "message_delta":
            self.stop_reason = (data.get("delta") or {}).get("stop_reason") or self.stop_reason
            self._take_usage(data.get("usage") or {})
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            raise self._stream_error(data)
        return []  # "ping" and event types added later

    def _take_usage(self, usage: Mapping[str, Any]) -> None:
        if "input_tokens" in usage:
            self.input_tokens = sum(int(usage.get(name) or 0) for name in (
                "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
            self.cached_input_tokens = int(usage.get("cache_read_input_tokens") or 0)
        if "output_tokens" in usage:
            self.output_tokens = int(usage.get("output_tokens") or 0)

    def _start(self, index: int, block: Mapping[str, Any]) -> list[Chunk]:
        kind = str(block.get("type", ""))
        if kind == "tool_use" and block.get("name") == self.output_tool:
            kind = "answer"
            self.answered = True
        self.blocks[index] = _Block(type=kind, id=str(block.get("id", "")),
                                    name=str(block.get("name", "")),
                                    start_input=dict(block.get("input") or {}))
        if kind == "text" and block.get("text"):
            return [TextDelta(block["text"])]
        if kind == "thinking" and block.get("thinking"):
            return [ReasoningDelta(block["thinking"])]
        return []

    def _delta(self, index: int, delta: Mapping[str, Any]) -> list[Chunk]:
        kind = delta.get("type")
        if kind == "text_delta" and delta.get("text"):
            return [TextDelta(delta["text"])]
        if kind == "thinking_delta" and delta.get("thinking"):
            return [ReasoningDelta(delta["thinking"])]
        if kind == "input_json_delta":
            block = self.blocks.setdefault(index, _Block(type="tool_use"))
            if block.type == "answer":
                text = str(delta.get("partial_json", ""))
                block.json.append(text)
                return [TextDelta(text)] if text else []
            block.json.append(str(delta.get("partial_json", "")))
        return []

    def _stop(self, index: int) -> list[Chunk]:
        block = self.blocks.pop(index, None)
        if block is not None and block.type == "answer" and not block.json:
            return [TextDelta(to_text(block.start_input))]
        if block is None or block.type != "tool_use":
            return []
        self.called = True
        text = "".join(block.json)
        args = (parse_tool_args(text, tool_name=block.name, provider=_PROVIDER,
                                secrets=self.secrets) if text else block.start_input)
        return [ToolCallChunk(block.id, block.name, args)]

    def _stream_error(self, data: Mapping[str, Any]) -> APICallError:
        error = data.get("error") or {}
        kind = str(error.get("type") or "error") if isinstance(error, Mapping) else "error"
        detail = error.get("message") if isinstance(error, Mapping) else error
        return APICallError(redact(f"anthropic stream error ({kind}): {detail}", self.secrets),
                            body=redact(to_text(data), self.secrets),
                            is_retryable=kind in _RETRYABLE_STREAM_ERRORS)

    def finish(self) -> list[Chunk]:
        """The final "finish" chunk.

        Raises:
            APICallError: The stream ended before ``message_stop`` (retryable).
        """
        if not self.done and self.stop_reason is None:
            raise APICallError("anthropic closed the stream before the answer finished "
                               "(no message_stop)", is_retryable=True)
        usage = Usage(self.input_tokens, self.output_tokens,
                      self.input_tokens + self.output_tokens,
                      cached_input_tokens=self.cached_input_tokens)
        reason = _STOP_REASONS.get(self.stop_reason or "", "other")
        if reason == "tool-calls" and self.answered and not self.called:
            reason = "stop"  # the only tool called was the answer
        return [Finish(reason, usage)]
