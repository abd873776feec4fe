"""Structured output: an agent's answer validated as a type (``output_type=Model``).

The model is asked for JSON matching the type's schema: natively where the provider
can (``ModelRequest.output_schema``: OpenAI's JSON-schema response format, a forced
tool on Anthropic), else by instructions in the prompt. The final answer's text is
validated; a failure is told to the model, which tries again (``output_retries``), and
an answer still invalid after that ends the call with ``OutputValidationError``.
Nothing here runs for an agent without ``output_type``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Generic, final

import pydantic_core
from pydantic import TypeAdapter, ValidationError
from typing_extensions import TypeVar

from procflow.errors import OutputValidationError
from procflow.messages import Message
from procflow.models.base import OutputSchema

__all__ = ["OutputCheck", "OutputSpec", "OutputT", "check_output"]

OutputT = TypeVar("OutputT", default=Any)
"""The type of an agent's structured answer (``Any`` when not given)."""

_T = TypeVar("_T")
_WRAP_KEY = "result"
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?```\s*$", re.DOTALL)
_NAME = re.compile(r"[^A-Za-z0-9_-]")


@final
class OutputSpec(Generic[_T]):
    """What an answer must be: the type, its validator and the schema sent to the model.

    A type whose schema is not an object (``list[int]``, ``str``...) is asked for as
    ``{"result": ...}``, since providers want an object at the top, and unwrapped.

    Args:
        output_type: A pydantic model, dataclass, TypedDict or any type pydantic validates.

    Raises:
        TypeError: pydantic cannot make a JSON schema of ``output_type``.
    """

    __slots__ = ("adapter", "output_type", "schema", "wrapped")

    def __init__(self, output_type: type[_T]) -> None:
        try:
            self.adapter: TypeAdapter[_T] = TypeAdapter(output_type)
            schema = self.adapter.json_schema()
        except Exception as exc:  # pydantic's schema errors have no common base
            raise TypeError(f"output_type {output_type!r} cannot be described as a JSON "
                            f"schema: {exc}") from exc
        self.output_type = output_type
        self.wrapped = schema.get("type") != "object"
        if self.wrapped:
            defs = schema.pop("$defs", None)
            schema = {"type": "object", "properties": {_WRAP_KEY: schema},
                      "required": [_WRAP_KEY]}
            if defs:
                schema["$defs"] = defs
        name = _NAME.sub("_", getattr(output_type, "__name__", "") or "output")[:64]
        doc = (getattr(output_type, "__doc__", None) or "").strip().split("\n\n")[0]
        self.schema = OutputSchema(name=name or "output", schema=schema,
                                   description=" ".join(doc.split()))

    def __repr__(self) -> str:
        return f"OutputSpec({self.output_type!r})"

    def parse(self, text: str) -> _T:
        """The answer ``text`` validated (code fences around the JSON are allowed).

        Raises:
            ValidationError: It is not JSON of the type.
        """
        text = _json_text(text)
        if not self.wrapped:
            return self.adapter.validate_json(text)
        value = pydantic_core.from_json(text or "null")
        if not isinstance(value, dict) or _WRAP_KEY not in value:
            return self.adapter.validate_python(value)
        return self.adapter.validate_python(value[_WRAP_KEY])

    def partial(self, text: str) -> _T | None:
        """The answer so far, validated leniently (an unfinished last string or item is
        allowed), or ``None`` while it does not validate yet."""
        text = _json_text(text)
        if not text:
            return None
        try:
            if not self.wrapped:
                return self.adapter.validate_json(
                    text, experimental_allow_partial="trailing-strings")
            value = pydantic_core.from_json(text, allow_partial="trailing-strings")
            if not isinstance(value, dict) or _WRAP_KEY not in value:
                return None
            return self.adapter.validate_python(
                value[_WRAP_KEY], experimental_allow_partial="trailing-strings")
        except (ValidationError, ValueError):
            return None

    def instructions(self) -> str:
        """What a model without native structured output is told (a system message)."""
        return ("Answer with one JSON value and nothing else (no prose, no code fence) "
                "matching this JSON schema:\n" + json.dumps(self.schema.schema))


def _json_text(text: str) -> str:
    text = text.strip()
    fenced = _FENCE.match(text)
    return fenced.group(1).strip() if fenced else text


class OutputCheck:
    """The structured output of one call: the spec, the retries left and the answer."""

    __slots__ = ("retries", "spec", "used", "value")

    def __init__(self, spec: OutputSpec[Any], retries: int) -> None:
        self.spec = spec
        self.retries = retries
        self.used = 0
        self.value: Any = None


def check_output(check: OutputCheck, state: Any, text: str) -> None:
    """Validate a final answer: keep the value, or give the model the errors and ask for
    a retry (``state.retrying``), or end the call with ``OutputValidationError``."""
    try:
        check.value = check.spec.parse(text)
        return
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_context=False)
        detail = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}"
                           for e in errors[:10])
    if check.used < check.retries:
        check.used += 1
        msg = Message.user(
            '<system-reminder type="output-validation">Your answer is not valid JSON of the '
            f"required schema ({detail}). Answer again with only the corrected JSON."
            "</system-reminder>")
        msg.content.metadata["signal"] = {"type": "output-validation", "hidden": True,
                                          "transient": True}
        state.messages.add(msg, source="input")
        state.retrying = True
        return
    state.error = OutputValidationError(
        f"the answer is not a valid {check.spec.schema.name} after {check.used + 1} "
        f"attempt(s): {detail}", text=text, errors=errors, attempts=check.used + 1)
    state.finish_reason = "error"
