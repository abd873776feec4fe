"""The memory processors: ``MessageHistory``, ``SemanticRecall`` and ``WorkingMemory``.

They read the thread and resource ids from the request context (``THREAD_ID_KEY``,
``RESOURCE_ID_KEY``, set by the agent's ``memory=`` option) and do nothing for a
request without a thread. A thread belongs to the resource that created it (or to no
resource, when it was created without one): a request naming a thread of another
resource - or naming an owned thread without its resource id - is refused with a
``ProcessorError`` before anything is read or written, on every path (history, recall,
working memory and its tool). On input they add remembered messages (source "memory")
before the conversation; on output ``MessageHistory`` saves the call's new messages
and ``SemanticRecall`` indexes them. They run last on output, so an output guardrail's
abort means nothing is saved.

What is saved is what the call produced: its input messages as the input processors
left them, and its responses in their final form. Input-step processors (a token
limiter, a tool-call filter) edit the live list for one model call only, so the
processors keep the first version of every message they see (``process_input_step``,
``process_output_step``) and save that; an edit made by an output-result processor
(a redaction) wins.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import UTC
from typing import Any

from pydantic import BaseModel, Field, create_model

from procflow.context import RequestContext
from procflow.errors import ProcessorError
from procflow.memory.base import Embedder, MemoryStore, VectorIndex, VectorMatch, VectorStore
from procflow.memory.codec import is_hidden
from procflow.memory.options import SemanticRecallOptions, WorkingMemoryOptions
from procflow.memory.search import MessageIndex
from procflow.memory.stores import StorageArg, memory_store
from procflow.memory.vector import InMemoryVectorIndex
from procflow.memory.working import UPDATE_TOOL, WorkingMemoryStore
from procflow.messages import Message, MessageList, ToolCallPart, ToolResultPart
from procflow.processors.args import (
    ProcessInputArgs,
    ProcessInputStepArgs,
    ProcessInputStepResult,
    ProcessorArgs,
    ProcessOutputResultArgs,
    ProcessOutputStepArgs,
)
from procflow.processors.base import Processor
from procflow.tools import Tool, ToolContext

__all__ = ["MessageHistory", "SemanticRecall", "WorkingMemory", "call_messages",
           "check_owner"]

logger = logging.getLogger("procflow.memory")


def _ids(rc: RequestContext) -> tuple[str, str | None] | None:
    thread = rc.thread_id
    return None if thread is None else (thread, rc.resource_id)


def _prepend(ml: MessageList, messages: list[Message]) -> None:
    """Put ``messages`` (source "memory") before every non-system message of ``ml``."""
    if not messages:
        return
    current = [(m, ml.source_of(m.id)) for m in ml.all()]
    ml.remove_by_ids([m.id for m, _ in current])
    ml.add(messages, source="memory")
    for msg, source in current:
        ml.add(msg, source=source)


def _is_transient(message: Message) -> bool:
    signal = message.content.metadata.get("signal")
    return isinstance(signal, Mapping) and bool(signal.get("transient"))


# -- what a call produced ------------------------------------------------------------

def _record(ml: MessageList | None, state: dict[str, Any], *, step_end: bool) -> None:
    """Remember the first version of each input/response message (and, at the end of
    a step, which objects were live then)."""
    if ml is None:
        return
    first: dict[str, tuple[str, Message]] = state.setdefault("first", {})
    for msg in ml.all():
        if msg.id not in first:
            source = ml.source_of(msg.id)
            if source in ("input", "response"):
                first[msg.id] = (source, msg)
    if step_end:
        state["step_end"] = {m.id: m for m in ml.all()}


def call_messages(ml: MessageList, state: Mapping[str, Any]) -> list[Message]:
    """The messages one call produced, to save: inputs as the input processors left
    them, responses in their final form; transient signals and tool calls without a
    result left out.

    Args:
        ml: The live message list, at the output-result phase.
        state: The recording processor's state.
    """
    first: dict[str, tuple[str, Message]] = state.get("first", {})
    step_end: dict[str, Message] | None = state.get("step_end")
    live = {m.id: m for m in ml.all()}
    out: list[Message] = []
    for msg_id, (source, early) in first.items():
        current = live.get(msg_id)
        if source == "input" or step_end is None:
            out.append(early if source == "input" or current is None else current)
        elif current is None:
            if msg_id not in step_end:  # removed for a model call, not by an output processor
                out.append(early)
        elif step_end.get(msg_id) is not current:  # changed by an output-result processor
            out.append(current)
        else:
            out.append(early)
    seen = set(first)
    out += [m for m in ml.all() if m.id not in seen
            and ml.source_of(m.id) in ("input", "response")]
    return _complete_tool_calls([m for m in out if not _is_transient(m)])


def _complete_tool_calls(messages: list[Message]) -> list[Message]:
    answered = {p.tool_call_id for m in messages for p in m.content.parts
                if isinstance(p, ToolResultPart)}
    out: list[Message] = []
    for msg in messages:
        calls = [p for p in msg.content.parts if isinstance(p, ToolCallPart)]
        if all(c.tool_call_id in answered for c in calls):
            out.append(msg)
            continue
        parts = [p for p in msg.content.parts
                 if not (isinstance(p, ToolCallPart) and p.tool_call_id not in answered)]
        if parts:
            out.append(msg.model_copy(update={"content": msg.content.model_copy(
                update={"parts": parts})}))
    return out


def _stamped(messages: list[Message], thread_id: str, resource_id: str | None,
             ) -> list[Message]:
    return [m if (m.thread_id, m.resource_id) == (thread_id, resource_id)
            else m.model_copy(update={"thread_id": thread_id, "resource_id": resource_id})
            for m in messages]


class _Recording(Processor):
    """Shared by the processors that save or index what a call produced."""

    def process_input_step(self, args: ProcessInputStepArgs) -> Any:
        _record(args.message_list, args.state, step_end=False)
        return None

    def process_output_step(self, args: ProcessOutputStepArgs) -> Any:
        _record(args.message_list, args.state, step_end=True)
        return None

    @staticmethod
    def _produced(args: ProcessorArgs) -> tuple[list[Message], str, str | None] | None:
        ids = _ids(args.request_context)
        if ids is None or args.message_list is None:
            return None
        thread_id, resource_id = ids
        return (_stamped(call_messages(args.message_list, args.state), thread_id,
                         resource_id), thread_id, resource_id)


async def check_owner(storage: MemoryStore, thread_id: str, resource_id: str | None, *,
                      processor_id: str = "message-history",
                      hook: str = "process_input") -> None:
    """Refuse to use a thread that does not belong to the request's resource.

    A new thread is free; a stored one belongs to the resource it was created with
    (``None``: to no resource) and is used only by requests naming exactly that one.

    Raises:
        ProcessorError: The thread belongs to another resource, to a resource the
            request does not name, or to none while the request names one.
    """
    thread = await storage.get_thread(thread_id)
    if thread is None or thread.resource_id == resource_id:
        return
    owner = thread.resource_id
    if resource_id is None:
        problem = (f"thread {thread_id!r} belongs to resource {owner!r} and this request "
                   "names no resource; pass memory={'thread': ..., 'resource': ...} with "
                   "its owner")
    elif owner is None:
        problem = (f"thread {thread_id!r} was created without a resource, so resource "
                   f"{resource_id!r} cannot use it; use another thread id")
    else:
        problem = (f"thread {thread_id!r} belongs to resource {owner!r}, not "
                   f"{resource_id!r}; use another thread id for this resource")
    raise ProcessorError(problem, processor_id=processor_id, hook=hook)


class MessageHistory(_Recording):
    """Adds the thread's last messages before the conversation; saves the call's new
    messages after it.

    Args:
        storage: Where threads and messages live: what ``Memory(storage=...)`` takes
            (a ``Storage`` such as ``SQLiteStorage("memory.db")``, a ``MemoryStore`` or
            a SQLite file path); the same file as the agent's ``Memory`` means the
            same threads.
        last_messages: How many stored messages to add (0: none, but still save).
    """

    id = "message-history"

    def __init__(self, *, storage: StorageArg, last_messages: int = 10) -> None:
        if not isinstance(last_messages, int) or last_messages < 0:
            raise ValueError(f"last_messages must be an int >= 0, got {last_messages!r}")
        self.storage = memory_store(storage, "MessageHistory")
        self.last_messages = last_messages

    async def process_input(self, args: ProcessInputArgs) -> None:
        """Prepend the thread's last ``last_messages`` messages (hidden signals and system
        messages left out, messages already present not repeated)."""
        ids = _ids(args.request_context)
        if ids is None or args.message_list is None:
            return
        await check_owner(self.storage, *ids, processor_id=self.id)
        if self.last_messages == 0:
            return
        ml = args.message_list
        present = {m.id for m in ml.all()} | {m.id for m in ml.system()}
        history = await self.storage.get_messages(ids[0], last=self.last_messages,
                                                  include_hidden=False)
        _prepend(ml, [m for m in history if m.role != "system" and m.id not in present])

    async def process_output_result(self, args: ProcessOutputResultArgs) -> None:
        """Save what the call produced to the thread."""
        produced = self._produced(args)
        if produced is not None and produced[0]:
            await check_owner(self.storage, produced[1], produced[2], processor_id=self.id,
                              hook="process_output_result")
            await self.storage.save_messages(produced[0])


class SemanticRecall(_Recording):
    """Adds stored messages similar to the latest user message (with their neighbours);
    indexes the call's new messages after it.

    Hits from the current thread are added as memory messages; hits from the
    resource's other threads go into one system message, each line dated.

    Vectors are kept in ``storage`` beside the messages when it is a ``VectorStore``
    (every built-in store is), so they outlive the process; a ``vector`` index given
    explicitly is used instead. An embedder or index that fails never fails the call:
    recall is skipped with a warning (in the processor's violations, so in the trace),
    and messages that could not be indexed are indexed at a later recall.

    Args:
        storage: Where messages live (recalled messages are read from it): what
            ``Memory(storage=...)`` takes.
        vector: A vector index to use instead of the store's persisted vectors.
        embedder: Turns text into vectors.
        options: ``top_k``, ``message_range``, ``scope``, ``threshold``.
        index: A ready ``MessageIndex`` (to share one between processors and ``Memory``).
    """

    id = "semantic-recall"

    def __init__(self, *, storage: StorageArg, vector: VectorIndex | None = None,
                 embedder: Embedder, options: SemanticRecallOptions | None = None,
                 index: MessageIndex | None = None) -> None:
        storage = memory_store(storage, "SemanticRecall")
        self.storage = storage
        self.embedder = embedder
        self.options = options if options is not None else SemanticRecallOptions()
        if index is None and vector is None and isinstance(storage, VectorStore):
            index = MessageIndex(storage, embedder)
        self.index = index
        # Used only without an index (a store that keeps no vectors, or vector= given).
        self.vector: VectorIndex = vector if vector is not None else InMemoryVectorIndex()

    def _scope(self, thread_id: str, resource_id: str | None) -> dict[str, str]:
        if self.options.scope == "resource" and resource_id is not None:
            return {"resource_id": resource_id}
        return {"thread_id": thread_id}

    async def _search(self, query: str, top_k: int, where: dict[str, str],
                      ) -> list[VectorMatch]:
        if self.index is not None:
            ((column, key),) = where.items()
            scope = f"{column.removesuffix('_id')}:{key}"
            return await self.index.search(query, scope=scope, top_k=top_k)
        vector = (await self.embedder.embed([query]))[0]
        return await self.vector.query(vector, top_k=top_k, where=where)

    async def process_input(self, args: ProcessInputArgs) -> None:
        """Search with the latest user message and add what it finds (skipped, with a
        warning, when the embedder or the index fails)."""
        ids = _ids(args.request_context)
        ml = args.message_list
        if ids is None or ml is None:
            return
        await check_owner(self.storage, *ids, processor_id=self.id)
        query = next((m.text for m in reversed(args.messages)
                      if m.role == "user" and m.text and not is_hidden(m)), "")
        if not query:
            return
        present = {m.id for m in ml.all()}
        try:
            matches = await self._search(query, self.options.top_k + len(present),
                                         self._scope(*ids))
        except Exception as exc:
            _warn(args, "semantic recall skipped", exc)
            return
        threshold = self.options.threshold
        hits = [m.id for m in matches if m.id not in present
                and (threshold is None or m.score >= threshold)][:self.options.top_k]
        if not hits:
            return
        before, after = self.options.range
        found = await self.storage.get_messages_by_id(hits, before=before, after=after)
        found = [m for m in found if m.id not in present and m.role != "system"
                 and not is_hidden(m)]
        _prepend(ml, [m for m in found if m.thread_id == ids[0]])
        others = [m for m in found if m.thread_id != ids[0]]
        if others:
            ml.add_system(Message.system(_other_threads(others)), tag="memory")

    async def process_output_result(self, args: ProcessOutputResultArgs) -> None:
        """Save (so recall can read them) and index the call's new messages (indexing
        that fails is retried at a later recall, with a warning now)."""
        produced = self._produced(args)
        if produced is None or not produced[0]:
            return
        messages, thread_id, resource_id = produced
        await check_owner(self.storage, thread_id, resource_id, processor_id=self.id,
                          hook="process_output_result")
        await self.storage.save_messages(messages)
        try:
            await self.index_messages(messages)
        except Exception as exc:
            _warn(args, "messages not indexed yet (they are indexed at a later recall)", exc)

    async def index_messages(self, messages: Sequence[Message]) -> None:
        """Index stored messages for recall.

        Raises:
            APICallError: The embedder failed (with a persisted index, the messages are
                indexed at a later recall of their scope).
        """
        if self.index is not None:
            try:
                await self.index.index(messages)
            except Exception:
                self.index.forget_checks(sorted({
                    scope for m in messages
                    for scope in (f"thread:{m.thread_id}", f"resource:{m.resource_id}")}))
                raise
            return
        await index_messages(self.vector, self.embedder, list(messages))


def _warn(args: ProcessorArgs, what: str, exc: Exception) -> None:
    detail = str(exc) or type(exc).__name__
    logger.warning("%s: %s", what, detail)
    args.warn(f"{what}: {type(exc).__name__}: {detail}",
              {"error_type": type(exc).__name__})


async def index_messages(vector: VectorIndex, embedder: Embedder,
                         messages: list[Message]) -> None:
    """Embed and add to ``vector`` the user and assistant messages that have text (not
    hidden); for indexes that are not kept in a store."""
    wanted = [m for m in messages if m.role in ("user", "assistant") and m.text.strip()
              and not is_hidden(m)]
    if not wanted:
        return
    vectors = await embedder.embed([m.text for m in wanted])
    await vector.upsert([(m.id, v, {"thread_id": m.thread_id, "resource_id": m.resource_id,
                                    "role": m.role}) for m, v in zip(wanted, vectors,
                                                                      strict=True)])


def _other_threads(messages: list[Message]) -> str:
    lines = [f"[{m.created_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC, thread {m.thread_id}] "
             f"{m.role}: {m.text}" for m in messages if m.text]
    return ("The following messages were remembered from the user's other "
            "conversations:\n<remembered_from_other_conversation>\n" + "\n".join(lines)
            + "\n</remembered_from_other_conversation>")


class _MarkdownUpdate(BaseModel):
    memory: str = Field(description="The complete new working memory, as Markdown.")


class WorkingMemory(Processor):
    """Adds a system message with working-memory instructions and its current content,
    and gives the model the ``update_working_memory`` tool to change it.

    Args:
        storage: Where working memory lives: what ``Memory(storage=...)`` takes.
        options: Template or schema, and scope (default: resource).
    """

    id = "working-memory"

    def __init__(self, *, storage: StorageArg,
                 options: WorkingMemoryOptions | None = None) -> None:
        storage = memory_store(storage, "WorkingMemory")
        self.storage = storage
        self.store = WorkingMemoryStore(storage, options if options is not None
                                        else WorkingMemoryOptions())
        self._tool: Any = None

    async def process_input(self, args: ProcessInputArgs) -> None:
        """Add the working-memory system message (tag "memory")."""
        ids = _ids(args.request_context)
        if ids is None or args.message_list is None:
            return
        await check_owner(self.storage, *ids, processor_id=self.id)
        args.state["owner_checked"] = True
        msg = Message.system(self.store.instructions(await self.store.get(*ids)))
        args.message_list.add_system(msg, tag="memory")
        args.state["message_id"] = msg.id

    async def process_input_step(self, args: ProcessInputStepArgs) -> Any:
        """Offer the update tool; after the first step, show the latest content."""
        ids = _ids(args.request_context)
        if ids is None:
            return None
        if not args.state.get("owner_checked"):
            await check_owner(self.storage, *ids, processor_id=self.id,
                              hook="process_input_step")
            args.state["owner_checked"] = True
        ml, message_id = args.message_list, args.state.get("message_id")
        if args.step_number > 0 and ml is not None and message_id is not None \
                and ml.get(message_id) is not None:
            fresh = Message.system(self.store.instructions(await self.store.get(*ids)),
                                   id=message_id)
            ml.replace(message_id, fresh)
        tools = args.tools
        current = dict(tools) if isinstance(tools, Mapping) \
            else {t.id: t for t in (tools or [])}
        current[UPDATE_TOOL] = self.tool()
        return ProcessInputStepResult(tools=list(current.values()))

    def tool(self) -> Any:
        """The ``update_working_memory`` tool (a ``procflow.tools.Tool``)."""
        if self._tool is None:
            schema = self.store.options.schema
            model: type[BaseModel] = _MarkdownUpdate if schema is None else create_model(
                "update_working_memory_input",
                memory=(dict[str, Any], Field(description="Fields of the working memory "
                                              "to set (a JSON object)")))

            async def execute(parsed: Any, ctx: ToolContext) -> str:
                ids = _ids(ctx.request_context)
                if ids is None:
                    return "Working memory is not available: this request has no thread."
                await check_owner(self.storage, *ids, processor_id=self.id,
                                  hook=f"tool {UPDATE_TOOL}")
                try:
                    await self.store.update(*ids, parsed.memory)
                except ValueError as exc:
                    return f"Working memory was not updated: {exc}"
                return "Working memory updated."

            self._tool = Tool(UPDATE_TOOL, "Update the working memory: what you know about "
                              "the user that should be remembered across conversations.",
                              model, execute)
        return self._tool
