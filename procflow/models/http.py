"""What the HTTP providers share: the client, an SSE parser, error translation, redaction.

One ``httpx.AsyncClient`` is shared per event-loop run (an ``anyio.lowlevel.RunVar``),
so every ``anyio.run`` gets its own and no client outlives the loop it was made in.
Every error built here passes through ``redact`` so no API key reaches a message.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import pydantic_core
from anyio.lowlevel import RunVar

from procflow.errors import APICallError

__all__ = [
    "DEFAULT_LIMITS",
    "DEFAULT_TIMEOUT",
    "ResponseTooLargeError",
    "SSEError",
    "SSEEvent",
    "StreamProgress",
    "aclose_shared_client",
    "base64_text",
    "image_media_type",
    "iter_sse",
    "joined_text",
    "parse_json_event",
    "parse_tool_args",
    "post_event_stream",
    "read_capped",
    "redact",
    "retry_after_seconds",
    "secret_header_values",
    "shared_client",
    "status_error",
    "to_text",
    "translate_error",
]

DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=120.0, write=30.0, pool=30.0)
"""Timeouts of the shared client; ``read`` bounds the silence between two stream events."""

DEFAULT_TOTAL_TIMEOUT = 600.0
"""Seconds a streamed answer may take in all, however steadily its events arrive (the
idle limit, ``DEFAULT_TIMEOUT.read``, bounds a silent one)."""

DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20,
                              keepalive_expiry=30.0)
"""Connection limits of the shared client."""

REDACTED = "***"
_RETRYABLE_STATUS = frozenset({408, 409, 429})
_EXCERPT = 500

_client: RunVar[httpx.AsyncClient] = RunVar("procflow.models.http.client")


def shared_client() -> httpx.AsyncClient:
    """The ``httpx.AsyncClient`` of the current event-loop run, made on first use."""
    try:
        client = _client.get()
    except LookupError:
        client = None
    if client is None or client.is_closed:
        client = httpx.AsyncClient(timeout=DEFAULT_TIMEOUT, limits=DEFAULT_LIMITS)
        _client.set(client)
    return client


async def aclose_shared_client() -> None:
    """Close the current run's shared client, if one was made (the next use makes a new one)."""
    try:
        client = _client.get()
    except LookupError:
        return
    await client.aclose()


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """Return ``text`` with every occurrence of each non-empty secret replaced by ``***``.

    Args:
        text: The text to clean.
        secrets: The values to hide (``None`` and empty values are skipped).
    """
    # Longest first, so a secret containing another is hidden whole.
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One server-sent event.

    Attributes:
        event: The event type ("message" when the server named none).
        data: The data lines joined with ``\\n``.
    """

    event: str
    data: str


class SSEError(ValueError):
    """The response is not a well-formed event stream."""


_KNOWN_FIELDS = frozenset({"event", "data", "id", "retry"})


class ResponseTooLargeError(ValueError):
    """A response is larger than the cap the caller set.

    Attributes:
        limit: The cap, in bytes.
    """

    def __init__(self, limit: int) -> None:
        super().__init__(f"the response is larger than {limit} bytes")
        self.limit = limit


_EOL = re.compile(r"\r\n|\r|\n")


async def iter_sse(response: httpx.Response, *,
                   max_bytes: int | None = None) -> AsyncGenerator[SSEEvent, None]:
    """Parse the body of ``response`` as a server-sent event stream.

    Follows the SSE spec (``event:``, multi-line ``data:``, ``:`` comments, a blank line
    ends an event, lines end with CRLF, LF or CR, an unfinished event at the end is
    dropped), except that a line with an unknown field name raises instead of being
    ignored: no provider sends one, so it means the body is not an event stream.
    ``[DONE]`` sentinels are left to callers.

    Args:
        response: The streamed response.
        max_bytes: Refuse a body larger than this many bytes (``None``: no cap).

    Raises:
        SSEError: A line is not an SSE field.
        ResponseTooLargeError: The body grew past ``max_bytes``.
    """
    event = ""
    data: list[str] = []
    first = True
    pending: list[str] = []  # the pieces of a line not ended yet
    skip_lf = False
    chunks = response.aiter_text()
    try:
        async for text in chunks:
            if max_bytes is not None and response.num_bytes_downloaded > max_bytes:
                raise ResponseTooLargeError(max_bytes)
            if skip_lf and text.startswith("\n"):
                text = text[1:]
            skip_lf = text.endswith("\r")  # maybe the first half of a CRLF
            lines: list[str] = []
            start = 0
            for match in _EOL.finditer(text):
                if pending:
                    pending.append(text[start:match.start()])
                    lines.append("".join(pending))
                    pending.clear()
                else:
                    lines.append(text[start:match.start()])
                start = match.end()
            if start < len(text):
                pending.append(text[start:])
            for raw in lines:
                line = raw.removeprefix("\ufeff") if first else raw
                first = False
                if not line:
                    if data:
                        yield SSEEvent(event=event or "message", data="\n".join(data))
                    event, data = "", []
                    continue
                if line.startswith(":"):
                    continue
                name, colon, value = line.partition(":")
                if colon and value.startswith(" "):
                    value = value[1:]
                if name not in _KNOWN_FIELDS:
                    raise SSEError(f"line {_excerpt(line, 80)!r} is not an SSE field")
                if name == "data":
                    data.append(value)
                elif name == "event":
                    event = value
    finally:
        if isinstance(chunks, AsyncGenerator):
            await chunks.aclose()


async def read_capped(response: httpx.Response, max_bytes: int | None) -> bytes:
    """The whole body of a streamed ``response``, refused past ``max_bytes``.

    Raises:
        ResponseTooLargeError: The body is larger than ``max_bytes``.
    """
    if max_bytes is None:
        return await response.aread()
    parts: list[bytes] = []
    size = 0
    async for piece in response.aiter_bytes():
        size += len(piece)
        if size > max_bytes:
            raise ResponseTooLargeError(max_bytes)
        parts.append(piece)
    return b"".join(parts)


def _excerpt(text: str, limit: int = _EXCERPT) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def parse_json_event(event: SSEEvent, *, provider: str,
                     secrets: Iterable[str | None]) -> dict[str, Any]:
    """The JSON object carried by ``event``.

    Raises:
        APICallError: The data is not a JSON object (not retryable).
    """
    try:
        value = json.loads(event.data)
    except ValueError as exc:
        detail = f"{exc}; data was {_excerpt(event.data, 200)!r}"
        raise APICallError(f"malformed SSE event from {provider}: {redact(detail, secrets)}",
                           body=redact(event.data, secrets)) from None
    if not isinstance(value, dict):
        raise APICallError(
            f"malformed SSE event from {provider}: expected a JSON object, got "
            f"{redact(_excerpt(event.data, 200), secrets)!r}",
            body=redact(event.data, secrets))
    return value


def _error_detail(body: str) -> str:
    """The provider's own error message from a JSON error body, else an excerpt."""
    try:
        value = json.loads(body)
    except ValueError:
        return _excerpt(body.strip()) or "(empty body)"
    if isinstance(value, dict):
        error = value.get("error", value)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            kind = next((k for k in (error.get("type"), error.get("code"), error.get("status"))
                         if isinstance(k, str) and k), None)
            return f"{error['message']} ({kind})" if kind else error["message"]
        if isinstance(error, str):
            return error
    return _excerpt(body.strip())


def status_error(provider: str, status: int, body: str, secrets: Iterable[str | None], *,
                 retry_after: float | None = None) -> APICallError:
    """The ``APICallError`` for an HTTP error status (retryable: 408, 409, 429, 5xx).

    Args:
        provider: The provider's name, for the message.
        status: The HTTP status.
        body: The response body (redacted here).
        secrets: Values to redact.
        retry_after: Seconds the provider asked to wait (``retry_after_seconds``).
    """
    secrets = list(secrets)
    body = redact(body, secrets)
    return APICallError(
        f"{provider} rejected the request with HTTP {status}: {_error_detail(body)}",
        status_code=status, body=body,
        is_retryable=status in _RETRYABLE_STATUS or status >= 500, retry_after=retry_after)


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """The wait a response asks for: ``retry-after-ms``, else ``Retry-After`` in seconds
    or as an HTTP date; ``None`` when it asks for none (or says something unreadable).

    Args:
        headers: The response headers (names matched case-insensitively by httpx).
        now: The current time as seconds since the epoch (for dates; default now).
    """
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _seconds(value: float | None) -> str:
    return "no time limit" if value is None else f"{float(value)}s"


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _describe(exc: Exception, provider: str, timeout: httpx.Timeout) -> tuple[str, bool]:
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.ConnectTimeout):
        return f"connecting to {provider} timed out after {_seconds(timeout.connect)}", True
    if isinstance(exc, httpx.ReadTimeout):
        return (f"{provider} sent nothing for too long: read timed out after "
                f"{_seconds(timeout.read)}"), True
    if isinstance(exc, httpx.WriteTimeout):
        return f"sending the request to {provider} timed out after {_seconds(timeout.write)}", True
    if isinstance(exc, httpx.PoolTimeout):
        return (f"no free connection to {provider}: pool timed out after "
                f"{_seconds(timeout.pool)}"), True
    if isinstance(exc, httpx.ConnectError):
        if _caused_by(exc, ConnectionRefusedError) or "refused" in detail.lower():
            return f"could not connect to {provider}: connection refused", True
        return f"could not connect to {provider}: {detail}", True
    if isinstance(exc, httpx.ReadError | httpx.WriteError):
        if _caused_by(exc, ConnectionResetError) or "reset" in detail.lower():
            return f"connection reset by the server ({provider})", True
        return f"connection to {provider} failed: {detail}", True
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"{provider} closed the connection before the response was complete: {detail}", True
    if isinstance(exc, httpx.NetworkError | httpx.ProxyError):
        return f"network error talking to {provider}: {detail}", True
    return f"request to {provider} failed: {detail}", False


def translate_error(exc: Exception, *, provider: str, secrets: Iterable[str | None],
                    timeout: httpx.Timeout) -> APICallError:
    """The ``APICallError`` for an httpx failure (connection-level ones are retryable).

    Args:
        exc: An ``httpx.HTTPError`` or ``httpx.InvalidURL``.
        provider: The provider's name, for the message.
        secrets: Values to redact from the message.
        timeout: The timeouts in force, to say which limit was hit.
    """
    message, retryable = _describe(exc, provider, timeout)
    return APICallError(redact(message, secrets), is_retryable=retryable)


def _chain_mentions(exc: BaseException, secrets: list[str]) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if any(s and s in str(current) for s in secrets):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


@dataclass(slots=True)
class StreamProgress:
    """How far one streamed call got, filled in by ``post_event_stream``.

    Attributes:
        body_bytes: Bytes of a successful response's body received (0 while none:
            a failure then is safe to retry).
    """

    body_bytes: int = 0


async def post_event_stream(
    client: httpx.AsyncClient, url: str, *, provider: str, headers: Mapping[str, str],
    payload: Mapping[str, Any], secrets: Iterable[str | None], request_timeout: float | None,
    max_bytes: int | None = None, progress: StreamProgress | None = None,
    total_timeout: float | None = DEFAULT_TOTAL_TIMEOUT,
) -> AsyncGenerator[SSEEvent, None]:
    """POST ``payload`` as JSON to ``url`` and yield the events of the streamed answer.

    Args:
        client: The client to send with.
        url: The endpoint.
        provider: The provider's name, for messages.
        headers: Request headers (auth included).
        payload: The JSON body.
        secrets: Values that must never appear in an error (the API key).
        request_timeout: Seconds for every phase of the request; ``None`` keeps the
            client's timeouts.
        max_bytes: Refuse a response body larger than this (``None``: no cap).
        progress: Where to record how much of the body arrived.
        total_timeout: Seconds the whole answer may take, from the request on (checked
            at each event: with the idle limit, a call ends within ``total_timeout``
            plus the read timeout); ``None``: no overall limit.

    Raises:
        APICallError: The provider answered with an error status, the connection
            failed, the body is not an event stream or is larger than ``max_bytes``,
            or the answer took longer than ``total_timeout`` (retryable).
    """
    deadline = None if total_timeout is None else time.monotonic() + total_timeout
    hidden = [s for s in secrets if s]
    limits = client.timeout if request_timeout is None else httpx.Timeout(request_timeout)
    response: httpx.Response | None = None
    try:
        async with client.stream("POST", url, headers=dict(headers), json=dict(payload),
                                 timeout=limits) as response:
            if not response.is_success:
                body = (await read_capped(response, max_bytes)).decode("utf-8", "replace")
                raise status_error(provider, response.status_code, body, hidden,
                                   retry_after=retry_after_seconds(response.headers))
            if response.headers.get("content-type", "").startswith("application/json"):
                raw = await read_capped(response, max_bytes)
                body = redact(raw.decode("utf-8", errors="replace"), hidden)
                raise APICallError(
                    f"{provider} answered with JSON, not an event stream: {_error_detail(body)}",
                    status_code=response.status_code, body=body)
            async with aclosing(iter_sse(response, max_bytes=max_bytes)) as events:
                async for event in events:
                    if deadline is not None and time.monotonic() > deadline:
                        raise APICallError(
                            f"{provider}'s answer took longer than {total_timeout:g} s in "
                            "all (total_timeout); it was given up", is_retryable=True)
                    yield event
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        error = translate_error(exc, provider=provider, secrets=hidden, timeout=limits)
        if _chain_mentions(exc, hidden):
            # The original would print the key in a traceback: drop it.
            raise error from None
        raise error from exc
    except SSEError as exc:
        raise APICallError(f"malformed SSE event from {provider}: {redact(str(exc), hidden)}",
                           is_retryable=False) from None
    except ResponseTooLargeError as exc:
        raise APICallError(
            f"{provider}'s response is larger than the {exc.limit} bytes allowed "
            "(max_response_bytes); it was refused", is_retryable=False) from None
    finally:
        if progress is not None and response is not None and response.is_success:
            progress.body_bytes = response.num_bytes_downloaded


_SECRET_HEADER_WORDS = ("key", "auth", "token", "secret")


def secret_header_values(headers: Mapping[str, str] | None) -> list[str]:
    """Values of extra headers whose names look like credentials, to redact them too."""
    return [value for name, value in (headers or {}).items()
            if value and any(word in name.lower() for word in _SECRET_HEADER_WORDS)]


def parse_tool_args(text: str, *, tool_name: str, provider: str,
                    secrets: Iterable[str | None]) -> dict[str, Any]:
    """The arguments of a streamed tool call, from their JSON text ("" means none).

    Raises:
        APICallError: The text is not a JSON object (not retryable).
    """
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise APICallError(
            f"{provider} sent unparsable arguments for tool {tool_name!r} ({exc}): "
            f"{redact(_excerpt(text, 200), secrets)!r}", body=redact(text, secrets)) from None
    if not isinstance(value, dict):
        raise APICallError(
            f"{provider} sent arguments for tool {tool_name!r} that are not a JSON object: "
            f"{redact(_excerpt(text, 200), secrets)!r}", body=redact(text, secrets))
    return value


def joined_text(content: str | Sequence[Mapping[str, Any]]) -> str:
    """The text of a prompt entry's content: a str as is, else its text parts joined."""
    if isinstance(content, str):
        return content
    return "".join(p["text"] for p in content if p.get("type") == "text")


def to_text(value: Any) -> str:
    """``value`` as text for a provider: a str as is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return pydantic_core.to_json(value, fallback=str).decode()


def base64_text(data: bytes | str) -> str:
    """Raw bytes as base64 text (a str is taken to be base64 already)."""
    return data if isinstance(data, str) else base64.b64encode(data).decode("ascii")


_IMAGE_MAGIC = ((b"\x89PNG", "image/png"), (b"\xff\xd8", "image/jpeg"), (b"GIF8", "image/gif"))


def image_media_type(part: Mapping[str, Any]) -> str:
    """The media type of an image part: the given one, else sniffed from its bytes."""
    given = part.get("media_type")
    if isinstance(given, str) and given:
        return given
    data = part.get("data")
    if isinstance(data, bytes):
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            return "image/webp"
        for magic, media_type in _IMAGE_MAGIC:
            if data.startswith(magic):
                return media_type
    return "image/png"
