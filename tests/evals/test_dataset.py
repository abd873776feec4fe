from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from procflow.evals import Case, Contains, Dataset, ExactMatch


class Question(BaseModel):
    text: str


def test_cases_get_names_by_position() -> None:
    ds = Dataset("d", cases=[Case(input="a"), Case(input="b", name="second")])
    assert [c.name for c in ds.cases] == ["case-1", "second"]


def test_a_case_given_as_a_dict_is_validated_against_the_dataset_types() -> None:
    ds = Dataset[Question, str]("d", cases=[{"input": {"text": "hi"}, "expected": "yo"}])
    assert ds.cases[0].input == Question(text="hi")
    with pytest.raises(ValidationError, match="text"):
        Dataset[Question, str]("d", cases=[{"input": {"txt": "hi"}}])


@pytest.mark.parametrize(("kwargs", "message"), [
    pytest.param({"cases": [Case(input=1, name="x"), Case(input=2, name="x")]},
                 "two cases are named 'x'", id="case-names"),
    pytest.param({"cases": [], "scorers": [Contains(), Contains()]},
                 "two scorers are named 'Contains'", id="scorer-names"),
])
def test_duplicate_names_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Dataset("d", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("suffix", [".jsonl", ".yaml"])
def test_a_dataset_survives_a_file_round_trip(tmp_path: Path, suffix: str) -> None:
    ds = Dataset("geo", cases=[Case(input="France?", expected="Paris", metadata={"k": 1}),
                               Case(input={"q": "Peru?"}, name="peru")])
    path = tmp_path / f"geo{suffix}"
    ds.to_file(path)
    back = Dataset.from_file(path, scorers=[ExactMatch()])
    assert (back.id, back.cases, [s.name for s in back.scorers]) == (
        "geo", ds.cases, ["ExactMatch"])


def test_a_bad_jsonl_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"input": 1}\n{oops\n')
    with pytest.raises(ValueError, match=r"d.jsonl, line 2: not JSON"):
        Dataset.from_file(path)


def test_yaml_without_pyyaml_is_one_line_naming_the_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "yaml", None)
    with pytest.raises(ModuleNotFoundError, match=r"needs PyYAML.*pip install pyyaml"):
        Dataset("d", cases=[Case(input=1)]).to_file(tmp_path / "d.yaml")
