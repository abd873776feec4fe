"""``Case`` and ``Dataset``: what an experiment runs, loadable from JSONL and YAML files.

A dataset is validated with pydantic when it is built or loaded: ``Dataset[In, Expected]``
checks every case's ``input`` and ``expected`` against those types (a case given as a
dict is converted), and a file that does not fit is an error naming the case and field.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import to_jsonable_python

from procflow.evals.scoring import Scorer

if TYPE_CHECKING:
    from procflow.agent.agent import Agent
    from procflow.evals.report import EvaluationReport
    from procflow.storage.base import Storage
    from procflow.workflows.workflow import Workflow

__all__ = ["Case", "Dataset", "ExpectedT", "InputT"]

InputT = TypeVar("InputT")
ExpectedT = TypeVar("ExpectedT")

_YAML_SUFFIXES = (".yaml", ".yml")
_JSONL_SUFFIXES = (".jsonl", ".ndjson")


class Case(BaseModel, Generic[InputT, ExpectedT]):
    """One input to evaluate, with what it should give.

    Attributes:
        input: What the target is called with (an agent's prompt, a workflow's input).
        expected: The answer it should give, for scorers that compare (``ExactMatch``).
        metadata: Anything else about the case (tags, difficulty), for your scorers.
        name: The case's name in reports (default ``case-<n>``, its position from 1).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: InputT
    expected: ExpectedT | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    name: str | None = None


class Dataset(BaseModel, Generic[InputT, ExpectedT]):
    """Cases and the scorers that grade every case's output.

    ``Dataset("capitals", cases=[Case(input="Capital of France?", expected="Paris")],
    scorers=[Contains()])``; ``await dataset.evaluate(agent)`` runs an experiment.

    Args:
        id: The dataset's id; its experiments are runs of the workflow ``eval:<id>``.
        cases: The cases (``Case`` objects or dicts of their fields).
        scorers: Scorers applied to every case (names must be distinct).

    Raises:
        pydantic.ValidationError: A case does not fit ``Dataset[In, Expected]``, two
            cases share a name, two scorers share a name, or the id is empty.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    id: str = Field(min_length=1)
    cases: list[Case[InputT, ExpectedT]]
    scorers: list[Scorer] = Field(default_factory=list)

    def __init__(self, id: str, /, cases: Sequence[Case[InputT, ExpectedT] | Mapping[str, Any]]
                 = (), *, scorers: Sequence[Scorer] = ()) -> None:
        super().__init__(id=id, cases=[_as_fields(c) for c in cases], scorers=list(scorers))

    @field_validator("cases")
    @classmethod
    def _name_cases(cls, cases: list[Case[Any, Any]]) -> list[Case[Any, Any]]:
        named = [c if c.name else c.model_copy(update={"name": f"case-{i}"})
                 for i, c in enumerate(cases, 1)]
        _no_duplicates([c.name or "" for c in named], "case", "give each case its own name=")
        return named

    @field_validator("scorers")
    @classmethod
    def _distinct_scorers(cls, scorers: list[Scorer]) -> list[Scorer]:
        _no_duplicates([s.name for s in scorers], "scorer", "pass name=... to tell them apart")
        return scorers

    @classmethod
    def from_file(cls, path: str | Path, *, scorers: Sequence[Scorer] = (),
                  id: str | None = None) -> Dataset[InputT, ExpectedT]:
        """Load a dataset from a JSONL file (one case object a line) or a YAML file
        (``{id, cases: [...]}``, or a bare list of cases; needs PyYAML).

        Args:
            path: A ``.jsonl``/``.ndjson``, ``.yaml``/``.yml`` or ``.json`` file.
            scorers: The scorers (files hold data, not code).
            id: The dataset's id (default: the file's ``id``, else its name's stem).

        Raises:
            ValueError: An unknown suffix, or a line that is not JSON (with its number).
            ModuleNotFoundError: A YAML file and PyYAML is not installed.
            pydantic.ValidationError: A case does not fit (its position and field).
        """
        path = Path(path)
        data = _read(path)
        if isinstance(data, list):
            data = {"cases": data}
        if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
            raise ValueError(f"{path}: expected a list of cases or an object with 'cases'")
        return cls(id or str(data.get("id") or path.stem), data["cases"], scorers=scorers)

    def to_file(self, path: str | Path) -> None:
        """Save the cases (not the scorers) as JSONL or YAML, by the file's suffix.

        Raises:
            ValueError: An unknown suffix.
            ModuleNotFoundError: A YAML file and PyYAML is not installed.
        """
        path = Path(path)
        cases = [to_jsonable_python(c.model_dump(exclude_defaults=True)) for c in self.cases]
        if path.suffix in _YAML_SUFFIXES:
            yaml = _yaml(path)
            text = yaml.safe_dump({"id": self.id, "cases": cases}, sort_keys=False,
                                  allow_unicode=True)
        elif path.suffix in _JSONL_SUFFIXES:
            text = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases)
        else:
            raise ValueError(_suffix_error(path))
        path.write_text(text, encoding="utf-8")

    async def evaluate(self, target: Agent[Any] | Workflow[Any, Any]
                       | Callable[[Any], Awaitable[Any] | Any], *, concurrency: int = 8,
                       repeat: int = 1, run_id: str | None = None,
                       storage: Storage | None = None,
                       on_case: Callable[[Any], Any] | None = None) -> EvaluationReport:
        """Run an experiment: every case (``repeat`` times) through ``target``, scored.

        The experiment is a stored run of the workflow ``eval:<id>``: each case is an
        item of a ``foreach``, recorded as it finishes, so an experiment whose process
        died is continued with ``run_id=`` and runs only the cases it had not finished.

        Args:
            target: An ``Agent`` (called with ``generate(case.input)``), a committed
                ``Workflow`` (run with the input) or a function of the input (sync or
                async).
            concurrency: Cases run at once.
            repeat: Runs of each case (each scored on its own).
            run_id: The experiment's run id (default: a fresh one). A stored experiment
                of that id that did not finish is continued; a finished one is refused.
            storage: Where the experiment is stored (default: the usual resolution).
            on_case: Called with each ``CaseResult`` as it finishes (progress).

        Returns:
            The ``EvaluationReport``.

        Raises:
            RunStateError: ``run_id`` names a finished experiment, or one running now.
            ValueError: ``concurrency`` or ``repeat`` below 1.
        """
        from procflow.evals.experiment import run_experiment

        return await run_experiment(self, target, concurrency=concurrency, repeat=repeat,
                                    run_id=run_id, storage=storage, on_case=on_case)


def _as_fields(case: Case[Any, Any] | Mapping[str, Any]) -> Any:
    return case.model_dump() if isinstance(case, Case) else case


def _no_duplicates(names: list[str], what: str, fix: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"two {what}s are named {name!r}; {fix}")
        seen.add(name)


def _read(path: Path) -> Any:
    if not path.is_file():
        raise FileNotFoundError(f"no such dataset file: {path}")
    text = path.read_text(encoding="utf-8")
    if path.suffix in _YAML_SUFFIXES:
        return _yaml(path).safe_load(text)
    if path.suffix == ".json":
        return json.loads(text)
    if path.suffix not in _JSONL_SUFFIXES:
        raise ValueError(_suffix_error(path))
    cases = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                cases.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}, line {number}: not JSON ({exc})") from None
    return cases


def _yaml(path: Path) -> Any:
    try:
        return importlib.import_module("yaml")
    except ModuleNotFoundError:
        raise ModuleNotFoundError(f"reading or writing {path} needs PyYAML, which is not "
                                  "installed: pip install pyyaml (or use a .jsonl file)",
                                  name="yaml") from None


def _suffix_error(path: Path) -> str:
    return (f"{path}: unknown dataset file type {path.suffix!r}; use .jsonl, .yaml/.yml "
            "or .json")
