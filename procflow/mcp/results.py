"""An MCP tool result as the value an agent's tool result carries."""

from __future__ import annotations

import json
from typing import Any

from mcp import types as mt

from procflow.messages import FilePart, ImagePart

__all__ = ["to_value"]


def to_value(result: mt.CallToolResult) -> tuple[Any, str, int]:
    """The value the model sees for ``result``, its text, and its size in characters.

    Text only: the text (parts joined by newlines). Structured content and nothing but
    text: the structured value. Images, audio and resources: a list of the text parts
    (``str``) and media parts (``ImagePart``/``FilePart`` dumped to JSON-ready dicts).
    """
    texts: list[str] = []
    items: list[Any] = []
    media = False
    for block in result.content:
        if isinstance(block, mt.TextContent):
            texts.append(block.text)
            items.append(block.text)
            continue
        media = True
        items.append(_part(block))
    text = "\n".join(texts)
    structured = result.structured_content
    if media:
        value: Any = items
    elif structured is not None and not result.is_error:
        value = structured
    else:
        value = text
    size = len(text) + sum(len(json.dumps(i)) for i in items if not isinstance(i, str))
    if structured is not None:
        size = max(size, len(json.dumps(structured, default=str)))
    return value, text, size


def _part(block: Any) -> Any:
    if isinstance(block, mt.ImageContent):
        return ImagePart(data=block.data, media_type=block.mime_type).model_dump(mode="json")
    if isinstance(block, mt.AudioContent):
        return FilePart(data=block.data, media_type=block.mime_type).model_dump(mode="json")
    if isinstance(block, mt.EmbeddedResource):
        res = block.resource
        if isinstance(res, mt.TextResourceContents):
            return res.text
        return FilePart(data=res.blob, media_type=res.mime_type or "application/octet-stream",
                        filename=str(res.uri)).model_dump(mode="json")
    if isinstance(block, mt.ResourceLink):
        return FilePart(url=str(block.uri), media_type=block.mime_type or
                        "application/octet-stream", filename=block.name).model_dump(mode="json")
    return block.model_dump(mode="json")
