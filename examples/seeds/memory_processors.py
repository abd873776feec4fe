"""memory-processors.zh-TW.md, run offline: what the memory processors load and save.

Run it with ``python examples/seeds/memory_processors.py [DIR]``. The seed's
``LibSQLStore({url: 'file:memory.db'})`` is ``SQLiteStorage("memory.db")`` in DIR (a
new temporary directory by default); ``PineconeVector``/``OpenAIEmbedder`` are the
embedded ``InMemoryVectorIndex`` and local ``HashEmbedder``; ``ScriptedModel`` and
``FunctionModel`` stand in for the hosted model.
``tests/seeds/test_memory_processors.py`` checks the same.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any

import anyio

from procflow.agent import Agent
from procflow.memory import HashEmbedder, InMemoryVectorIndex, Memory
from procflow.messages import Message
from procflow.models import FunctionModel, ScriptedModel
from procflow.processors import MessageHistory, Processor, TokenLimiter
from procflow.storage import SQLiteStorage

WHO = {"thread": "thread-1", "resource": "user-1"}


def seen(model: ScriptedModel | FunctionModel) -> list[str]:
    return [f"{m['role']}: {str(m['content'])[:60]}" for m in model.requests[-1].prompt]


async def message_history() -> None:
    print("== MessageHistory: last_messages=10")
    # "question i" gets "answer i": the model sees only the last 10 messages, so a
    # ScriptedModel (which counts the assistant turns it sees) would stop at turn 5
    model = FunctionModel(lambda request: f"answer {request.prompt[-1]['content'].split()[-1]}")
    agent = Agent(id="test-agent", name="Test Agent",
                  instructions="You are a helpful assistant", model=model,
                  memory=Memory(storage=SQLiteStorage("memory.db"), last_messages=10))
    for i in range(7):
        await agent.generate(f"question {i}", memory=WHO)
    print(f"   7th call: the model saw {len(seen(model)) - 2} remembered messages "
          f"(of 12 stored), first: {seen(model)[1]!r}")
    stored = await agent.memory.get_messages("thread-1")
    print(f"   stored after the call: {len(stored)} messages, last: {stored[-1].text!r}")


async def semantic_recall() -> None:
    print("== SemanticRecall: similar old messages come back")
    model = ScriptedModel(["Noted.", "ok", "ok", "ok", "Your cat is Whiskers."])
    vector = InMemoryVectorIndex()
    agent = Agent(name="semantic-agent",
                  instructions="You are a helpful assistant with semantic memory",
                  model=model,
                  memory=Memory(storage=SQLiteStorage("memory.db"), vector=vector,
                                embedder=HashEmbedder(), semantic_recall=True,
                                last_messages=2))
    who = {"thread": "pets", "resource": "user-1"}
    await agent.generate("My cat is named Whiskers and she likes tuna.", memory=who)
    for topic in ("the weather", "a recipe", "the news"):
        await agent.generate(f"Tell me about {topic}.", memory=who)
    await agent.generate("What is the name of my cat?", memory=who)
    recalled = [line for line in seen(model) if "Whiskers" in line]
    print(f"   vectors stored: {len(vector)}; recalled beyond the last 2: {recalled}")


async def working_memory() -> None:
    print("== WorkingMemory: loaded on input, no output processing")
    memory = Memory(storage=SQLiteStorage("memory.db"), working_memory=True)
    model = ScriptedModel(["Hello Ada!"])
    agent = Agent(name="working-memory-agent",
                  instructions="You are an assistant with working memory", model=model,
                  memory=memory)
    await memory.update_working_memory("wm", "# User Information\n- **First Name**: Ada\n",
                                       resource_id="user-1")
    await agent.generate("Hi", memory={"thread": "wm", "resource": "user-1"})
    shown = "**First Name**: Ada" in str(model.requests[-1].prompt)
    print(f"   input processors: {[p.id for p in memory.input_processors()]}; output: "
          f"{[p.id for p in memory.output_processors()]}; the model saw it: {shown}")


async def manual_control() -> None:
    print("== Manual control: your MessageHistory(last_messages=20) instead of the memory's")
    custom_message_history = MessageHistory(storage=SQLiteStorage("memory.db"),
                                            last_messages=20)
    model = FunctionModel(lambda request: "ok")  # whatever the thread holds
    agent = Agent(name="custom-memory-agent", instructions="You are a helpful assistant",
                  model=model,
                  memory=Memory(storage=SQLiteStorage("memory.db"), last_messages=10),
                  input_processors=[custom_message_history, TokenLimiter(limit=4000)])
    stored = len(await agent.memory.get_messages("thread-1"))
    await agent.generate("hello", memory=WHO)
    print(f"   the model saw {len(seen(model)) - 2} remembered messages of the {stored} "
          "stored (limit 20, not the memory's 10)")


class ContentBlocker(Processor):
    id = "content-blocker"

    async def process_output_result(self, args: Any) -> list[Message]:
        if any("forbidden" in msg.text for msg in args.messages):
            args.abort("Content blocked by guardrail")
        return args.messages


async def guardrails() -> None:
    print("== Output guardrail: an abort means nothing is saved")
    agent = Agent(id="safe-agent", name="safe-agent",
                  instructions="You are a helpful assistant",
                  model=ScriptedModel(["the forbidden answer"]),
                  memory=Memory(storage=SQLiteStorage("memory.db"), last_messages=10),
                  output_processors=[ContentBlocker()])
    who = {"thread": "guarded", "resource": "user-1"}
    result = await agent.generate("Hello", memory=who)
    if result.tripwire:
        print(f"   Blocked: {result.tripwire.reason}")
    print(f"   messages stored: {len(await agent.memory.get_messages('guarded'))}")


async def main() -> None:
    folder = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="procflow-seeds-")
    os.chdir(folder)  # 'file:memory.db'
    print(f"memory.db in {folder}")
    await message_history()
    await semantic_recall()
    await working_memory()
    await manual_control()
    await guardrails()


if __name__ == "__main__":
    anyio.run(main)
