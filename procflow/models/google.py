"""Google's Gemini API (``streamGenerateContent``) over httpx, streamed (SSE)."""

from __future__ import annotations

import os
from collections import OrderedDict
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
from procflow.models.http import base64_text, image_media_type, joined_text, redact, to_text
from procflow.records import Usage

__all__ = ["GoogleModel"]

DEFAULT_BASE_URL: Final = "https://generativelanguage.googleapis.com"
API_VERSION: Final = "v1beta"
_PROVIDER: Final = "google"
_KEY_ENVS: Final = ("GOOGLE_API_KEY", "GEMINI_API_KEY")
_FINISH_REASONS: Final = {
    "STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content-filter",
    "RECITATION": "content-filter", "BLOCKLIST": "content-filter",
    "PROHIBITED_CONTENT": "content-filter", "SPII": "content-filter",
    "IMAGE_SAFETY": "content-filter", "MALFORMED_FUNCTION_CALL": "error"}
_GENERATION = {"temperature": "temperature", "max_tokens": "maxOutputTokens",
               "top_p": "topP", "top_k": "topK", "seed": "seed",
               "presence_penalty": "presencePenalty", "frequency_penalty": "frequencyPenalty"}
_TOP_LEVEL = frozenset({"safetySettings", "cachedContent", "labels"})
_RESERVED = frozenset({"contents", "tools", "toolConfig", "systemInstruction",
                       "tool_choice", "model"})
_RETRYABLE_STATUS = frozenset({"UNAVAILABLE", "RESOURCE_EXHAUSTED", "INTERNAL",
                               "DEADLINE_EXCEEDED"})
_SIGNATURES_KEPT = 1024


@final
class GoogleModel(HostedModel):
    """A Gemini model behind Google's Gemini API (``models/<id>:streamGenerateContent``).

    The API key comes from the argument, else ``GOOGLE_API_KEY``, else
    ``GEMINI_API_KEY``; it is sent in the ``x-goog-api-key`` header. The base URL comes
    from the argument, else ``GOOGLE_BASE_URL`` (default
    ``https://generativelanguage.googleapis.com``). Both are read at call time.

    Call settings ``temperature``, ``max_tokens`` (``maxOutputTokens``), ``top_p``,
    ``top_k``, ``seed``, ``stop`` (``stopSequences``) and ``response_format``
    (``{"type": "json_object"}`` asks for JSON) are translated; ``safetySettings``,
    ``cachedContent`` and ``labels`` go to the request's top level; any other setting
    (``thinkingConfig``...) goes into ``generationConfig`` verbatim.

    Structured output uses ``responseMimeType`` and ``responseJsonSchema``; when tools
    are given too, the answer is the arguments of a function the model must call
    (streamed as the answer's text), since Gemini takes a JSON response type or
    function calling, not both.

    Args:
        model_id: The model's id, e.g. ``"gemini-2.5-flash"``.
        api_key: The API key (else ``GOOGLE_API_KEY``, else ``GEMINI_API_KEY``).
        base_url: The API root (else ``GOOGLE_BASE_URL``).
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
        ValueError: ``model_id`` is empty.
    """

    PROVIDER = _PROVIDER
    KEY_ENV = _KEY_ENVS[0]
    URL_ENV = "GOOGLE_BASE_URL"
    DEFAULT_URL = DEFAULT_BASE_URL
    EXAMPLE_ID = "gemini-2.5-flash"
    ENDPOINT = f"/{API_VERSION}/models/{{model}}:streamGenerateContent?alt=sse"
    __slots__ = ("_signatures",)

    def __init__(self, model_id: str, *, api_key: str | None = None,
                 base_url: str | None = None, client: httpx.AsyncClient | None = None,
                 timeout: float | None = None, headers: Mapping[str, str] | None = None,
                 max_retries: int = DEFAULT_MAX_RETRIES,
                 idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
                 deadline: float | None = None,
                 max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
                 max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT) -> None:
        super().__init__(model_id, api_key=api_key, base_url=base_url, client=client,
                         timeout=timeout, headers=headers, max_retries=max_retries,
                         idle_timeout=idle_timeout, deadline=deadline,
                         max_response_bytes=max_response_bytes,
                         max_retry_wait=max_retry_wait)
        # Gemini's thinking models sign their function calls and want the signature
        # back with the call; kept here by call id for the calls this model made.
        self._signatures: OrderedDict[str, str] = OrderedDict()

    def _key(self) -> str:
        if self._api_key is None:
            for name in _KEY_ENVS:
                value = os.environ.get(name, "").strip()
                if value:
                    return value
            raise APICallError(
                f"neither GOOGLE_API_KEY nor GEMINI_API_KEY is set and no api_key was given "
                f"to GoogleModel({self._model_id!r}); set one or pass api_key=... (use "
                "ScriptedModel to run offline)", is_retryable=False)
        return super()._key()

    def _endpoint(self) -> str:
        return self.ENDPOINT.format(model=self._model_id.removeprefix("models/"))

    def _auth_headers(self, key: str) -> dict[str, str]:
        return {"x-goog-api-key": key}

    def _payload(self, request: ModelRequest) -> dict[str, Any]:
        return build_payload(request, self._signatures)

    def _decoder(self, secrets: list[str], request: ModelRequest) -> _StreamState:
        schema = request.output_schema
        answer_tool = schema.name if schema is not None and request.tools else None
        return _StreamState(secrets, answer_tool=answer_tool, signatures=self._signatures)


# -- request ------------------------------------------------------------------------


def build_payload(request: ModelRequest,
                  signatures: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The JSON body of a ``streamGenerateContent`` call for ``request``.

    Args:
        request: The call.
        signatures: Thought signatures of earlier function calls, by call id.

    Raises:
        ValueError: ``tool_choice`` or a setting is invalid.
        APICallError: The prompt holds content the API cannot take.
    """
    system, contents = convert_prompt(request.prompt, signatures or {})
    payload: dict[str, Any] = {"contents": contents}
    if system:
        payload["systemInstruction"] = {"parts": [{"text": system}]}
    generation: dict[str, Any] = {}
    declarations = [_declaration(spec) for spec in request.tools or ()]
    mode, allowed = _tool_choice(request.tool_choice)
    schema = request.output_schema
    if schema is not None and declarations and mode != "NONE":
        declarations.append({"name": schema.name, "parametersJsonSchema": schema.schema,
                             "description": schema.description or "Give the final answer."})
        mode, allowed = "ANY", None
    elif schema is not None:
        generation["responseMimeType"] = "application/json"
        generation["responseJsonSchema"] = schema.schema
    if declarations:
        payload["tools"] = [{"functionDeclarations": declarations}]
        if mode is not None:
            config: dict[str, Any] = {"mode": mode}
            if allowed:
                config["allowedFunctionNames"] = allowed
            payload["toolConfig"] = {"functionCallingConfig": config}
    _settings(request.settings, payload, generation)
    if generation:
        payload["generationConfig"] = generation
    return payload


def _declaration(spec: ToolSpec) -> dict[str, Any]:
    return {"name": spec.name, "description": spec.description,
            "parametersJsonSchema": spec.parameters}


def _tool_choice(choice: Any) -> tuple[str | None, list[str] | None]:
    if choice is None:
        return None, None
    modes = {"auto": "AUTO", "none": "NONE", "required": "ANY"}
    if isinstance(choice, str) and choice in modes:
        return modes[choice], None
    if (isinstance(choice, Mapping) and choice.get("type") == "tool"
            and isinstance(choice.get("tool_name"), str)):
        return "ANY", [choice["tool_name"]]
    raise ValueError(f"unknown tool_choice {choice!r}; expected 'auto', 'none', 'required' "
                     "or {'type': 'tool', 'tool_name': <name>}")


def _settings(settings: Mapping[str, Any], payload: dict[str, Any],
              generation: dict[str, Any]) -> None:
    for key, value in settings.items():
        if key in _RESERVED:
            raise ValueError(f"setting {key!r} is set by GoogleModel itself; reserved "
                             f"settings: {sorted(_RESERVED)}")
        if value is None:
            continue
        if key in _GENERATION:
            generation[_GENERATION[key]] = value
        elif key == "stop":
            generation["stopSequences"] = [value] if isinstance(value, str) else list(value)
        elif key == "response_format":
            kind = value.get("type") if isinstance(value, Mapping) else None
            if kind == "json_object":
                generation["responseMimeType"] = "application/json"
            elif kind != "text":
                raise ValueError(f"GoogleModel does not support response_format {value!r}; "
                                 "use output_type= for a JSON schema")
        elif key in _TOP_LEVEL:
            payload[key] = value
        else:
            generation[key] = value


def convert_prompt(prompt: Sequence[Mapping[str, Any]], signatures: Mapping[str, str],
                   ) -> tuple[str | None, list[dict[str, Any]]]:
    """Turn a procflow prompt into Gemini's ``systemInstruction`` text and ``contents``.

    System messages are joined; assistant turns are the "model" role; tool results are
    ``functionResponse`` parts of a "user" turn; consecutive turns of one role merge.

    Raises:
        APICallError: A message holds content the API cannot take.
    """
    system: list[str] = []
    contents: list[dict[str, Any]] = []
    for entry in prompt:
        role, content = entry["role"], entry["content"]
        if role == "system":
            system.append(joined_text(content))
            continue
        parts_in = [{"type": "text", "text": content}] if isinstance(content, str) else content
        parts = [p for p in (_part(role, p, signatures) for p in parts_in) if p is not None]
        api_role = "model" if role == "assistant" else "user"
        if not parts:
            continue
        if contents and contents[-1]["role"] == api_role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": api_role, "parts": parts})
    return "\n\n".join(s for s in system if s) or None, contents


def _part(role: str, part: Mapping[str, Any],
          signatures: Mapping[str, str]) -> dict[str, Any] | None:
    kind = part.get("type")
    if kind == "text":
        return {"text": part["text"]} if part["text"] else None
    if kind == "reasoning":
        return None
    if kind == "tool-call" and role == "assistant":
        out: dict[str, Any] = {"functionCall": {"name": part["tool_name"],
                                                "args": dict(part.get("args") or {})}}
        signature = signatures.get(part["tool_call_id"])
        if signature:
            out["thoughtSignature"] = signature
        return out
    if kind == "tool-result":
        result = part["result"]
        key = "error" if part.get("is_error") else "result"
        return {"functionResponse": {"name": part["tool_name"], "response": {
            key: result if isinstance(result, Mapping | list | int | float | bool)
            else to_text(result)}}}
    if kind in ("image", "file") and role == "user":
        media_type = (image_media_type(part) if kind == "image"
                      else str(part.get("media_type") or "application/octet-stream"))
        if part.get("url"):
            return {"fileData": {"mimeType": media_type, "fileUri": part["url"]}}
        return {"inlineData": {"mimeType": media_type, "data": base64_text(part["data"])}}
    raise APICallError(f"Gemini's API cannot take a {kind!r} part in a {role!r} message")


# -- response -----------------------------------------------------------------------


@dataclass(slots=True)
class _StreamState(StreamDecoder):
    """What a ``streamGenerateContent`` stream has said so far.

    Gemini sends whole function calls (never fragments) and no end marker: each event
    is a partial response; the last one carries the finish reason and the usage.
    """

    answer_tool: str | None = None
    """The function whose arguments are the answer (structured output with tools)."""
    signatures: OrderedDict[str, str] = field(default_factory=OrderedDict)
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    calls: list[ToolCallChunk] = field(default_factory=list)
    answered: bool = False

    def feed(self, data: Mapping[str, Any]) -> list[Chunk]:
        """Take one event's JSON; return the chunks it yields now."""
        if data.get("error"):
            raise self._stream_error(data["error"])
        if isinstance(data.get("usageMetadata"), Mapping):
            self.usage = _usage(data["usageMetadata"])
        feedback = data.get("promptFeedback") or {}
        if isinstance(feedback, Mapping) and feedback.get("blockReason"):
            self.finish_reason = "SAFETY"
        chunks: list[Chunk] = []
        for candidate in (data.get("candidates") or [])[:1]:
            for part in (candidate.get("content") or {}).get("parts") or []:
                chunks.extend(self._part(part))
            if candidate.get("finishReason"):
                self.finish_reason = str(candidate["finishReason"])
        return chunks

    def _part(self, part: Mapping[str, Any]) -> list[Chunk]:
        text = part.get("text")
        if isinstance(text, str) and text:
            return [ReasoningDelta(text) if part.get("thought") else TextDelta(text)]
        call = part.get("functionCall")
        if not isinstance(call, Mapping):
            return []
        name = str(call.get("name") or "")
        args = call.get("args") or {}
        if name == self.answer_tool:
            self.answered = True
            return [TextDelta(to_text(args))]
        call_id = str(call.get("id") or f"call_{len(self.calls) + 1}")
        signature = part.get("thoughtSignature")
        if isinstance(signature, str) and signature:
            self.signatures[call_id] = signature
            while len(self.signatures) > _SIGNATURES_KEPT:
                self.signatures.popitem(last=False)
        self.calls.append(ToolCallChunk(call_id, name, dict(args)))
        return []

    def _stream_error(self, error: Any) -> APICallError:
        detail = error if isinstance(error, Mapping) else {"message": str(error)}
        status = str(detail.get("status") or "error")
        message = redact(f"google stream error ({status}): {detail.get('message')}",
                         self.secrets)
        code = detail.get("code")
        return APICallError(message, body=redact(to_text(error), self.secrets),
                            status_code=code if isinstance(code, int) else None,
                            is_retryable=status in _RETRYABLE_STATUS)

    def finish(self) -> list[Chunk]:
        """The tool-call chunks and the final "finish" chunk.

        Raises:
            APICallError: The stream ended before a finish reason (retryable).
        """
        if self.finish_reason is None:
            raise APICallError("google closed the stream before the answer finished "
                               "(no finishReason)", is_retryable=True)
        reason = _FINISH_REASONS.get(self.finish_reason, "other")
        if self.calls and reason == "stop":
            reason = "tool-calls"
        return [*self.calls, Finish(reason, self.usage)]


def _usage(metadata: Mapping[str, Any]) -> Usage:
    def count(name: str) -> int:
        value = metadata.get(name)
        return value if isinstance(value, int) and value >= 0 else 0

    thoughts = count("thoughtsTokenCount")
    prompt = count("promptTokenCount") + count("toolUsePromptTokenCount")
    output = count("candidatesTokenCount") + thoughts
    return Usage(prompt, output, count("totalTokenCount") or prompt + output,
                 reasoning_tokens=thoughts, cached_input_tokens=count("cachedContentTokenCount"))
