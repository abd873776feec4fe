"""The builder: every method, commit-time checks, and the graph."""

from __future__ import annotations

from datetime import datetime

import pytest
from pydantic import BaseModel

from procflow import WorkflowDefinitionError, create_step, create_workflow, step
from procflow.workflows.graph import END, START


class A(BaseModel):
    x: int


class B(BaseModel):
    y: int


def make(id: str, **kw: object) -> object:
    return create_step(id=id, execute=lambda ctx: ctx.input_data, **kw)  # type: ignore[arg-type]


def test_builder_methods_chain_and_record_entries() -> None:
    s = [make(f"s{i}") for i in range(8)]
    wf = (create_workflow(id="all")
          .then(s[0]).parallel([s[1], s[2]]).map(lambda ctx: 1)
          .branch([(lambda ctx: True, s[3])]).map(lambda ctx: [1])
          .foreach(s[4], concurrency=2)
          .dowhile(s[5], lambda ctx: False).dountil(s[6], lambda ctx: True)
          .sleep(0).sleep_until(datetime(2000, 1, 1)).then(s[7]).commit())
    kinds = [type(e).__name__ for e in wf.entries]
    assert kinds == ["StepEntry", "ParallelEntry", "MapEntry", "BranchEntry", "MapEntry",
                     "ForeachEntry",
                     "LoopEntry", "LoopEntry", "SleepEntry", "SleepUntilEntry", "StepEntry"]
    assert wf.step_ids() == [f"s{i}" for i in range(8)]


def test_duplicate_ids_are_rejected_naming_the_step() -> None:
    a = make("same")
    with pytest.raises(WorkflowDefinitionError, match="duplicate step id 'same'") as err:
        create_workflow(id="w").then(a).parallel([make("other"), make("same")]).commit()
    assert err.value.step_id == "same"


def test_then_after_commit_is_rejected() -> None:
    wf = create_workflow(id="w").then(make("a")).commit()
    with pytest.raises(WorkflowDefinitionError, match="is committed"):
        wf.then(make("b"))


def test_empty_workflow_cannot_commit() -> None:
    with pytest.raises(WorkflowDefinitionError, match="has no steps"):
        create_workflow(id="empty").commit()


def test_uncommitted_workflow_cannot_run() -> None:
    with pytest.raises(WorkflowDefinitionError, match="not committed"):
        create_workflow(id="w").then(make("a")).create_run()


def test_plain_function_gets_a_hint() -> None:
    def helper(ctx: object) -> None: ...

    with pytest.raises(WorkflowDefinitionError, match="decorate 'helper' with @step"):
        create_workflow(id="w").then(helper)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad_id", ["", "a.b", "x[1]", "with space", 3])
def test_bad_step_ids(bad_id: object) -> None:
    with pytest.raises(WorkflowDefinitionError):
        create_step(id=bad_id, execute=lambda ctx: None)  # type: ignore[arg-type]


@pytest.mark.parametrize("call", [
    lambda wf: wf.parallel([]),
    lambda wf: wf.branch([]),
    lambda wf: wf.branch([("not callable", make("b"))]),
    lambda wf: wf.foreach(make("b"), concurrency=0),
    lambda wf: wf.dountil(make("b"), "nope"),
    lambda wf: wf.sleep(-1),
    lambda wf: wf.sleep_until("tomorrow"),
    lambda wf: wf.map(42),
], ids=["parallel-empty", "branch-empty", "branch-pair", "foreach-conc", "loop-cond",
        "sleep-neg", "sleep-until-str", "map-value"])
def test_bad_builder_arguments(call: object) -> None:
    wf = create_workflow(id="w")
    with pytest.raises(WorkflowDefinitionError):
        call(wf)  # type: ignore[operator]


def test_schema_mismatch_between_steps_is_a_definition_error() -> None:
    first = make("first", output_schema=A)
    second = make("second", input_schema=B)
    with pytest.raises(WorkflowDefinitionError, match=r"step 'second' needs B.*\['y'\]"):
        create_workflow(id="w").then(first).then(second).commit()


def test_map_between_mismatched_steps_makes_it_valid() -> None:
    first = make("first", output_schema=A)
    second = make("second", input_schema=B)
    wf = create_workflow(id="w").then(first).map(lambda ctx: {"y": 1}).then(second).commit()
    assert wf.committed


def test_parallel_output_is_checked_against_keys() -> None:
    class Keys(BaseModel):
        left: int
        right: int

    wf = create_workflow(id="ok").parallel([make("left"), make("right")])
    wf.then(make("join", input_schema=Keys)).commit()
    bad = create_workflow(id="bad").parallel([make("left"), make("other")])
    with pytest.raises(WorkflowDefinitionError, match="right"):
        bad.then(make("join", input_schema=Keys)).commit()


def test_when_checks_its_step_input_and_outputs_a_shape_both_paths_share() -> None:
    with pytest.raises(WorkflowDefinitionError, match=r"step 'second' needs B.*\['y'\]"):
        create_workflow(id="w").then(make("first", output_schema=A)).when(
            lambda ctx: True, make("second", input_schema=B)).commit()
    # skipped or not, an A leaves: the next step is checked against A
    keeps = make("keeps", input_schema=A, output_schema=A)
    with pytest.raises(WorkflowDefinitionError, match=r"step 'needs-b' needs B"):
        (create_workflow(id="w").then(make("first", output_schema=A))
         .when(lambda ctx: True, keeps).then(make("needs-b", input_schema=B)).commit())
    # an A or a B leaves: unknown, so nothing after it is rejected for it
    turns = make("turns", input_schema=A, output_schema=B)
    (create_workflow(id="w2").then(make("first", output_schema=A))
     .when(lambda ctx: True, turns).then(make("needs-b", input_schema=B)).commit())


def test_foreach_after_a_model_output_is_rejected() -> None:
    with pytest.raises(WorkflowDefinitionError, match="needs a list"):
        create_workflow(id="w").then(make("a", output_schema=A)).foreach(make("b")).commit()


def test_nested_workflow_must_be_committed() -> None:
    inner = create_workflow(id="inner").then(make("a"))
    with pytest.raises(WorkflowDefinitionError, match="must be committed"):
        create_workflow(id="outer").then(inner)


def test_create_step_forms() -> None:
    inner = create_workflow(id="inner").then(make("a")).commit()
    assert create_step(inner) is inner

    @step()
    async def named(ctx: object) -> int:
        """Doc becomes the description."""
        return 1

    assert named.id == "named" and named.description == "Doc becomes the description."
    with pytest.raises(WorkflowDefinitionError, match="needs execute"):
        create_step(id="x")  # type: ignore[call-overload]
    with pytest.raises(WorkflowDefinitionError, match="cannot make a step"):
        create_step(object())
    with pytest.raises(WorkflowDefinitionError, match="retries"):
        create_step(id="r", execute=lambda ctx: 1, retries=-1)


def test_the_decorator_takes_every_option_of_a_step() -> None:
    import inspect

    from procflow.steps import Step

    options = set(inspect.signature(Step.__init__).parameters) - {"self", "execute"}
    assert set(inspect.signature(step).parameters) - {"fn"} == options

    @step(id="tagged", metadata={"owner": "billing"}, trace_io=False, retries=2)
    def tagged(ctx: object) -> int:
        return 1

    assert (tagged.metadata, tagged.trace_io, tagged.retries) == ({"owner": "billing"}, False, 2)
    with pytest.raises(WorkflowDefinitionError, match="retries"):
        step(retries=-1)(tagged.execute)


def test_clone_gives_a_reusable_copy() -> None:
    a = make("a")
    wf = create_workflow(id="w").then(a).then(a.clone(id="a2")).commit()  # type: ignore[attr-defined]
    assert wf.step_ids() == ["a", "a2"]


def test_graph_shape() -> None:
    inner = create_workflow(id="inner").then(make("i1")).then(make("i2")).commit()
    wf = (create_workflow(id="g").then(make("a")).parallel([make("b"), make("c")])
          .then(inner).foreach(make("d"), concurrency=3).dountil(make("e"), lambda c: True)
          .commit())
    g = wf.graph
    assert g is wf.graph  # cached
    assert set(g.successors(START)) == {"a"}
    assert set(g.successors("a")) == {"b", "c"}
    assert g.nodes["b"]["group_kind"] == "parallel"
    assert set(g.predecessors("inner")) == {"b", "c"}
    assert g.nodes["inner"]["kind"] == "workflow"
    assert list(g.successors("inner")) == ["inner.i1"]
    assert g.nodes["inner.i2"]["parent"] == "inner"
    assert g.nodes["d"]["kind"] == "foreach" and g.nodes["d"]["concurrency"] == 3
    assert g.nodes["e"]["loop"] == "dountil"
    assert list(g.predecessors(END)) == ["e"]
    assert "subgraph" in g.nodes["inner"]


def test_with_entries_rebuilds_a_plan_and_leaves_the_original_as_it_was() -> None:
    from procflow.workflows.plan import StepEntry

    a = create_step(id="a", execute=lambda ctx: ctx.input_data)
    b = create_step(id="b", execute=lambda ctx: ctx.input_data)
    wf = create_workflow(id="w", retries=2).then(a).commit()
    graph = wf.graph
    new = wf.with_entries([*wf.entries, StepEntry(b)])
    assert not new.committed and new.retries == 2 and new.step_ids() == ["a", "b"]
    assert wf.committed and wf.step_ids() == ["a"] and wf.graph is graph
    swapped = new.with_entries(e.with_unit("a", b.clone(id="c")) for e in new.entries)
    assert swapped.commit().step_ids() == ["c", "b"]


def test_with_entries_takes_only_plan_entries() -> None:
    wf = create_workflow(id="w").then(create_step(id="a", execute=lambda ctx: 1))
    with pytest.raises(WorkflowDefinitionError, match="plan entries"):
        wf.with_entries(["a"])  # type: ignore[list-item]
