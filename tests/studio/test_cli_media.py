"""``procflow`` where people use it: piped into grep/cut at 80 and 200 columns, as
``--json`` for scripts, from subdirectories and with ``PROCFLOW_DB``; run ids given as
prefixes, prompts given as text, secrets never printed. The targets are the shipped
``examples/studio_demo.py``."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from procflow.studio.output import SCHEMAS

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "studio_demo.py"
SECRET = "sk-live-" + "4f9a" * 6


# -- a structural checker for the schemas' subset of JSON Schema
_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,),
    "null": (type(None),), "number": (int, float), "integer": (int,),
}


def errors(value: Any, schema: dict[str, Any], where: str = "$") -> list[str]:
    """What in ``value`` breaks ``schema`` (empty: it conforms)."""
    found: list[str] = []
    if "oneOf" in schema:
        passing = [s for s in schema["oneOf"] if not errors(value, s, where)]
        if len(passing) != 1:
            found.append(f"{where}: matches {len(passing)} of the oneOf schemas, not 1")
        return found
    kinds = schema.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else kinds
        ok = any(isinstance(value, _TYPES[n]) and not (n in ("number", "integer")
                 and isinstance(value, bool)) for n in names)
        if not ok:
            return [f"{where}: expected {names}, got {type(value).__name__}"]
    if "const" in schema and value != schema["const"]:
        found.append(f"{where}: expected {schema['const']!r}, got {value!r}")
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                found.append(f"{where}: missing {key!r}")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                found += errors(item, props[key], f"{where}.{key}")
            elif extra is False:
                found.append(f"{where}: unexpected {key!r}")
            elif isinstance(extra, dict):
                found += errors(item, extra, f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for n, item in enumerate(value):
            found += errors(item, schema["items"], f"{where}[{n}]")
    return found


def procflow(cwd: Path, *args: str, columns: int = 80,
             **extra_env: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PROCFLOW_DEBUG", "NO_COLOR", "FORCE_COLOR", "PROCFLOW_DB")}
    env.update({"COLUMNS": str(columns), "STUDIO_DEMO_DELAY": "0", **extra_env})
    return subprocess.run([sys.executable, "-m", "procflow", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr + result.stdout
    return result.stdout


def schema(name: str) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((SCHEMAS / f"{name}.json").read_text())
    return loaded


def run_id_of(output: str) -> str:
    found = re.search(r"^run id: (\S+)$", output, re.MULTILINE)
    assert found, output
    return found.group(1)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("demo")
    shutil.copy(DEMO, root / "studio_demo.py")
    runs = {
        "onboarding": ok(procflow(root, "run", "studio_demo.py:onboarding", "--input",
                                  '{"name": "Ada", "documents": 3}')),
        "keys": ok(procflow(root, "run", "studio_demo.py:keys", "--input", "ada")),
        "agent": ok(procflow(root, "run", "studio_demo.py:assistant", "--input", "hello")),
    }
    return {"root": str(root), **{k: run_id_of(v) for k, v in runs.items()},
            **{f"{k}-out": v for k, v in runs.items()}}


@pytest.mark.parametrize("columns", [80, 200])
def test_piped_runs_are_one_untruncated_record_per_line(project: dict[str, str],
                                                        columns: int) -> None:
    out = ok(procflow(Path(project["root"]), "runs", columns=columns))
    lines = out.splitlines()
    assert len(lines) >= 3
    wanted = [line for line in lines if "customer-onboarding-kyc-document-review" in line]
    fields = wanted[0].split("\t")
    assert fields[0] == project["onboarding"] and fields[2] == "success"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", fields[3])
    assert "…" not in out
    # the same bytes whatever the terminal's width
    assert out == ok(procflow(Path(project["root"]), "runs", columns=300 - columns))


@pytest.mark.parametrize("columns", [80, 200])
def test_piped_trace_has_whole_names_and_no_bars(project: dict[str, str], columns: int) -> None:
    out = ok(procflow(Path(project["root"]), "trace", project["onboarding"], columns=columns))
    assert "█" not in out and "…" not in out
    rows = [line.split("\t") for line in out.splitlines()[1:]]
    assert all(len(row) == 5 for row in rows)
    assert [rows[1][0], rows[1][2], rows[1][3]] == ["success", "step", "  check-identity"]


@pytest.mark.parametrize(("args", "name"), [
    (["runs"], "runs"),
    (["trace", "{onboarding}"], "trace"),
    (["graph", "studio_demo.py:onboarding"], "graph"),
    (["graph", "studio_demo.py:assistant"], "graph"),
    (["run", "studio_demo.py:keys", "--input", "bob"], "run"),
    (["run", "studio_demo.py:approval", "--input", "7"], "run"),
    (["run", "studio_demo.py:assistant", "--input", "hi"], "run"),
    (["prune", "--older-than", "0", "--dry-run"], "prune"),
])
def test_json_output_follows_its_schema(project: dict[str, str], args: list[str],
                                        name: str) -> None:
    words = [a.format(**project) for a in args]
    out = ok(procflow(Path(project["root"]), *words, "--json"))
    document = json.loads(out)
    assert errors(document, schema(name)) == []
    assert SECRET not in out


def test_graph_json_names_conditions(project: dict[str, str]) -> None:
    out = ok(procflow(Path(project["root"]), "graph", "studio_demo.py:onboarding", "--json"))
    nodes = {n["id"]: n for n in json.loads(out)["nodes"]}
    assert nodes["collect-documents"]["condition"] == "is_verified"
    assert nodes["reject"]["condition"] == "not ctx.input_data.get('verified')"


def test_version() -> None:
    from procflow import __version__

    assert ok(procflow(ROOT, "--version")).strip() == f"procflow {__version__}"


def test_ids_are_accepted_as_unique_prefixes(project: dict[str, str]) -> None:
    root, run_id = Path(project["root"]), project["onboarding"]
    out = ok(procflow(root, "trace", run_id[:8], "--json"))
    assert json.loads(out)["run_id"] == run_id
    ambiguous = procflow(root, "trace", "")
    assert ambiguous.returncode == 2 and "ambiguous" in ambiguous.stderr


def test_secrets_are_masked_in_every_output(project: dict[str, str]) -> None:
    assert SECRET not in project["keys-out"] and '"api_key": "***"' in project["keys-out"]
    root = Path(project["root"])
    for args in (["trace", project["keys"]], ["trace", project["keys"], "--step", "issue"]):
        assert SECRET not in ok(procflow(root, *args))


def test_a_prompt_is_sent_as_text(project: dict[str, str]) -> None:
    trace = json.loads(ok(procflow(Path(project["root"]), "trace", project["agent"],
                                   "--json")))
    assert "hello" in json.dumps(trace["spans"])
    bad = procflow(Path(project["root"]), "run", "studio_demo.py:assistant", "--input",
                   "hello", "--json-input")
    assert bad.returncode == 2 and "invalid --input JSON" in bad.stderr


def test_read_only_commands_never_create_a_database(tmp_path: Path) -> None:
    out = procflow(tmp_path, "runs")
    assert out.returncode == 0 and "no runs stored yet" in out.stderr + out.stdout
    assert json.loads(ok(procflow(tmp_path, "runs", "--json"))) == {"store": None, "runs": []}
    assert procflow(tmp_path, "trace", "abc").returncode == 2
    assert procflow(tmp_path, "runs", "--db", "x.db").returncode == 0
    assert list(tmp_path.iterdir()) == []


def test_runs_are_found_from_a_subdirectory_and_through_procflow_db(tmp_path: Path) -> None:
    shutil.copy(DEMO, tmp_path / "studio_demo.py")
    run_id = run_id_of(ok(procflow(tmp_path, "run", "studio_demo.py:keys", "--input", "1")))
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    assert run_id in ok(procflow(tmp_path / "sub" / "deeper", "runs"))
    elsewhere = tmp_path / "elsewhere.db"
    other = run_id_of(ok(procflow(tmp_path, "run", "studio_demo.py:keys", "--input", "2",
                                  PROCFLOW_DB=str(elsewhere))))
    assert elsewhere.is_file()
    listed = ok(procflow(tmp_path / "sub", "runs", PROCFLOW_DB=str(elsewhere)))
    assert other in listed and run_id not in listed


def test_a_workflows_own_storage_is_used_and_the_resume_hint_works(tmp_path: Path) -> None:
    shutil.copy(DEMO, tmp_path / "studio_demo.py")
    out = ok(procflow(tmp_path, "run", "studio_demo.py:approval", "--input", "50"))
    assert (tmp_path / "approvals.db").is_file() and not (tmp_path / ".procflow").exists()
    hint = next(line.strip() for line in out.splitlines() if "--resume" in line)
    words = shlex.split(hint)
    assert words[-1] == "JSON"
    words[-1] = '{"ok": true}'
    assert words[0] == "procflow"
    resumed = ok(procflow(tmp_path, *words[1:]))
    assert '"approved": true' in resumed
    # a run kept elsewhere (--db): the hint says --db
    out = ok(procflow(tmp_path, "--db", "x.db", "run", "studio_demo.py:keys", "--input", "1"))
    assert "--db" not in out  # a finished run prints no hint at all
    trace = ok(procflow(tmp_path, "trace", run_id_of(out)[:10], "--db", "x.db"))
    assert "issue" in trace


def test_replay_diff_names_the_reused_steps(project: dict[str, str]) -> None:
    root, run_id = Path(project["root"]), project["onboarding"]
    out = ok(procflow(root, "run", "studio_demo.py:onboarding", "--from-step", "decide",
                      "--run", run_id[:9], "--json"))
    replay = json.loads(out)
    assert replay["replayed_from"] == run_id
    diff = ok(procflow(root, "trace", run_id, "--diff", replay["run_id"], columns=200))
    assert "reused by B" in diff and "0 only in A, 0 only in B" in diff
    assert "B is a replay: it reused the stored results of check-identity" in diff


def test_failed_step_shows_its_traceback(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text(
        "from procflow import create_step, create_workflow\n"
        "def boom(ctx):\n"
        f"    raise RuntimeError('token {SECRET} rejected')\n"
        "bad = create_workflow(id='bad').then(create_step(id='boom', execute=boom)).commit()\n")
    out = procflow(tmp_path, "run", "bad.py:bad")
    assert out.returncode == 1 and SECRET not in out.stdout
    detail = ok(procflow(tmp_path, "trace", run_id_of(out.stdout), "--step", "boom",
                         columns=200))
    assert "traceback" in detail and "bad.py" in detail and "RuntimeError" in detail
    assert SECRET not in detail
