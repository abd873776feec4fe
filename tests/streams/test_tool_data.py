"""Tool data through processors (issue 11 point 4): a tool's "data-*" chunks go through
the output stream processors that take data parts, in stream() and generate() alike."""

from __future__ import annotations

from typing import Any

from procflow.agent import Agent
from procflow.messages import DataChunk
from procflow.models import ScriptedModel, ToolCall
from procflow.processors import Processor
from procflow.tools import ToolContext, tool


@tool
async def progress(ctx: ToolContext) -> str:
    """Report progress."""
    await ctx.writer.custom({"type": "data-progress", "data": {"pct": 50, "secret": "s3"}})
    await ctx.writer.custom({"type": "data-debug", "data": {"internal": True}})
    return "done"


class DataGuard(Processor):
    """Drops debug data and strips secrets from the rest."""

    id = "data-guard"
    process_data_parts = True

    def process_output_stream(self, args: Any) -> Any:
        part = args.part
        if part.type == "data-debug":
            return None
        if isinstance(part, DataChunk):
            return DataChunk(part.name, {k: v for k, v in part.data.items() if k != "secret"})
        return part


class Blind(Processor):
    """Does not take data parts: must not see them."""

    id = "blind"
    seen: list[str]

    def __init__(self) -> None:
        self.seen = []

    def process_output_stream(self, args: Any) -> Any:
        self.seen.append(args.part.type)
        return args.part


def _agent(blind: Blind) -> Agent:
    return Agent(id="a", model=ScriptedModel([[ToolCall("progress", {})], "All done."]),
                 tools=[progress], output_processors=[DataGuard(), blind])


def _data(result: Any) -> list[dict[str, Any]]:
    return [d for m in result.messages for d in m.content.metadata.get("data", [])]


async def test_tool_data_is_edited_and_dropped_in_stream() -> None:
    """Bullet 4: a data processor sees tools' data chunks and can drop them."""
    blind = Blind()
    out = await _agent(blind).stream("go")
    chunks = [c async for c in out.full_stream]
    data = [c for c in chunks if c.type.startswith("data-")]
    assert [(c.type, c.data) for c in data] == [("data-progress", {"pct": 50})]
    assert not any(t.startswith("data-") for t in blind.seen)
    assert await out.text == "All done."


async def test_tool_data_in_generate_result() -> None:
    result = await _agent(Blind()).generate("go")
    assert _data(result) == [{"type": "data-progress", "data": {"pct": 50}}]
    assert result.text == "All done."
