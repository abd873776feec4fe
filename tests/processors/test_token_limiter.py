"""TokenLimiter: prompt trimming on the input step, output truncation, counting, offline load."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from procflow.errors import TripwireError
from procflow.messages import Chunk, Message, MessageList, ToolCallPart, ToolResultPart
from procflow.processors import OutputResult
from procflow.processors._hooks import StepInfo, StepOverrides
from procflow.processors._runner import ProcessorRunner
from procflow.processors.builtin import token_limiter as tl
from procflow.processors.builtin.token_limiter import (
    CONVERSATION_OVERHEAD,
    TokenLimiter,
    TokenLimiterOptions,
)
from procflow.processors.builtin.tools.filter import ToolCallFilter

REPO = Path(__file__).resolve().parents[2]
SYSTEM = Message.system("You are a terse assistant.")
COUNT = TokenLimiter(1)  # only used to measure messages


def words(n: int, tag: str = "w") -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def conversation(*msgs: Message, source: Any = "memory") -> MessageList:
    ml = MessageList()
    ml.add_system(SYSTEM)
    ml.add(list(msgs), source=source)
    return ml


def limit_for(*msgs: Message) -> int:
    """The limit that fits exactly the system message and ``msgs``."""
    return (COUNT.count_message(SYSTEM) + CONVERSATION_OVERHEAD
            + sum(COUNT.count_message(m) for m in msgs))


async def input_step(ml: MessageList, *processors: Any) -> ProcessorRunner:
    runner = ProcessorRunner(list(processors))
    await runner.run_input_step(ml, StepInfo(0, []), StepOverrides())
    return runner


def tool_pair(call_id: str, result: str) -> tuple[Message, Message]:
    call = Message(role="assistant", content={"parts": [
        ToolCallPart(tool_call_id=call_id, tool_name="search", args={"q": "x"})]})
    res = Message.tool([ToolResultPart(tool_call_id=call_id, tool_name="search", result=result)])
    return call, res


async def collect(pipe: Any, chunks: list[Chunk]) -> list[Chunk]:
    out: list[Chunk] = []
    for chunk in chunks:
        out += await pipe.process(chunk)
    return out


# -- options --------------------------------------------------------------------------


def test_options_forms_and_validation() -> None:
    assert TokenLimiter(TokenLimiterOptions(limit=9, strategy="abort")).options.strategy == "abort"
    assert TokenLimiter({"limit": 9, "trim_mode": "contiguous"}).options.trim_mode == "contiguous"
    assert TokenLimiter(limit=9, count_mode="part").limit == 9
    for bad in (0, -1, True, "100", 1.5):
        with pytest.raises(ValueError, match="limit must be an int > 0"):
            TokenLimiter(bad)
    with pytest.raises(ValueError, match="strategy must be one of"):
        TokenLimiter(10, strategy="drop")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="use one or the other"):
        TokenLimiter(TokenLimiterOptions(limit=9), strategy="abort")
    with pytest.raises(ValueError, match="options dict needs 'limit'"):
        TokenLimiter({"limt": 9})


def test_count_tokens_and_messages() -> None:
    assert COUNT.count_tokens("hello world") == 2
    assert COUNT.count_tokens("<|endoftext|>") > 1  # special tokens count as plain text
    call, res = tool_pair("c1", "a long result " * 10)
    assert COUNT.count_message(res) > COUNT.count_message(call) > tl.MESSAGE_OVERHEAD


# -- input step -----------------------------------------------------------------------


async def test_keeps_system_messages_and_the_newest_that_fit() -> None:
    msgs = [Message.user(words(30, f"m{i}-")) for i in range(6)]
    ml = conversation(*msgs)
    await input_step(ml, TokenLimiter(limit_for(*msgs[-3:])))
    assert ml.system() == [SYSTEM]
    assert [m.id for m in ml.all()] == [m.id for m in msgs[-3:]]


async def test_under_the_limit_nothing_changes() -> None:
    msgs = [Message.user("hi"), Message.assistant("hello")]
    ml = conversation(*msgs)
    await input_step(ml, TokenLimiter(10_000))
    assert ml.all() == msgs


@pytest.mark.parametrize(("trim_mode", "kept"), [("best-fit", [0, 2]), ("contiguous", [2])])
async def test_best_fit_skips_a_big_message_contiguous_stops(trim_mode: Any,
                                                             kept: list[int]) -> None:
    msgs = [Message.user(words(5)), Message.assistant(words(200)), Message.user(words(5))]
    ml = conversation(*msgs)
    await input_step(ml, TokenLimiter(limit_for(msgs[0], msgs[2]), trim_mode=trim_mode))
    assert [m.id for m in ml.all()] == [msgs[i].id for i in kept]


async def test_abort_strategy_aborts_instead_of_trimming() -> None:
    msgs = [Message.user(words(50)), Message.user(words(5))]
    with pytest.raises(TripwireError, match="prompt needs") as err:
        await input_step(conversation(*msgs), TokenLimiter(limit_for(msgs[1]), strategy="abort"))
    assert err.value.processor_id == "token-limiter" and err.value.retry is False
    assert err.value.metadata["limit"] == limit_for(msgs[1])


async def test_system_messages_alone_over_the_limit_abort() -> None:
    with pytest.raises(TripwireError, match="system messages alone"):
        await input_step(conversation(Message.user("hi")), TokenLimiter(10))


async def test_nothing_fits_aborts() -> None:
    ml = conversation(Message.user(words(100)))
    with pytest.raises(TripwireError, match="no message fits"):
        await input_step(ml, TokenLimiter(limit_for() + 5))


async def test_current_run_tool_traffic_is_never_evicted() -> None:
    history = [Message.user(words(40, "old")), Message.user(words(10, "question"))]
    call, res = tool_pair("run-1", words(80, "result"))
    ml = conversation(*history)
    ml.add([call, res], source="response")
    await input_step(ml, TokenLimiter(limit_for(history[1], call, res)))
    assert [m.id for m in ml.all()] == [history[1].id, call.id, res.id]
    assert ml.response() == [call, res]


async def test_current_run_alone_over_the_limit_aborts() -> None:
    call, res = tool_pair("run-1", words(300))
    ml = conversation(Message.user("q"))
    ml.add([call, res], source="response")
    with pytest.raises(TripwireError, match="this run's own messages"):
        await input_step(ml, TokenLimiter(limit_for(call)))


async def test_a_tool_call_and_its_result_are_kept_or_dropped_together() -> None:
    question = Message.user(words(5, "q"))
    call, res = tool_pair("old-1", words(120, "r"))
    newest = Message.user(words(5, "n"))
    ml = conversation(question, call, res, newest)
    # Room for newest + the call alone: the call must not stay without its result.
    await input_step(ml, TokenLimiter(limit_for(question, call, newest)))
    assert [m.id for m in ml.all()] == [question.id, newest.id]


async def test_counts_only_what_tool_call_filter_left() -> None:
    question, newest = Message.user(words(5, "q")), Message.user(words(5, "n"))
    call, res = tool_pair("old-1", words(500, "r"))
    ml = conversation(question, call, res, newest)
    runner = ProcessorRunner([ToolCallFilter(), TokenLimiter(limit_for(question, newest))])
    await runner.run_input(ml)
    await runner.run_input_step(ml, StepInfo(0, []), StepOverrides())
    assert [m.id for m in ml.all()] == [question.id, newest.id]


class CountingEncoding:
    def __init__(self) -> None:
        self.inner = tl.default_encoding()
        self.calls = 0

    def encode_ordinary(self, text: str) -> list[int]:
        self.calls += 1
        return self.inner.encode_ordinary(text)

    def decode_bytes(self, tokens: list[int]) -> bytes:
        return self.inner.decode_bytes(tokens)


async def test_counts_are_cached_per_message_id_and_content() -> None:
    enc = CountingEncoding()
    msgs = [Message.user(words(20, f"m{i}-")) for i in range(50)]
    ml = conversation(*msgs)
    runner = ProcessorRunner([TokenLimiter(100_000, encoding=enc)])  # type: ignore[arg-type]
    await runner.run_input_step(ml, StepInfo(0, []), StepOverrides())
    first = enc.calls
    assert first >= 51
    await runner.run_input_step(ml, StepInfo(1, []), StepOverrides())
    assert enc.calls == first  # nothing re-encoded
    ml.replace(msgs[0].id, msgs[0].with_text("changed text"))
    await runner.run_input_step(ml, StepInfo(2, []), StepOverrides())
    assert enc.calls == first + 1  # only the edited message


# -- output ---------------------------------------------------------------------------


def deltas(n: int) -> list[Chunk]:
    return [Chunk.text_delta(f" w{i}") for i in range(n)]


async def test_stream_truncates_and_announces_once() -> None:
    pipe = ProcessorRunner([TokenLimiter(6)]).output_stream()
    out = await collect(pipe, [*deltas(10), Chunk.finish("stop")])
    text = "".join(c.text for c in out)
    assert COUNT.count_tokens(text) <= 6 and "".join(c.text for c in deltas(10)).startswith(text)
    assert [c.type for c in out].count("data-token-limit-reached") == 1
    assert out[-1].type == "finish"


async def test_stream_part_mode_limits_each_part_alone() -> None:
    pipe = ProcessorRunner([TokenLimiter(3, count_mode="part")]).output_stream()
    out = await collect(pipe, [Chunk.text_delta(words(10)), Chunk.text_delta(" ok")])
    texts = [c.text for c in out if c.type == "text-delta"]
    assert COUNT.count_tokens(texts[0]) == 3 and texts[1] == " ok"


async def test_stream_abort_strategy_ends_with_a_tripwire() -> None:
    pipe = ProcessorRunner([TokenLimiter(3, strategy="abort")]).output_stream()
    out = await collect(pipe, [*deltas(5), Chunk.finish("stop")])
    assert out[-1].type == "tripwire" and out[-1].payload.processor_id == "token-limiter"
    assert pipe.tripwire is not None


async def test_output_result_truncates_by_tokens() -> None:
    text = words(100)
    ml = MessageList().add(Message.assistant(text), source="response")
    result = OutputResult(text=text)
    await ProcessorRunner([TokenLimiter(10)]).run_output_result(ml, result)
    kept = ml.response()[0].text
    assert COUNT.count_tokens(kept) == 10 and text.startswith(kept)
    assert result.text == kept


async def test_output_result_never_leaves_a_broken_character() -> None:
    text = "😀" * 20
    ml = MessageList().add(Message.assistant(text), source="response")
    await ProcessorRunner([TokenLimiter(5)]).run_output_result(ml, OutputResult(text=text))
    kept = ml.response()[0].text
    assert kept and text.startswith(kept) and "\ufffd" not in kept


async def test_output_result_abort_strategy() -> None:
    ml = MessageList().add(Message.assistant(words(50)), source="response")
    with pytest.raises(TripwireError, match="passed the 5-token limit"):
        await ProcessorRunner([TokenLimiter(5, strategy="abort")]).run_output_result(
            ml, OutputResult(text=ml.response()[0].text))


# -- offline encoding -----------------------------------------------------------------

_NO_NETWORK = """
import socket
def refuse(*args, **kwargs):
    raise OSError("network access attempted")
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
from procflow.processors.builtin.token_limiter import TokenLimiter
print(TokenLimiter(10).count_tokens("hello world"))
"""


def test_default_encoding_loads_offline_in_a_fresh_process(tmp_path: Path) -> None:
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", _NO_NETWORK], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"


def test_default_encoding_reloads_with_network_disabled(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    import tiktoken.registry

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise OSError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tl, "_encoding", None)
    monkeypatch.delitem(tiktoken.registry.ENCODINGS, tl.DEFAULT_ENCODING_NAME, raising=False)
    assert TokenLimiter(10).count_tokens("hello world") == 2
