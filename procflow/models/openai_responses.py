"""OpenAI's Responses API (``POST /v1/responses``) over httpx, streamed (SSE)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, final

from procflow.errors import APICallError
from procflow.messages import Chunk, Finish, ReasoningDelta, TextDelta, ToolCallChunk
from procflow.models.base import ModelRequest, ToolSpec
from procflow.models.hosted import HostedModel, StreamDecoder
from procflow.models.http import (
    base64_text,
    image_media_type,
    joined_text,
    parse_tool_args,
    redact,
    to_text,
)
from procflow.records import Usage

__all__ = ["OpenAIResponsesModel"]

_PROVIDER: Final = "openai"
_RESERVED = frozenset({"model", "input", "instructions", "stream", "tools", "tool_choice",
                       "text"})
_SETTINGS = {"max_tokens": "max_output_tokens"}
_INCOMPLETE: Final = {"max_output_tokens": "length", "content_filter": "content-filter"}
_RETRYABLE_CODES = ("server_error", "rate_limit", "overloaded", "timeout")


@final
class OpenAIResponsesModel(HostedModel):
    """An OpenAI model behind the Responses API (``POST /v1/responses``), the API of
    OpenAI's newest models and built-in tools; opt in with this class (a model string
    ``"openai/..."`` uses chat completions).

    The API key and base URL come from the arguments, else from ``OPENAI_API_KEY`` and
    ``OPENAI_BASE_URL`` (default ``https://api.openai.com/v1``), read at call time.
    Calls are not stored at OpenAI (``store: false``) unless a ``store`` setting says so.

    Call settings: ``max_tokens`` is sent as ``max_output_tokens``; any other setting
    (``temperature``, ``top_p``, ``reasoning``, ``store``...) is passed through verbatim.

    Takes the arguments of ``HostedModel``: ``model_id`` (e.g. ``"gpt-5-mini"``), then
    ``api_key``, ``base_url``, ``client``, ``timeout``, ``headers``, ``max_retries``,
    ``idle_timeout``, ``deadline``, ``max_response_bytes`` and ``max_retry_wait``.

    Raises:
        ValueError: ``model_id`` is empty.
    """

    PROVIDER = _PROVIDER
    KEY_ENV = "OPENAI_API_KEY"
    URL_ENV = "OPENAI_BASE_URL"
    DEFAULT_URL = "https://api.openai.com/v1"
    EXAMPLE_ID = "gpt-5-mini"
    ENDPOINT = "/responses"
    __slots__ = ()

    def _auth_headers(self, key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"}

    def _payload(self, request: ModelRequest) -> dict[str, Any]:
        return build_payload(self._model_id, request)

    def _decoder(self, secrets: list[str], request: ModelRequest) -> _StreamState:
        return _StreamState(secrets)


# -- request ------------------------------------------------------------------------


def build_payload(model_id: str, request: ModelRequest) -> dict[str, Any]:
    """The JSON body of a streamed Responses API call for ``request``.

    Raises:
        ValueError: ``tool_choice`` or a setting is invalid.
        APICallError: The prompt holds content the API cannot take.
    """
    instructions, items = convert_prompt(request.prompt)
    payload: dict[str, Any] = {"model": model_id, "input": items, "stream": True,
                               "store": False}
    if instructions:
        payload["instructions"] = instructions
    if request.tools:
        payload["tools"] = [_tool(spec) for spec in request.tools]
        if request.tool_choice is not None:
            payload["tool_choice"] = _tool_choice(request.tool_choice)
    schema = request.output_schema
    if schema is not None:
        format_: dict[str, Any] = {"type": "json_schema", "name": schema.name,
                                   "schema": schema.schema, "strict": False}
        if schema.description:
            format_["description"] = schema.description
        payload["text"] = {"format": format_}
    for key, value in request.settings.items():
        if key in _RESERVED:
            raise ValueError(f"setting {key!r} is set by OpenAIResponsesModel itself; "
                             f"reserved settings: {sorted(_RESERVED)}")
        if value is not None:
            payload[_SETTINGS.get(key, key)] = value
    return payload


def _tool(spec: ToolSpec) -> dict[str, Any]:
    return {"type": "function", "name": spec.name, "description": spec.description,
            "parameters": spec.parameters, "strict": False}


def _tool_choice(choice: Any) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if (isinstance(choice, Mapping) and choice.get("type") == "tool"
            and isinstance(choice.get("tool_name"), str)):
        return {"type": "function", "name": choice["tool_name"]}
    raise ValueError(f"unknown tool_choice {choice!r}; expected 'auto', 'none', 'required' "
                     "or {'type': 'tool', 'tool_name': <name>}")


def convert_prompt(prompt: Sequence[Mapping[str, Any]],
                   ) -> tuple[str | None, list[dict[str, Any]]]:
    """Turn a procflow prompt into the ``instructions`` and ``input`` items.

    Raises:
        APICallError: A message holds content the API cannot take.
    """
    system: list[str] = []
    items: list[dict[str, Any]] = []
    for entry in prompt:
        role, content = entry["role"], entry["content"]
        if role == "system":
            system.append(joined_text(content))
        elif role == "tool":
            if isinstance(content, str):
                raise APICallError("a 'tool' message must hold tool-result parts, got text")
            items.extend({"type": "function_call_output", "call_id": p["tool_call_id"],
                          "output": to_text(p["result"])}
                         for p in content if p.get("type") == "tool-result")
        elif role == "assistant":
            items.extend(_assistant(content))
        else:
            parts = [{"type": "text", "text": content}] if isinstance(content, str) \
                else content
            items.append({"role": role, "content": [_user_part(p) for p in parts
                                                    if p.get("type") != "reasoning"]})
    return "\n\n".join(s for s in system if s) or None, items


def _assistant(content: str | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    text = content if isinstance(content, str) else joined_text(content)
    items: list[dict[str, Any]] = []
    if text:
        items.append({"role": "assistant", "content": text})
    if not isinstance(content, str):
        items.extend({"type": "function_call", "call_id": p["tool_call_id"],
                      "name": p["tool_name"], "arguments": to_text(p.get("args") or {})}
                     for p in content if p.get("type") == "tool-call")
    return items


def _user_part(part: Mapping[str, Any]) -> dict[str, Any]:
    kind = part.get("type")
    media_type = str(part.get("media_type") or "")
    if kind == "text":
        return {"type": "input_text", "text": part["text"]}
    if kind == "image" or (kind == "file" and media_type.startswith("image/")):
        url = part.get("url") or (f"data:{image_media_type(part)};base64,"
                                  f"{base64_text(part['data'])}")
        return {"type": "input_image", "image_url": url}
    if kind == "file" and part.get("data") is not None:
        return {"type": "input_file", "filename": part.get("filename") or "file",
                "file_data": f"data:{media_type};base64,{base64_text(part['data'])}"}
    if kind == "file":
        return {"type": "input_file", "file_url": part["url"]}
    raise APICallError(f"the Responses API cannot take a {kind!r} part in a user message")


# -- response -----------------------------------------------------------------------


@dataclass(slots=True)
class _Call:
    call_id: str
    name: str
    arguments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _StreamState(StreamDecoder):
    """What a Responses API stream has said so far (events are typed by ``type``)."""

    calls: dict[str, _Call] = field(default_factory=dict)
    """Function calls by item id, in the order they started."""
    status: str | None = None
    incomplete: str | None = None
    usage: Usage = field(default_factory=Usage)

    def feed(self, data: Mapping[str, Any]) -> list[Chunk]:
        """Take one event's JSON; return the chunks it yields now."""
        kind = data.get("type")
        if kind == "response.output_text.delta" and data.get("delta"):
            return [TextDelta(str(data["delta"]))]
        if kind in ("response.reasoning_summary_text.delta",
                    "response.reasoning_text.delta") and data.get("delta"):
            return [ReasoningDelta(str(data["delta"]))]
        if kind in ("response.output_item.added", "response.output_item.done"):
            self._take_item(data.get("item") or {}, done=kind.endswith("done"))
        elif kind == "response.function_call_arguments.delta":
            call = self.calls.get(str(data.get("item_id")))
            if call is not None:
                call.arguments.append(str(data.get("delta") or ""))
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            return self._end(data.get("response") or {})
        elif kind == "error":
            raise self._error(data)
        return []

    def _take_item(self, item: Mapping[str, Any], *, done: bool) -> None:
        if item.get("type") != "function_call":
            return
        item_id = str(item.get("id") or item.get("call_id"))
        call = self.calls.setdefault(item_id, _Call(str(item.get("call_id") or item_id),
                                                    str(item.get("name") or "")))
        if done and isinstance(item.get("arguments"), str):
            call.arguments = [item["arguments"]]  # the whole arguments, authoritative

    def _end(self, response: Mapping[str, Any]) -> list[Chunk]:
        self.status = str(response.get("status") or "completed")
        if self.status == "failed":
            raise self._error(response.get("error") or {})
        details = response.get("incomplete_details") or {}
        self.incomplete = str(details.get("reason")) if isinstance(details, Mapping) \
            and details.get("reason") else None
        usage = response.get("usage")
        if isinstance(usage, Mapping):
            self.usage = _usage(usage)
        self.done = True
        return []

    def _error(self, error: Mapping[str, Any]) -> APICallError:
        code = str(error.get("code") or error.get("type") or "error")
        return APICallError(redact(f"openai stream error ({code}): {error.get('message')}",
                                   self.secrets),
                            body=redact(to_text(error), self.secrets),
                            is_retryable=any(w in code for w in _RETRYABLE_CODES))

    def finish(self) -> list[Chunk]:
        """The tool-call chunks and the final "finish" chunk.

        Raises:
            APICallError: The stream ended before ``response.completed`` (retryable), or
                a call's arguments are not a JSON object.
        """
        if self.status is None:
            raise APICallError("openai closed the stream before the response completed "
                               "(no response.completed)", is_retryable=True)
        chunks: list[Chunk] = [
            ToolCallChunk(call.call_id, call.name, parse_tool_args(
                "".join(call.arguments), tool_name=call.name, provider=_PROVIDER,
                secrets=self.secrets))
            for call in self.calls.values()]
        if self.incomplete is not None:
            reason = _INCOMPLETE.get(self.incomplete, "other")
        else:
            reason = "tool-calls" if self.calls else "stop"
        return [*chunks, Finish(reason, self.usage)]


def _usage(usage: Mapping[str, Any]) -> Usage:
    def count(value: Any) -> int:
        return value if isinstance(value, int) and value >= 0 else 0

    given_in, given_out = count(usage.get("input_tokens")), count(usage.get("output_tokens"))
    cached = count((usage.get("input_tokens_details") or {}).get("cached_tokens"))
    reasoning = count((usage.get("output_tokens_details") or {}).get("reasoning_tokens"))
    return Usage(given_in, given_out, count(usage.get("total_tokens")) or given_in + given_out,
                 reasoning_tokens=reasoning, cached_input_tokens=cached)
