"""Error processors: recover from provider rejections by fixing the request and retrying.

Each keeps its own small retry count in ``args.state`` (per request), on top of the
agent's overall budget (``max_processor_retries``, 10 by default with error processors).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from procflow.messages import Message, MessageList, ToolCallPart, ToolResultPart
from procflow.processors.args import (
    APIErrorResult,
    ProcessAPIErrorArgs,
    ProcessLLMRequestArgs,
    ProcessLLMRequestResult,
)
from procflow.processors.base import Processor

__all__ = ["CompatRule", "PrefillErrorHandler", "ProviderHistoryCompat",
           "StreamErrorRetryProcessor"]


def _error_text(error: BaseException) -> str:
    parts = [str(error), str(getattr(error, "body", "") or "")]
    cause = error.__cause__
    while cause is not None and len(parts) < 8:
        parts.append(str(cause))
        cause = cause.__cause__
    return " ".join(parts)


def _take_retry(args: Any, limit: int) -> bool:
    used = int(args.state.get("retries", 0))
    if used >= limit:
        return False
    args.state["retries"] = used + 1
    return True


class PrefillErrorHandler(Processor):
    """Anthropic rejects a conversation ending with an assistant message ("assistant
    message prefill"): add a hidden ``<system-reminder>continue</system-reminder>``
    user message and retry, once.

    ``AnthropicModel`` itself resends such a request with that message (the seed: the
    handler "is injected automatically, with nothing to configure"); list this one for
    other models, or to see the rejection in your own error processors first."""

    id = "prefill-error-handler"
    _pattern = re.compile(r"prefill|final message must be a user message|must end with a "
                          r"user message", re.IGNORECASE)

    def process_api_error(self, args: ProcessAPIErrorArgs) -> APIErrorResult | None:
        if not self._pattern.search(_error_text(args.error)) or not _take_retry(args, 1):
            return None
        msg = Message.user("<system-reminder>continue</system-reminder>")
        msg.content.metadata["signal"] = {"type": "prefill-continue", "hidden": True,
                                          "processor_id": self.id}
        assert args.message_list is not None
        args.message_list.add(msg, source="input")
        return APIErrorResult(retry=True)


class StreamErrorRetryProcessor(Processor):
    """Retry a call that failed in a way that may pass next time: a retryable
    ``APICallError`` (429, 5xx, connection reset, timeout) anywhere in the cause
    chain, or an error any ``matchers`` function accepts. When the provider said how
    long to wait (``Retry-After``, as ``error.retry_after``), the retry waits that long
    (at most ``max_wait`` seconds; longer asks are not retried).

    Args:
        max_retries: Retries this processor grants per request (default 1).
        matchers: Extra predicates on the error.
        max_wait: The longest ``Retry-After`` honoured, in seconds (default 60).
    """

    id = "stream-error-retry-processor"

    def __init__(self, *, max_retries: int = 1,
                 matchers: Sequence[Callable[[BaseException], bool]] = (),
                 max_wait: float = 60.0) -> None:
        if not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be an int >= 0, got {max_retries!r}")
        if not max_wait >= 0:
            raise ValueError(f"max_wait must be >= 0, got {max_wait!r}")
        self.max_retries = max_retries
        self.matchers = list(matchers)
        self.max_wait = max_wait

    def _retryable(self, error: BaseException) -> bool:
        current: BaseException | None = error
        while current is not None:
            if getattr(current, "is_retryable", False):
                return True
            current = current.__cause__
        return any(m(error) for m in self.matchers)

    async def process_api_error(self, args: ProcessAPIErrorArgs) -> APIErrorResult | None:
        if not self._retryable(args.error):
            return None
        wait = _retry_after(args.error)
        if wait is not None and wait > self.max_wait:
            return None
        if not _take_retry(args, self.max_retries):
            return None
        if wait:
            await anyio.sleep(wait)
        return APIErrorResult(retry=True)


def _retry_after(error: BaseException) -> float | None:
    current: BaseException | None = error
    while current is not None:
        value = getattr(current, "retry_after", None)
        if isinstance(value, int | float):
            return float(value)
        current = current.__cause__
    return None


@dataclass(frozen=True, slots=True)
class CompatRule:
    """A provider-compatibility rule.

    Attributes:
        name: For logs and state.
        error_patterns: Regexes; a rejection matching one triggers ``fix``.
        fix: Repairs the message list after such a rejection; returns whether it
            changed anything (a retry follows only then).
        apply_to_prompt: Rewrites every outgoing prompt for the given model
            (preemptive); never touches the stored conversation.
    """

    name: str
    error_patterns: tuple[str, ...] = ()
    fix: Callable[[MessageList], bool] | None = None
    apply_to_prompt: Callable[[list[dict[str, Any]], Any], list[dict[str, Any]]] | None = None

    def matches(self, text: str) -> bool:
        return any(re.search(p, text, re.IGNORECASE) for p in self.error_patterns)


_TOOL_ID_OK = re.compile(r"^[A-Za-z0-9_-]+$")


def _fix_tool_ids(ml: MessageList) -> bool:
    changed = False
    for msg in ml.all():
        parts = msg.content.parts
        for i, part in enumerate(parts):
            if isinstance(part, ToolCallPart | ToolResultPart) and \
                    not _TOOL_ID_OK.match(part.tool_call_id):
                clean = re.sub(r"[^A-Za-z0-9_-]", "_", part.tool_call_id)
                parts[i] = part.model_copy(update={"tool_call_id": clean})
                changed = True
    return changed


def _strip_reasoning(prompt: list[dict[str, Any]], model: Any) -> list[dict[str, Any]]:
    if getattr(model, "provider", "") not in ("anthropic", "cerebras"):
        return prompt
    out = []
    for entry in prompt:
        content = entry.get("content")
        if isinstance(content, list):
            entry = {**entry, "content": [p for p in content if p.get("type") != "reasoning"]}
        out.append(entry)
    return out


BUILTIN_RULES: tuple[CompatRule, ...] = (
    CompatRule("anthropic-tool-id-format",
               error_patterns=(r"tool_use\.id", r"tool_use_id", r"should match pattern"),
               fix=_fix_tool_ids),
    CompatRule("strip-foreign-reasoning", apply_to_prompt=_strip_reasoning),
)


class ProviderHistoryCompat(Processor):
    """Keeps a conversation usable across providers: preemptive prompt rewrites
    (``process_llm_request``) and reactive repairs after a matching rejection
    (``process_api_error``, one retry per rule).

    Args:
        additional_rules: Rules run after the built-in ones.
    """

    id = "provider-history-compat"

    def __init__(self, *, additional_rules: Sequence[CompatRule] = ()) -> None:
        self.rules = (*BUILTIN_RULES, *additional_rules)

    def process_llm_request(self, args: ProcessLLMRequestArgs) -> ProcessLLMRequestResult | None:
        prompt = args.prompt
        for rule in self.rules:
            if rule.apply_to_prompt is not None:
                prompt = rule.apply_to_prompt(prompt, args.model)
        return ProcessLLMRequestResult(prompt=prompt) if prompt is not args.prompt else None

    def process_api_error(self, args: ProcessAPIErrorArgs) -> APIErrorResult | None:
        text = _error_text(args.error)
        used: dict[str, int] = args.state.setdefault("rules", {})
        for rule in self.rules:
            if rule.fix is None or not rule.matches(text) or used.get(rule.name):
                continue
            assert args.message_list is not None
            if rule.fix(args.message_list):
                used[rule.name] = 1
                return APIErrorResult(retry=True)
        return None
