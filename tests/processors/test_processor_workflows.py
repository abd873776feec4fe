"""Processors as steps, processor workflows as processors, and the reducer."""

from __future__ import annotations

from typing import Any

import pytest

from procflow import WorkflowDefinitionError, create_step, create_workflow
from procflow.errors import ProcessorError, TripwireError
from procflow.messages import Chunk, Message, MessageList
from procflow.processors import (
    Processor,
    ProcessorStep,
    ProcessorStepSchema,
    merge_processor_results,
    merge_text_edits,
)
from procflow.processors._runner import ProcessorRunner


class Replace(Processor):
    """Replaces a word in input and output text; a stand-in for a redacting guard."""

    def __init__(self, id: str, word: str, by: str) -> None:
        self.id, self.word, self.by = id, word, by

    def process_input(self, args: Any) -> list[Message]:
        return [m.with_text(m.text.replace(self.word, self.by)) for m in args.messages]

    def process_output_stream(self, args: Any) -> Any:
        return Chunk.text_delta(args.part.text.replace(self.word, self.by))


class Blocker(Processor):
    id = "blocker"

    def process_input(self, args: Any) -> None:
        if any("attack" in m.text for m in args.messages):
            args.abort("attack found", metadata={"family": "override"})


class Warner(Processor):
    id = "warner"

    def process_input(self, args: Any) -> None:
        args.warn("mild", {"score": 0.4})


def proc_wf(id: str) -> Any:
    return create_workflow(id=id, input_schema=ProcessorStepSchema,
                           output_schema=ProcessorStepSchema)


def user_list(text: str) -> MessageList:
    ml = MessageList()
    ml.add(Message.user(text), source="input")
    return ml


def test_processor_step_id_schemas_and_hooks() -> None:
    step = create_step(Replace("pii-detector", "a", "b"))
    assert isinstance(step, ProcessorStep)
    assert step.id == "processor:pii-detector" and step.kind == "processor"
    assert step.input_schema is ProcessorStepSchema is step.output_schema
    assert step.metadata["hooks"] == ["process_input", "process_output_stream"]


def test_processor_without_id_cannot_be_a_step() -> None:
    class Nameless(Processor):
        pass

    with pytest.raises(ProcessorError, match="Nameless has no id"):
        create_step(Nameless())


async def test_parallel_results_are_keyed_by_processor_id_and_map_picks_one() -> None:
    keys: list[str] = []

    def pick(ctx: Any) -> Any:
        keys.extend(ctx.input_data)
        return ctx.input_data["processor:pii"]

    wf = (proc_wf("pick").parallel([create_step(Replace("pii", "555", "***")),
                                    create_step(Blocker())]).map(pick).commit())
    ml = user_list("call 555 now")
    await ProcessorRunner([wf]).run_input(ml)
    assert sorted(keys) == ["processor:blocker", "processor:pii"]
    assert [m.text for m in ml.input()] == ["call *** now"]


async def test_processor_workflow_tripwire_propagates_with_processor_id() -> None:
    wf = (proc_wf("guards").parallel([create_step(Replace("pii", "x", "y")),
                                      create_step(Blocker())])
          .map(merge_processor_results).commit())
    with pytest.raises(TripwireError) as err:
        await ProcessorRunner([wf]).run_input(user_list("an attack"))
    assert err.value.processor_id == "blocker"
    assert err.value.metadata == {"family": "override"}


async def test_reducer_applies_every_branch_redaction_and_collects_warnings() -> None:
    wf = (proc_wf("merge").parallel([create_step(Replace("emails", "bob@x.io", "[EMAIL]")),
                                     create_step(Replace("phones", "555-0100", "[PHONE]")),
                                     create_step(Warner()), create_step(Blocker())])
          .map(merge_processor_results).commit())
    runner = ProcessorRunner([wf])
    ml = user_list("mail bob@x.io or call 555-0100")
    await runner.run_input(ml)
    assert [m.text for m in ml.input()] == ["mail [EMAIL] or call [PHONE]"]
    assert [(v.processor_id, v.message) for v in runner.context.violations] == [
        ("warner", "mild")]


async def test_processor_workflow_in_sequence_with_plain_processors() -> None:
    inner = proc_wf("inner").then(create_step(Replace("one", "a", "b"))).then(
        create_step(Replace("two", "b", "c"))).commit()
    ml = user_list("a")
    await ProcessorRunner([Replace("zero", "z", "a"), inner]).run_input(ml)
    assert ml.input()[0].text == "c"


async def test_when_runs_a_processor_only_when_its_condition_holds() -> None:
    def mentions_a(ctx: Any) -> bool:
        return any("a" in m.text for m in ctx.input_data.messages)

    gated = proc_wf("gated").when(mentions_a, create_step(Replace("one", "a", "b"))).then(
        create_step(Replace("two", "x", "y"))).commit()
    for text, expected in (("a x", "b y"), ("c x", "c y")):
        ml = user_list(text)
        await ProcessorRunner([gated]).run_input(ml)
        assert ml.input()[0].text == expected


async def test_linear_processor_workflow_runs_on_the_stream_fast_path() -> None:
    inner = proc_wf("stream-chain").then(create_step(Replace("one", "a", "b"))).then(
        create_step(Replace("two", "b", "c"))).commit()
    pipe = ProcessorRunner([inner]).output_stream()
    assert pipe.counts == {"one": 0, "two": 0}  # flattened into its processors
    assert [c.text for c in await pipe.process(Chunk.text_delta("aaa"))] == ["ccc"]


async def test_parallel_processor_workflow_on_the_stream() -> None:
    wf = (proc_wf("stream-par").parallel([create_step(Replace("p1", "cat", "[C]")),
                                          create_step(Replace("p2", "dog", "[D]"))])
          .map(merge_processor_results).commit())
    pipe = ProcessorRunner([wf]).output_stream()
    out = await pipe.process(Chunk.text_delta("cat and dog"))
    assert [c.text for c in out] == ["[C] and [D]"]


async def test_workflow_that_forgets_to_pick_a_branch_is_a_clear_error() -> None:
    wf = proc_wf("nopick").parallel([create_step(Replace("p", "a", "b"))]).map(
        lambda ctx: ctx.input_data).commit()
    with pytest.raises(ProcessorError, match="forget to pick a branch"):
        await ProcessorRunner([wf]).run_input(user_list("a"))


def test_non_processor_workflow_is_rejected() -> None:
    plain = create_workflow(id="plain").then(
        create_step(id="s", execute=lambda ctx: ctx.input_data)).commit()
    with pytest.raises(ProcessorError, match="must both be ProcessorStepSchema"):
        ProcessorRunner([plain])


def test_processor_step_schema_checks_phase_fields() -> None:
    with pytest.raises(ValueError, match="phase 'input' needs messages"):
        ProcessorStepSchema(phase="input")
    with pytest.raises(ValueError):
        ProcessorStepSchema(phase="nope")  # type: ignore[arg-type]


async def test_processor_workflow_runs_on_a_durable_storage_and_reads_back(
        tmp_path: Any) -> None:
    # each step's envelope, its live message list included, is kept by a SQLite file (the
    # project's database of the studio is one) and read back whole by another storage
    from procflow.storage import SQLiteStorage

    path = tmp_path / "runs.db"
    wf = (proc_wf("durable").then(create_step(Replace("r", "hello", "hi")))
          .then(create_step(Warner())).commit())
    result = await wf.create_run("guarded", storage=SQLiteStorage(path)).start(input_data={
        "phase": "input", "messages": [{"role": "user", "content": "hello there"}],
        "system_messages": [{"role": "system", "content": "be brief"}]})
    assert result.status == "success", result
    assert [m.text for m in result.result.messages] == ["hi there"]

    run = await wf.get_run("guarded", storage=SQLiteStorage(path))
    assert run.status == "success" and run.last_result is not None
    stored = run.last_result.result
    assert isinstance(stored, ProcessorStepSchema)
    assert isinstance(stored.message_list, MessageList)
    assert [(m.text, stored.message_list.source_of(m.id))
            for m in stored.message_list.all()] == [("hi there", "input")]
    assert [m.text for m in stored.message_list.system()] == ["be brief"]
    assert [v.processor_id for v in stored.violations] == ["warner"]


async def test_processor_step_runs_standalone_from_json_like_input() -> None:
    wf = proc_wf("standalone").then(create_step(Replace("r", "hello", "hi"))).commit()
    result = await wf.create_run().start(
        input_data={"phase": "input", "messages": [{"role": "user", "content": "hello"}]})
    assert result.status == "success"
    assert [m.text for m in result.result.messages] == ["hi"]


async def test_step_without_the_phase_hook_passes_through() -> None:
    step = create_step(Blocker())
    env = ProcessorStepSchema(phase="output_result", messages=[Message.assistant("ok")])
    wf = proc_wf("pass").then(step).commit()
    assert (await wf.create_run().start(input_data=env)).result is env


def test_merge_text_edits_combines_non_overlapping_and_widest_overlap() -> None:
    base = "alice lives at 1 Main St, phone 555"
    assert merge_text_edits(base, ["[NAME] lives at 1 Main St, phone 555",
                                   "alice lives at 1 Main St, phone [P]"]) == \
        "[NAME] lives at 1 Main St, phone [P]"
    assert merge_text_edits("id 12345", ["id ***45", "id *****"]) == "id *****"


def test_duplicate_processor_steps_in_a_workflow() -> None:
    with pytest.raises(WorkflowDefinitionError, match="duplicate step id 'processor:same'"):
        proc_wf("dup").then(create_step(Replace("same", "a", "b"))).then(
            create_step(Replace("same", "b", "c"))).commit()
