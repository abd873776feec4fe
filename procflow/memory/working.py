"""Working memory: where it is kept, what the model is told, and how updates apply."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ValidationError

from procflow.errors import MemoryCorruptedError
from procflow.memory.base import MemoryScope, MemoryStore
from procflow.memory.options import DEFAULT_WORKING_MEMORY_TEMPLATE, WorkingMemoryOptions

__all__ = ["UPDATE_TOOL", "WorkingMemoryStore", "working_memory_key"]

UPDATE_TOOL = "update_working_memory"
"""The name of the tool the model updates working memory with."""


def working_memory_key(scope: MemoryScope, thread_id: str, resource_id: str | None) -> str:
    """Where a working memory is stored: per resource (when there is one) or per thread."""
    if scope == "resource" and resource_id is not None:
        return f"resource:{resource_id}"
    return f"thread:{thread_id}"


class WorkingMemoryStore:
    """Reads, renders and updates one kind of working memory in a ``MemoryStore``.

    Args:
        storage: Where it is kept.
        options: Template or schema, and scope.
    """

    def __init__(self, storage: MemoryStore, options: WorkingMemoryOptions) -> None:
        self.storage = storage
        self.options = options

    def key(self, thread_id: str, resource_id: str | None) -> str:
        """The storage key for this thread/resource."""
        return working_memory_key(self.options.scope, thread_id, resource_id)

    @property
    def blank(self) -> str:
        """What working memory holds before the first update."""
        schema = self.options.schema
        if schema is not None:
            return "{}"
        return self.options.template or DEFAULT_WORKING_MEMORY_TEMPLATE

    async def get(self, thread_id: str, resource_id: str | None) -> str | None:
        """The stored working memory, or ``None`` before the first update."""
        return await self.storage.get_working_memory(self.key(thread_id, resource_id))

    async def update(self, thread_id: str, resource_id: str | None, content: Any) -> str:
        """Apply an update and store the result: Markdown replaces the whole text; with a
        schema, a JSON object (or its text) is merged into the stored one and validated.

        Returns:
            The stored working memory.

        Raises:
            ValueError: The update does not fit (wrong type, or fails the schema).
            MemoryCorruptedError: The stored JSON cannot be read.
        """
        key = self.key(thread_id, resource_id)
        schema = self.options.schema
        if schema is None:
            if not isinstance(content, str):
                raise ValueError(f"working memory is Markdown text; got "
                                 f"{type(content).__name__}")
            value = content
        else:
            value = await self._merged(schema, key, content)
        await self.storage.set_working_memory(key, value)
        return value

    async def _merged(self, schema: type[BaseModel], key: str, content: Any) -> str:
        if isinstance(content, str):
            try:
                content = json.loads(content)
            except ValueError as exc:
                raise ValueError(f"working memory update is not JSON: {exc}") from None
        if not isinstance(content, dict):
            raise ValueError(f"working memory update must be a JSON object, got "
                             f"{type(content).__name__}")
        stored = await self.storage.get_working_memory(key)
        current: dict[str, Any] = {}
        if stored is not None:
            try:
                loaded = json.loads(stored)
            except ValueError:
                loaded = None
            if not isinstance(loaded, dict):
                raise MemoryCorruptedError(
                    f"stored working memory {key!r} is not a JSON object; it was left as it "
                    "is (overwrite it with Memory.update_working_memory)", row_id=key)
            current = loaded
        merged = {**current, **content}
        try:
            model = schema.model_validate(merged)
        except ValidationError as exc:
            raise ValueError(f"working memory update does not fit {schema.__name__}: "
                             f"{exc.errors()[0].get('msg')} at "
                             f"{'.'.join(str(p) for p in exc.errors()[0].get('loc', ()))}"
                             ) from None
        return model.model_dump_json(exclude_unset=True)

    def instructions(self, current: str | None) -> str:
        """The system message text: how to use working memory, and what it holds now."""
        schema = self.options.schema
        if schema is None:
            how = ("It is Markdown. To change it, call the `update_working_memory` tool with "
                   "the complete new Markdown as `memory` (keep what is still true).")
            body = current if current is not None else self.blank
        else:
            how = ("It is a JSON object following this schema: "
                   f"{json.dumps(schema.model_json_schema(), sort_keys=True)}. To change it, "
                   "call the `update_working_memory` tool with a JSON object of the fields "
                   "to set as `memory`; other fields are kept.")
            body = current if current is not None else self.blank
        return ("WORKING_MEMORY_SYSTEM_INSTRUCTION: You keep a working memory of what "
                "matters about the user across conversations. Update it as soon as you "
                "learn something worth remembering; never mention it to the user. " + how
                + "\n<working_memory>\n" + body + "\n</working_memory>")
