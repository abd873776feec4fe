"""Options of ``Memory``: ``SemanticRecallOptions`` and ``WorkingMemoryOptions``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from pydantic import BaseModel

from procflow.memory.base import MemoryScope

__all__ = ["DEFAULT_WORKING_MEMORY_TEMPLATE", "SemanticRecallOptions", "WorkingMemoryOptions"]

DEFAULT_WORKING_MEMORY_TEMPLATE: Final = """# User Information
- **First Name**:
- **Last Name**:
- **Location**:
- **Occupation**:
- **Interests**:
- **Goals**:
"""
"""The Markdown working memory starts from when neither a template nor a schema is given."""

_SCOPES: Final = ("thread", "resource")


@dataclass(frozen=True, slots=True, kw_only=True)
class SemanticRecallOptions:
    """How ``SemanticRecall`` finds old messages similar to the latest user message.

    Attributes:
        top_k: How many similar messages to retrieve.
        message_range: Neighbours to include around each hit: an int for both sides,
            or ``(before, after)``.
        scope: Search the current thread only, or every thread of the resource (the
            default; without a resource id it falls back to the thread).
        threshold: Leave out hits less similar than this cosine score.
    """

    top_k: int = 4
    message_range: int | tuple[int, int] = 1
    scope: MemoryScope = "resource"
    threshold: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.top_k, int) or isinstance(self.top_k, bool) or self.top_k < 1:
            raise ValueError(f"SemanticRecallOptions.top_k must be an int >= 1, got "
                             f"{self.top_k!r}")
        before, after = self.range
        if before < 0 or after < 0:
            raise ValueError(f"SemanticRecallOptions.message_range must be >= 0, got "
                             f"{self.message_range!r}")
        if self.scope not in _SCOPES:
            raise ValueError(f"SemanticRecallOptions.scope must be 'thread' or 'resource', "
                             f"got {self.scope!r}")

    @property
    def range(self) -> tuple[int, int]:
        """``message_range`` as ``(before, after)``."""
        value = self.message_range
        if isinstance(value, int) and not isinstance(value, bool):
            return value, value
        if (isinstance(value, tuple) and len(value) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
            return value[0], value[1]
        raise ValueError(f"SemanticRecallOptions.message_range must be an int or a "
                         f"(before, after) pair of ints, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkingMemoryOptions:
    """What ``WorkingMemory`` keeps: a Markdown ``template`` the model fills in, or a
    pydantic ``schema`` whose JSON it updates (one or the other, not both).

    Attributes:
        template: Markdown to start from (default ``DEFAULT_WORKING_MEMORY_TEMPLATE``).
        schema: A pydantic model; updates are merged into the stored JSON and validated.
        scope: One working memory per resource (the default; per thread when the
            request has no resource id), or one per thread.
    """

    template: str | None = None
    schema: type[BaseModel] | None = None
    scope: MemoryScope = "resource"

    def __post_init__(self) -> None:
        if self.template is not None and self.schema is not None:
            raise ValueError("WorkingMemoryOptions takes a template or a schema, not both")
        if self.schema is not None and not (isinstance(self.schema, type)
                                            and issubclass(self.schema, BaseModel)):
            raise ValueError(f"WorkingMemoryOptions.schema must be a pydantic model class, "
                             f"got {self.schema!r}")
        if self.scope not in _SCOPES:
            raise ValueError(f"WorkingMemoryOptions.scope must be 'thread' or 'resource', "
                             f"got {self.scope!r}")
