"""OpenAI-compatible chat completions over httpx, streamed (SSE)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, final

import httpx

from procflow.errors import APICallError
from procflow.messages import Chunk, ReasoningDelta, TextDelta, ToolCallChunk
from procflow.models.base import ModelRequest, ToolSpec
from procflow.models.hosted import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_MAX_RETRIES,
    DEFAULT_MAX_RETRY_WAIT,
    HostedModel,
    StreamDecoder,
)
from procflow.models.hosts import OPENAI_COMPATIBLE
from procflow.models.http import (
    base64_text,
    image_media_type,
    joined_text,
    parse_tool_args,
    redact,
    to_text,
)

__all__ = ["OpenAIChatModel"]

DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"
_PROVIDER: Final = "openai"
_RESERVED = frozenset({"model", "messages", "stream", "stream_options", "tools", "tool_choice"})
_FINISH_REASONS: Final = {"stop": "stop", "length": "length", "tool_calls": "tool-calls",
                          "function_call": "tool-calls", "content_filter": "content-filter"}
_RETRYABLE_STREAM_ERRORS = ("server_error", "rate_limit", "overloaded", "timeout")
# Reasoning models reject ``max_tokens`` and want ``max_completion_tokens`` instead.
_REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")


@final
class OpenAIChatModel(HostedModel):
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    The API key and base URL come from the arguments, else from ``OPENAI_API_KEY`` and
    ``OPENAI_BASE_URL`` (default ``https://api.openai.com/v1``), read at call time.
    A missing key is an error at call time, never a silent fallback.

    ``provider=`` names another host speaking the same API (``hosts.OPENAI_COMPATIBLE``):
    ``OpenAIChatModel("llama3.2", provider="ollama")`` talks to Ollama at
    ``OLLAMA_BASE_URL`` (default ``http://127.0.0.1:11434/v1``) without a key;
    ``provider="groq"`` reads ``GROQ_API_KEY`` and ``GROQ_BASE_URL``, and so on.

    Call settings ``temperature``, ``max_tokens``, ``top_p``, ``stop``, ``seed`` and
    ``response_format`` are sent as OpenAI names them (``max_tokens`` becomes
    ``max_completion_tokens`` for o-series and gpt-5 models); any other setting is
    passed through verbatim as a provider-specific option.

    Args:
        model_id: The model's id at the provider, e.g. ``"gpt-4o-mini"``.
        provider: The host: "openai" (default), "ollama", "groq", "mistral",
            "openrouter", "together", "deepseek", "fireworks", "xai", "cerebras".
        api_key: The API key (else ``OPENAI_API_KEY``, or the host's variable).
        base_url: The API root, e.g. ``"http://localhost:8000/v1"`` (else
            ``OPENAI_BASE_URL``, or the host's variable).
        client: The client to send with (else one shared per event-loop run).
        timeout: Seconds for each phase of a request, overriding the client's timeouts.
        headers: Extra request headers (values of credential-like headers are redacted
            from errors like the key).
        max_retries: How calls are retried and bounded (see ``HostedModel``).
        idle_timeout: How calls are retried and bounded (see ``HostedModel``).
        deadline: How calls are retried and bounded (see ``HostedModel``).
        max_response_bytes: How calls are retried and bounded (see ``HostedModel``).
        max_retry_wait: How calls are retried and bounded (see ``HostedModel``).

    Raises:
        ValueError: ``model_id`` is empty, or ``provider`` names no known host.
    """

    PROVIDER = _PROVIDER
    KEY_ENV = "OPENAI_API_KEY"
    URL_ENV = "OPENAI_BASE_URL"
    DEFAULT_URL = DEFAULT_BASE_URL
    EXAMPLE_ID = "gpt-4o"
    ENDPOINT = "/chat/completions"
    DONE_SENTINEL = "[DONE]"
    __slots__ = ()

    def __init__(self, model_id: str, *, provider: str = _PROVIDER, api_key: str | None = None,
                 base_url: str | None = None, client: httpx.AsyncClient | None = None,
                 timeout: float | None = None, headers: Mapping[str, str] | None = None,
                 max_retries: int = DEFAULT_MAX_RETRIES,
                 idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
                 deadline: float | None = None,
                 max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
                 max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT) -> None:
        host = OPENAI_COMPATIBLE.get(provider)
        if host is None:
            raise ValueError(f"OpenAIChatModel: unknown provider {provider!r}; known hosts: "
                             f"{', '.join(OPENAI_COMPATIBLE)} (or pass base_url= with "
                             "provider='openai')")
        super().__init__(model_id, api_key=api_key, base_url=base_url, client=client,
                         timeout=timeout, headers=headers, max_retries=max_retries,
                         idle_timeout=idle_timeout, deadline=deadline,
                         max_response_bytes=max_response_bytes,
                         max_retry_wait=max_retry_wait)
        self._host = host

    def _auth_headers(self, key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"} if key else {}

    def _payload(self, request: ModelRequest) -> dict[str, Any]:
        return build_payload(self._model_id, request, stream_usage=self._host.stream_usage)

    def _decoder(self, secrets: list[str], request: ModelRequest) -> _StreamState:
        return _StreamState(secrets, provider=self._host.name)

    def _repair(self, payload: dict[str, Any], err: APICallError) -> dict[str, Any] | None:
        """Reasoning models (also under names the ``max_tokens`` rule cannot know, through
        a proxy or another host) refuse ``max_tokens`` and a non-default ``temperature``;
        their error says so: resend with ``max_completion_tokens``, without
        ``temperature``."""
        if err.status_code != 400:
            return None
        text = str(err)
        if "max_completion_tokens" in text and "max_tokens" in payload:
            fixed = dict(payload)
            fixed["max_completion_tokens"] = fixed.pop("max_tokens")
            return fixed
        if "'temperature'" in text and "temperature" in payload and (
                "Unsupported" in text or "not support" in text):
            return {k: v for k, v in payload.items() if k != "temperature"}
        return None


# -- request ------------------------------------------------------------------------


def build_payload(model_id: str, request: ModelRequest, *,
                  stream_usage: bool = True) -> dict[str, Any]:
    """The JSON body of a streamed chat completion for ``request``.

    Args:
        model_id: The model.
        request: The call.
        stream_usage: Ask for usage in the stream (``stream_options``).

    Raises:
        ValueError: ``tool_choice`` or a setting is invalid.
        APICallError: The prompt holds content the API cannot take.
    """
    payload: dict[str, Any] = {
        "model": model_id, "messages": convert_prompt(request.prompt), "stream": True}
    if stream_usage:
        payload["stream_options"] = {"include_usage": True}
    if request.tools:
        payload["tools"] = [_tool(spec) for spec in request.tools]
        choice = _tool_choice(request.tool_choice)
        if choice is not None:
            payload["tool_choice"] = choice
    schema = request.output_schema
    if schema is not None:
        format_: dict[str, Any] = {"name": schema.name, "schema": schema.schema,
                                   "strict": False}
        if schema.description:
            format_["description"] = schema.description
        payload["response_format"] = {"type": "json_schema", "json_schema": format_}
    payload.update(_settings(model_id, request.settings))
    return payload


def _tool(spec: ToolSpec) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": spec.name, "description": spec.description, "parameters": spec.parameters}}


def _tool_choice(choice: Any) -> Any:
    if choice is None or choice in ("auto", "none", "required"):
        return choice
    if (isinstance(choice, Mapping) and choice.get("type") == "tool"
            and isinstance(choice.get("tool_name"), str)):
        return {"type": "function", "function": {"name": choice["tool_name"]}}
    raise ValueError(f"unknown tool_choice {choice!r}; expected 'auto', 'none', 'required' "
                     "or {'type': 'tool', 'tool_name': <name>}")


def _settings(model_id: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if key in _RESERVED:
            raise ValueError(f"setting {key!r} is set by OpenAIChatModel itself; reserved "
                             f"settings: {sorted(_RESERVED)}")
        if value is None:
            continue
        if key == "max_tokens" and model_id.startswith(_REASONING_PREFIXES):
            key = "max_completion_tokens"
        out[key] = value
    return out


def convert_prompt(prompt: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Turn a procflow prompt (``MessageList.to_prompt()``) into OpenAI chat messages.

    Raises:
        APICallError: A message holds content the API cannot take.
    """
    messages: list[dict[str, Any]] = []
    for entry in prompt:
        role, content = entry["role"], entry["content"]
        if role == "tool":
            messages.extend(_tool_results(content))
        elif role == "assistant":
            messages.append(_assistant(content))
        elif role == "system":
            messages.append({"role": "system", "content": joined_text(content)})
        else:
            user = content if isinstance(content, str) else [_user_part(p) for p in content
                                                             if p.get("type") != "reasoning"]
            messages.append({"role": role, "content": user})
    return messages


def _assistant(content: str | Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    text = joined_text(content)
    calls = [{"id": p["tool_call_id"], "type": "function",
              "function": {"name": p["tool_name"], "arguments": to_text(p.get("args") or {})}}
             for p in content if p.get("type") == "tool-call"]
    message: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else "")}
    if calls:
        message["tool_calls"] = calls
    return message


def _tool_results(content: str | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        raise APICallError("a 'tool' message must hold tool-result parts, got plain text")
    return [{"role": "tool", "tool_call_id": p["tool_call_id"], "content": to_text(p["result"])}
            for p in content if p.get("type") == "tool-result"]


def _data_url(media_type: str, data: bytes | str) -> str:
    return f"data:{media_type};base64,{base64_text(data)}"


def _user_part(part: Mapping[str, Any]) -> dict[str, Any]:
    kind = part.get("type")
    media_type = str(part.get("media_type") or "")
    if kind == "text":
        return {"type": "text", "text": part["text"]}
    if kind == "image" or (kind == "file" and media_type.startswith("image/")):
        url = part.get("url") or _data_url(image_media_type(part), part["data"])
        return {"type": "image_url", "image_url": {"url": url}}
    if kind == "file" and part.get("data") is not None:
        return {"type": "file", "file": {"filename": part.get("filename") or "file",
                                         "file_data": _data_url(media_type, part["data"])}}
    if kind == "file":
        raise APICallError(f"OpenAI chat completions cannot take a file by URL "
                           f"({media_type}: {part.get('url')}); pass its bytes as 'data'")
    raise APICallError(f"OpenAI chat completions cannot take a {kind!r} part in a user message")


# -- response -----------------------------------------------------------------------


@dataclass(slots=True)
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _StreamState(StreamDecoder):
    """What a chat-completion stream has said so far."""

    provider: str = _PROVIDER
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=lambda: {
        "input_tokens": 0, "output_tokens": 0, "total_tokens": 0})
    calls: dict[int, _PendingCall] = field(default_factory=dict)

    def feed(self, data: Mapping[str, Any]) -> list[Chunk]:
        """Take one event's JSON; return the chunks it yields now."""
        if data.get("error"):
            raise self._stream_error(data["error"])
        if isinstance(data.get("usage"), Mapping):
            self._take_usage(data["usage"])
        chunks: list[Chunk] = []
        for choice in data.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                chunks.append(ReasoningDelta(reasoning))
            if isinstance(delta.get("content"), str) and delta["content"]:
                chunks.append(TextDelta(delta["content"]))
            for fragment in delta.get("tool_calls") or []:
                self._take_fragment(fragment)
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
        return chunks

    def _take_usage(self, usage: Mapping[str, Any]) -> None:
        given = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        total = int(usage.get("total_tokens") or sum(given))
        self.usage = {"input_tokens": given[0], "output_tokens": given[1], "total_tokens": total}
        details = usage.get("prompt_tokens_details")
        if isinstance(details, Mapping) and details.get("cached_tokens"):
            self.usage["cached_input_tokens"] = int(details["cached_tokens"])
        details = usage.get("completion_tokens_details")
        if isinstance(details, Mapping) and details.get("reasoning_tokens"):
            self.usage["reasoning_tokens"] = int(details["reasoning_tokens"])

    def _take_fragment(self, fragment: Mapping[str, Any]) -> None:
        index = fragment.get("index")
        if not isinstance(index, int):
            # Some compatible servers omit the index: a fragment with an id starts a call.
            last = max(self.calls, default=-1)
            index = last + 1 if fragment.get("id") or last < 0 else last
        call = self.calls.setdefault(index, _PendingCall())
        function = fragment.get("function") or {}
        call.id = fragment.get("id") or call.id
        call.name = function.get("name") or call.name
        if isinstance(function.get("arguments"), str):
            call.arguments.append(function["arguments"])

    def _stream_error(self, error: Any) -> APICallError:
        detail = error if isinstance(error, Mapping) else {"message": str(error)}
        kind = str(detail.get("type") or detail.get("code") or "error")
        message = redact(f"{self.provider} stream error ({kind}): {detail.get('message')}",
                         self.secrets)
        return APICallError(message, body=redact(to_text(error), self.secrets),
                            is_retryable=any(w in kind for w in _RETRYABLE_STREAM_ERRORS))

    def finish(self) -> list[Chunk]:
        """The tool-call chunks and the final "finish" chunk.

        Raises:
            APICallError: The stream ended before the model finished, or a tool call's
                arguments are not a JSON object.
        """
        if not self.done and self.finish_reason is None:
            raise APICallError(f"{self.provider} closed the stream before the answer finished "
                               "(no finish_reason and no [DONE])", is_retryable=True)
        chunks: list[Chunk] = []
        for index in sorted(self.calls):
            call = self.calls[index]
            args = parse_tool_args("".join(call.arguments), tool_name=call.name,
                                   provider=self.provider, secrets=self.secrets)
            chunks.append(ToolCallChunk(call.id or f"call_{index}", call.name, args))
        reason = _FINISH_REASONS.get(self.finish_reason or "", "other")
        chunks.append(Chunk.finish(reason, self.usage))
        return chunks
