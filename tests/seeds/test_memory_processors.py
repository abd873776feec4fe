"""The TypeScript examples of memory-processors.zh-TW.md, translated line for line.

One test per example, named after the seed's section; each asserts what the seed says
the example does, with ``ScriptedModel`` in place of a hosted model. The translation:

- ``new LibSQLStore({ id, url: 'file:memory.db' })`` -> ``SQLiteStorage("memory.db")``
  (each test runs in its own temporary directory); ``MessageHistory`` takes the same
  ``storage=`` values as ``Memory`` (rule: a hand-built memory processor on the same
  file sees the same threads).
- ``PineconeVector`` -> ``InMemoryVectorIndex()``; ``OpenAIEmbedder`` -> the local
  ``HashEmbedder()`` (offline). procflow has embedded defaults for both, so
  ``semantic_recall=True`` alone also works (the seed requires them to be set).
- The seed's calls have no thread (``agent.generate('Hello')``); memory processors
  need one to read or save anything, so the tests pass ``memory={"thread": ...,
  "resource": ...}`` where the seed's claim is about what memory holds.
- An object literal ``{ id, processOutputResult }`` is a ``Processor`` subclass.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from procflow.agent import Agent
from procflow.errors import ProcessorError
from procflow.memory import HashEmbedder, InMemoryVectorIndex, Memory
from procflow.messages import FilePart, Message, TextPart
from procflow.models import FunctionModel, ScriptedModel, ToolCall
from procflow.processors import MessageHistory, Processor, TokenLimiter
from procflow.storage import SQLiteStorage

WHO = {"thread": "thread-1", "resource": "user-1"}


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # 'file:memory.db' and the default .procflow/memory.db


def in_order(*texts: str) -> FunctionModel:
    """A model answering its calls with ``texts`` in turn. A ScriptedModel answers from
    the assistant turns it is shown, and memory shows it a window of the thread."""
    answers = iter(texts)
    return FunctionModel(lambda request: next(answers))


def prompt_texts(model: ScriptedModel | FunctionModel, call: int = -1) -> list[str]:
    """The role/content of every message the model got in one call, as text."""
    return [f"{m['role']}: {m['content']}" for m in model.requests[call].prompt]


async def fill(memory: Memory, n: int, thread: str = "thread-1",
               resource: str = "user-1") -> None:
    await memory.save_messages(
        [Message.user(f"old question {i}") if i % 2 == 0 else Message.assistant(f"old answer {i}")
         for i in range(n)], thread_id=thread, resource_id=resource)


# -- MessageHistory ---------------------------------------------------------------------------


async def test_message_history_is_added_on_input_and_output() -> None:
    model = in_order("answer A", "answer B")
    memory = Memory(
        storage=SQLiteStorage("memory.db"),
        last_messages=10,  # MessageHistory processor automatically added
    )
    agent = Agent(
        id="test-agent",
        name="Test Agent",
        instructions="You are a helpful assistant",
        model=model,
        memory=memory,
    )
    # Mastra adds it to the input processors (before the LLM) and the output ones (after).
    assert [p.id for p in memory.input_processors()] == ["message-history"]
    assert [p.id for p in memory.output_processors()] == ["message-history"]
    assert memory.input_processors()[0].last_messages == 10  # type: ignore[attr-defined]

    await fill(memory, 14)
    await agent.generate("new question", memory=WHO)
    # Input: the last 10 stored messages, in front of the conversation.
    seen = prompt_texts(model)
    assert seen[0] == "system: You are a helpful assistant"
    assert seen[1:] == [f"{'user: old question' if i % 2 == 0 else 'assistant: old answer'} {i}"
                        for i in range(4, 14)] + ["user: new question"]
    # Output: the new messages saved to storage.
    stored = await memory.get_messages("thread-1")
    assert [m.text for m in stored[-2:]] == ["new question", "answer A"]
    assert len(stored) == 16
    # ... and the next call sees them (in a new process too: same file).
    again = Memory(storage=SQLiteStorage("memory.db"), last_messages=10)
    await Agent(id="test-agent", model=model, memory=again).generate("next", memory=WHO)
    assert prompt_texts(model)[-3:] == ["user: new question", "assistant: answer A",
                                        "user: next"]


# -- SemanticRecall ---------------------------------------------------------------------------


async def test_semantic_recall_finds_old_messages_and_indexes_new_ones() -> None:
    model = in_order("Noted.", "Your cat is Whiskers.")
    vector = InMemoryVectorIndex()
    agent = Agent(
        name="semantic-agent",
        instructions="You are a helpful assistant with semantic memory",
        model=model,
        memory=Memory(
            storage=SQLiteStorage("memory.db"),
            vector=vector,
            embedder=HashEmbedder(),
            semantic_recall=True,  # SemanticRecall processor automatically added
            last_messages=2,
        ),
    )
    memory = agent.memory
    assert [p.id for p in memory.input_processors()] == ["message-history", "semantic-recall"]
    assert [p.id for p in memory.output_processors()] == ["semantic-recall", "message-history"]

    await agent.generate("My cat is named Whiskers and she likes tuna.", memory=WHO)
    # Output: embeddings of the new messages went to the vector store.
    assert len(vector) == 2
    await fill(memory, 6)  # later talk pushes the cat out of the last 2 messages
    await agent.generate("What is the name of my cat?", memory=WHO)
    seen = prompt_texts(model)
    # Input: the similar old message is in front of the conversation, though it is
    # not among the last 2 messages.
    assert "user: My cat is named Whiskers and she likes tuna." in seen
    assert seen[-1] == "user: What is the name of my cat?"
    assert seen.index("user: My cat is named Whiskers and she likes tuna.") < len(seen) - 1


# -- WorkingMemory ----------------------------------------------------------------------------


async def test_working_memory_is_loaded_on_input_only() -> None:
    model = ScriptedModel([
        [ToolCall("update_working_memory",
                  {"memory": "# User Information\n- **First Name**: Ada\n"})],
        "I will remember that.",
        "Hello Ada!",
    ])
    agent = Agent(
        name="working-memory-agent",
        instructions="You are an assistant with working memory",
        model=model,
        memory=Memory(
            storage=SQLiteStorage("memory.db"),
            working_memory=True,  # WorkingMemory processor automatically added
        ),
    )
    memory = agent.memory
    assert "working-memory" in [p.id for p in memory.input_processors()]
    # Output: no output processing.
    assert "working-memory" not in [p.id for p in memory.output_processors()]

    await agent.generate("My name is Ada.", memory=WHO)
    assert "Ada" in (await memory.get_working_memory("thread-1") or "")
    # Input: the thread's working memory is put in front of the conversation.
    await agent.generate("Hi again", memory={"thread": "thread-2", "resource": "user-1"})
    first = model.requests[-1].prompt[:2]
    assert all(m["role"] == "system" for m in first)
    assert "**First Name**: Ada" in str(first)


# -- 手動控制與去除重複項目 (manual control and dedup) --------------------------------------------


async def test_a_memory_processor_listed_by_hand_is_not_added_again() -> None:
    # Custom MessageHistory with different configuration
    custom_message_history = MessageHistory(
        storage=SQLiteStorage("memory.db"),
        last_messages=20,
    )
    model = in_order("ok", "ok")
    agent = Agent(
        name="custom-memory-agent",
        instructions="You are a helpful assistant",
        model=model,
        memory=Memory(
            storage=SQLiteStorage("memory.db"),
            last_messages=10,  # This would normally add MessageHistory(10)
        ),
        input_processors=[
            custom_message_history,  # Your custom one is used instead
            TokenLimiter(limit=4000),  # Runs after your custom MessageHistory
        ],
    )
    await fill(agent.memory, 30)
    await agent.generate("hello", memory=WHO)
    seen = prompt_texts(model)
    assert len(seen) == 1 + 20 + 1  # instructions, 20 remembered (not 10), the input
    assert seen[1] == "user: old question 10"
    # Saving still happens (the memory's MessageHistory stays on the output side).
    assert [m.text for m in (await agent.memory.get_messages("thread-1"))[-2:]] == [
        "hello", "ok"]

    # "Runs after": a token limiter placed after it trims the history it loaded.
    tight = Agent(name="custom-memory-agent", model=model,
                  memory=Memory(storage=SQLiteStorage("memory.db"), last_messages=10),
                  input_processors=[custom_message_history, TokenLimiter(limit=40)])
    await tight.generate("hello again", memory=WHO)
    trimmed = prompt_texts(model)
    assert trimmed[-1] == "user: hello again" and len(trimmed) < 10


# -- Processor 執行順序 / 輸出 guardrail (output guardrail) ---------------------------------------


def contains_bad_content(msg: Message) -> bool:
    return "forbidden" in msg.text.lower()


class ContentBlocker(Processor):
    """Output guardrail that blocks inappropriate content."""

    id = "content-blocker"

    async def process_output_result(self, args: Any) -> list[Message]:
        has_inappropriate_content = any(contains_bad_content(msg) for msg in args.messages)
        if has_inappropriate_content:
            args.abort("Content blocked by guardrail")
        return args.messages


content_blocker = ContentBlocker()


async def test_output_guardrail_abort_means_nothing_is_saved() -> None:
    model = in_order("Here is the forbidden recipe.", "Hello! How can I help?")
    agent = Agent(
        id="safe-agent",
        name="safe-agent",
        instructions="You are a helpful assistant",
        model=model,
        memory=Memory(last_messages=10),
        # Your guardrail runs BEFORE memory saves
        output_processors=[content_blocker],
    )
    # If the guardrail aborts, nothing is saved to memory
    result = await agent.generate("Hello", memory=WHO)
    lines = []
    if result.tripwire:
        lines.append(f"Blocked: {result.tripwire.reason}")
        # Memory is empty - no messages were persisted
    assert lines == ["Blocked: Content blocked by guardrail"]
    assert await agent.memory.get_messages("thread-1") == []
    assert str(agent.memory.storage.path).endswith(".procflow/memory.db")  # embedded default

    ok = await agent.generate("Hello", memory=WHO)
    assert ok.tripwire is None
    assert [m.text for m in await agent.memory.get_messages("thread-1")] == [
        "Hello", "Hello! How can I help?"]


# -- 輸入 guardrail (input guardrail) -----------------------------------------------------------


def is_invalid_input(message: Message | None) -> bool:
    return message is not None and "drop table" in message.text.lower()


class InputValidator(Processor):
    """Input guardrail that validates user input."""

    id = "input-validator"

    def __init__(self) -> None:
        self.saw: list[list[str]] = []

    async def process_input(self, args: Any) -> list[Message]:
        self.saw.append([m.text for m in args.message_list.all()])
        last_user_message = next((m for m in reversed(args.messages) if m.role == "user"),
                                 None)
        if is_invalid_input(last_user_message):
            args.abort("Invalid input detected")
        return args.messages


async def test_input_guardrail_runs_after_history_and_stops_everything() -> None:
    input_validator = InputValidator()
    model = ScriptedModel(["fine"])
    agent = Agent(
        id="validated-agent",
        name="validated-agent",
        instructions="You are a helpful assistant",
        model=model,
        memory=Memory(last_messages=10),
        # Your guardrail runs AFTER memory loads history
        input_processors=[input_validator],
    )
    await fill(agent.memory, 2)
    result = await agent.generate("please DROP TABLE users", memory=WHO)
    assert result.tripwire is not None and result.tripwire.reason == "Invalid input detected"
    assert model.requests == []  # the LLM is never called
    # Memory had loaded the history before the guardrail ran ...
    assert input_validator.saw[0] == ["old question 0", "old answer 1",
                                      "please DROP TABLE users"]
    # ... and nothing was saved (output processors, memory's included, were skipped).
    assert [m.text for m in await agent.memory.get_messages("thread-1")] == [
        "old question 0", "old answer 1"]


# -- 處理大型附件 (large attachments) -------------------------------------------------------------


class AttachmentUploader(Processor):
    id = "attachment-uploader"

    async def process_input(self, args: Any) -> list[Message]:
        return [await self.process_message(message) for message in args.messages]

    async def process_message(self, message: Message) -> Message:
        attachments = [p for p in message.content.parts if isinstance(p, FilePart)]
        if not attachments:
            return message

        uploaded: list[Any] = []
        for part in message.content.parts:
            if not isinstance(part, FilePart) or not (part.url or "").startswith("data:"):
                uploaded.append(part)
                continue
            url = await self.upload(part.url or "", part.media_type)
            uploaded.append(part.model_copy(update={"url": url}))

        return message.model_copy(
            update={"content": message.content.model_copy(update={"parts": uploaded})})

    async def upload(self, data_uri: str, content_type: str | None = None) -> str:
        base64_part = data_uri.split(",")[1]
        buffer = base64.b64decode(base64_part)  # noqa: F841 (the seed's stub)

        raise NotImplementedError("Implement upload() with your storage provider")


class BucketUploader(AttachmentUploader):
    """The seed's uploader with ``upload`` implemented (a dict stands in for a bucket)."""

    def __init__(self) -> None:
        self.bucket: dict[str, bytes] = {}

    async def upload(self, data_uri: str, content_type: str | None = None) -> str:
        buffer = base64.b64decode(data_uri.split(",")[1])
        url = f"https://files.example.com/{len(self.bucket)}"
        self.bucket[url] = buffer
        return url


def message_with_attachment() -> Message:
    data = base64.b64encode(b"%PDF-1.7 " + b"x" * 2000).decode()
    return Message(role="user", content={"parts": [
        TextPart(text="Please read the attached invoice."),
        FilePart(url=f"data:application/pdf;base64,{data}", media_type="application/pdf")]})


async def test_attachment_uploader_replaces_data_urls_before_saving() -> None:
    uploader = BucketUploader()
    model = ScriptedModel(["Got it."])
    support_agent = Agent(
        id="support-agent",
        name="Support agent",
        instructions="Answer customer support questions.",
        model=model,
        memory=Memory(last_messages=10),
        input_processors=[uploader],
    )
    original = message_with_attachment()
    await support_agent.generate([original], memory=WHO)
    stored = await support_agent.memory.get_messages("thread-1")
    files = [p for m in stored for p in m.content.parts if isinstance(p, FilePart)]
    assert [f.url for f in files] == ["https://files.example.com/0"]
    assert uploader.bucket["https://files.example.com/0"].startswith(b"%PDF-1.7")
    assert "base64" not in str(model.requests[0].prompt)
    # The input message itself was not modified.
    assert (original.content.parts[1].url or "").startswith("data:")  # type: ignore[union-attr]


async def test_attachment_uploader_stub_fails_loudly_and_plain_messages_pass() -> None:
    agent = Agent(id="support-agent", model=ScriptedModel(["ok"]),
                  memory=Memory(last_messages=10), input_processors=[AttachmentUploader()])
    assert (await agent.generate("no attachment here", memory=WHO)).text == "ok"
    with pytest.raises(ProcessorError, match="Implement upload"):
        await agent.generate([message_with_attachment()], memory=WHO)


# -- the rules the translation needed --------------------------------------------------------


def test_an_agent_given_only_a_name_takes_it_as_its_id() -> None:
    agent = Agent(name="semantic-agent", model=ScriptedModel(["x"]))
    assert (agent.id, agent.name) == ("semantic-agent", "semantic-agent")
    with pytest.raises(TypeError, match="id="):
        Agent(model=ScriptedModel(["x"]))


async def test_memory_processors_take_what_memory_takes_as_storage() -> None:
    from procflow.memory import SemanticRecall, SQLiteMemoryStore, WorkingMemory

    await SQLiteMemoryStore("memory.db").save_messages(
        [Message.user("hi").model_copy(update={"thread_id": "t"})])
    for storage in (SQLiteStorage("memory.db"), "memory.db", Path("memory.db"),
                    SQLiteMemoryStore("memory.db")):
        history = MessageHistory(storage=storage)
        assert [m.text for m in await history.storage.get_messages("t")] == ["hi"]
    assert isinstance(SemanticRecall(storage="memory.db", embedder=HashEmbedder()).storage,
                      SQLiteMemoryStore)
    assert isinstance(WorkingMemory(storage=SQLiteStorage("memory.db")).storage,
                      SQLiteMemoryStore)
    with pytest.raises(TypeError, match=r"MessageHistory\(storage=...\) takes .* got int"):
        MessageHistory(storage=3)  # type: ignore[arg-type]
