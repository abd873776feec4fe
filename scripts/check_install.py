"""Check what a user installs: the wheel and sdist, a bare install, and each extra alone.

Usage (CI runs it from ``.ci/run`` with the dev virtualenv's Python, which has ``build``
and ``twine``)::

    .venv/bin/python scripts/check_install.py [--jobs 3] [--keep]

1. Builds the sdist, and the wheel from it, once (``python -m build``), checks both with
   ``twine check --strict``, and checks what they ship (LICENSE, ``py.typed``, no local
   state such as ``.venv`` or ``.procflow``) and the metadata ``pip show`` prints.
2. Installs the wheel with no extras into a fresh virtualenv, imports every module of the
   package and reads every name of every ``__all__``: a module may only fail with
   procflow's one-line "missing extra" error (``procflow._extras.MissingExtraError``),
   which must name ``pip install 'procflow[x]'``. Runs ``procflow --help`` and
   ``examples/quickstart.py`` in a temporary directory (a fresh ``.procflow/``).
3. Installs the wheel with each extra of ``pyproject.toml`` alone (not ``all``, ``dev``,
   ``docs``) into its own virtualenv, in parallel: every module the bare install could
   not import for want of that extra must import now (an import that needs another extra
   fails the check), and a probe uses the extra's packages through procflow.

The virtualenvs are made without pip (the calling Python's pip installs into them with
``--python``, without compiling), in memory when there is room, and pip's cache is
shared, so a warm run takes two or three minutes.
Exit status 0 when everything holds; otherwise each problem is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOT_CHECKED = {"all", "dev", "docs"}
"""Extras that are bundles of the others or tooling, not a feature of the package."""
SCRATCH_NEEDS = 3 << 30
"""Room the virtualenvs need (about 1 GB); in memory (/dev/shm) when it has that much free,
as writing and deleting some 45,000 files there is much faster than on a disk."""

# Runs inside each virtualenv (python -I -c PROBE): imports every module and
# every __all__ name, then each extra's probe; prints one JSON report.
PROBE = r'''
import importlib, importlib.util, json, sys, traceback
from pathlib import Path

import procflow
from procflow._extras import EXTRAS, MissingExtraError, needs

package = Path(procflow.__file__).parent
report = {"file": procflow.__file__, "extras": {k: list(v) for k, v in EXTRAS.items()},
          "modules": {}, "probes": {}}


def attempt(call):
    try:
        call()
    except MissingExtraError as exc:
        return {"extra": exc.extra, "message": str(exc)}
    except BaseException:
        return {"error": traceback.format_exc()}
    return None


def load(name):
    module = importlib.import_module(name)
    for attr in getattr(module, "__all__", ()):
        getattr(module, attr)


NOT_IMPORTABLE = {"procflow.studio.worker_boot"}  # a worker process's boot, from its env
names = []
for path in sorted(package.rglob("*.py")):
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    if ".".join(parts) not in NOT_IMPORTABLE:
        names.append(".".join(parts))
for name in names:
    report["modules"][name] = attempt(lambda: load(name))


def probe_redis():
    from procflow.cache import RedisCache
    from procflow.storage import RedisStorage
    RedisStorage("redis://127.0.0.1:1")  # a client only: nothing connects
    RedisCache


def probe_postgres():
    from procflow.storage import PostgresStorage
    from procflow.errors import StorageError
    try:
        PostgresStorage("postgresql://nobody@127.0.0.1:1/none")
    except StorageError as exc:
        if "pip install" in str(exc):  # the storage's own form of the one-line error
            raise MissingExtraError(str(exc), name="psycopg", extra="postgres") from None
        raise


def probe_vector():
    from procflow.memory.search import _unit
    assert _unit([[3.0, 4.0]]).tolist() == [[0.6000000238418579, 0.800000011920929]]


def probe_ann():
    from procflow.memory.search import MessageIndex, _Scope, _unit
    MessageIndex(object(), object(), approximate=True)  # checks for numpy and hnswlib
    scope = _Scope(2)
    scope.ids, scope.threads, scope.matrix = ["a"], ["t"], _unit([[1.0, 0.0]])
    assert [row for row, _ in scope.search(_unit([[1.0, 0.0]])[0], 1, 0)] == [0]
    assert scope.ann is not None


def probe_otel():
    procflow.instrument()
    procflow.uninstrument()


def probe_re2():
    from procflow.textscan._prefilter import load_re2
    if load_re2() is None:
        with needs("re2", feature="the RE2 prefilter"):
            import re2  # noqa: F401


def probe_onnx():
    from procflow.processors.builtin import OnnxTextClassifier
    try:
        OnnxTextClassifier("/nonexistent/model.onnx", "/nonexistent/tokenizer.json")
    except FileNotFoundError:
        return  # the packages imported; only the (missing) model file stopped it
    raise AssertionError("OnnxTextClassifier accepted a missing model file")


def probe_dramatiq():
    from procflow.workers import DramatiqExecutor, WorkerApp  # noqa: F401


for extra in EXTRAS:
    probe = globals().get(f"probe_{extra}")
    report["probes"][extra] = (attempt(probe) if probe is not None
                               else {"error": f"no probe for the extra {extra!r}"})
print(json.dumps(report))
'''


def log(message: str) -> None:
    print(f"[check-install] {message}", flush=True)


def run(args: list[str | Path], *, cwd: Path | None = None,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))} exited {done.returncode}\n"
                           f"{done.stdout}\n{done.stderr}")
    return done


def build(work: Path) -> tuple[Path, Path]:
    """The sdist and the wheel (built from the sdist), checked with twine."""
    dist = work / "dist"
    run([sys.executable, "-m", "build", "--outdir", dist, ROOT])
    sdist, = dist.glob("*.tar.gz")
    wheel, = dist.glob("*.whl")
    run([sys.executable, "-m", "twine", "check", "--strict", sdist, wheel])
    return sdist, wheel


def check_artifacts(sdist: Path, wheel: Path) -> list[str]:
    """What the sdist and wheel ship, and the metadata ``pip show`` prints."""
    problems = []
    with tarfile.open(sdist) as tar:
        members = [name.partition("/")[2] for name in tar.getnames()]
    for unwanted in (".venv/", ".procflow/", "__pycache__/", ".git/", ".hypothesis/",
                     ".mypy_cache/", ".ruff_cache/", "dist/"):
        shipped = [m for m in members if f"/{unwanted}" in f"/{m}"]
        if shipped:
            problems.append(f"sdist ships {unwanted}: {shipped[:3]}")
    for wanted in ("LICENSE", "pyproject.toml", "README.md", "procflow/py.typed",
                   "examples/quickstart.py"):
        if wanted not in members:
            problems.append(f"sdist lacks {wanted}")
    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
        metadata_name, = (n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = whl.read(metadata_name).decode()
    if "procflow/py.typed" not in names:
        problems.append("wheel lacks procflow/py.typed")
    if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
        problems.append("wheel lacks its LICENSE")
    headers = metadata.partition("\n\n")[0]
    for field in ("Summary: ", "Author: ", "License-Expression: MIT",
                  "Project-URL: Homepage,", "Project-URL: Documentation,",
                  "Project-URL: Source,", "Project-URL: Issues,", "Keywords: ",
                  "Classifier: Typing :: Typed", "Classifier: Framework :: AnyIO",
                  "Classifier: License :: OSI Approved :: MIT License",
                  "Requires-Python: >=3.11"):
        if f"\n{field}" not in f"\n{headers}":
            problems.append(f"wheel metadata lacks {field.strip()!r}")
    return problems


def make_env(work: Path, name: str, requirement: str) -> Path:
    """A fresh virtualenv (without pip) with ``requirement`` installed; its Python."""
    env = work / f"venv-{name}"
    run([sys.executable, "-m", "venv", "--without-pip", env])
    python = env / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-compile",
         "--disable-pip-version-check", requirement])
    return python


def probe(python: Path, work: Path) -> dict[str, object]:
    """The probe's report from ``python`` (run isolated, outside the checkout)."""
    done = run([python, "-I", "-c", PROBE], cwd=work)
    report: dict[str, object] = json.loads(done.stdout)
    return report


def check_env(work: Path, wheel: Path, extra: str | None) -> tuple[str, dict[str, object], float]:
    started = time.monotonic()
    name = extra or "core"
    python = make_env(work, name, f"{wheel}[{extra}]" if extra else str(wheel))
    report = probe(python, work)
    if not str(report["file"]).startswith(str(python.parent.parent)):
        raise RuntimeError(f"{name}: procflow imported from {report['file']}, "
                           "not from the virtualenv")
    return name, report, time.monotonic() - started


def check_core_commands(work: Path) -> list[str]:
    """``procflow --help`` and the quick start, in the bare install."""
    problems = []
    env = work / "venv-core"
    done = run([env / "bin" / "procflow", "--help"], cwd=work, check=False)
    if done.returncode != 0 or "usage" not in done.stdout.lower():
        problems.append(f"core: procflow --help exited {done.returncode}\n{done.stdout}"
                        f"{done.stderr}")
    scratch = Path(tempfile.mkdtemp(prefix="quickstart-", dir=work))
    done = run([env / "bin" / "python", ROOT / "examples" / "quickstart.py"], cwd=scratch,
               check=False)
    if done.returncode != 0:
        problems.append(f"core: examples/quickstart.py exited {done.returncode}\n"
                        f"{done.stdout}{done.stderr}")
    elif not (scratch / ".procflow").is_dir():
        problems.append("core: the quick start wrote no .procflow/ in its directory")
    return problems


def judge(reports: dict[str, dict[str, object]], extras: list[str]) -> list[str]:
    """Compare each environment's report with what its install must allow."""
    problems = []
    core = reports["core"]
    declared = core["extras"]
    assert isinstance(declared, dict)
    if sorted(declared) != sorted(extras):
        problems.append(f"procflow/_extras.py EXTRAS lists {sorted(declared)}, "
                        f"pyproject.toml's extras are {sorted(extras)}")
    core_modules = core["modules"]
    assert isinstance(core_modules, dict)
    for name, report in reports.items():
        modules, probes = report["modules"], report["probes"]
        assert isinstance(modules, dict) and isinstance(probes, dict)
        for module, failure in modules.items():
            if failure is None:
                continue
            if "error" in failure:
                problems.append(f"{name}: importing {module} failed:\n{failure['error']}")
            elif failure["extra"] == name:
                problems.append(f"{name}: {module} still asks for its own extra: "
                                f"{failure['message']}")
            elif name != "core":
                needed = (core_modules.get(module) or {}).get("extra")
                if needed == name:
                    problems.append(f"{name}: {module} needs another extra too: "
                                    f"{failure['message']}")
            if failure.get("message") and (
                    f"pip install 'procflow[{failure['extra']}]'" not in failure["message"]
                    or "\n" in failure["message"]):
                problems.append(f"{name}: {module}'s error is not one line naming the "
                                f"install command: {failure['message']!r}")
        for extra, failure in probes.items():
            if failure is not None and "error" in failure:
                problems.append(f"{name}: the {extra} probe failed:\n{failure['error']}")
            elif name == extra and failure is not None:
                problems.append(f"{name}: using the extra failed: {failure}")
            elif name == "core" and failure is not None and (
                    failure["extra"] != extra
                    or f"pip install 'procflow[{extra}]'" not in failure["message"]
                    or "\n" in failure["message"]):
                problems.append(f"core: using the {extra} extra without it should say "
                                f"pip install 'procflow[{extra}]' in one line: {failure}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--jobs", type=int, default=3,
                        help="virtualenvs installed at once (default 3)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--only", nargs="+", metavar="EXTRA",
                        help="check the bare install and only these extras")
    args = parser.parse_args()
    started = time.monotonic()
    shm = Path("/dev/shm")
    in_memory = shm.is_dir() and os.access(shm, os.W_OK) \
        and shutil.disk_usage(shm).free > SCRATCH_NEEDS
    work = Path(tempfile.mkdtemp(prefix="procflow-install-", dir=shm if in_memory else None))
    try:
        sdist, wheel = build(work)
        log(f"built and twine-checked {sdist.name} and {wheel.name} "
            f"({time.monotonic() - started:.0f} s)")
        problems = check_artifacts(sdist, wheel)
        pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
        extras = sorted(set(pyproject["project"]["optional-dependencies"]) - NOT_CHECKED)
        unknown = set(args.only or ()) - set(extras)
        if unknown:
            parser.error(f"no extra {', '.join(sorted(unknown))}; the extras are "
                         f"{', '.join(extras)}")
        checked = [e for e in extras if args.only is None or e in args.only]
        reports: dict[str, dict[str, object]] = {}
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            futures = [pool.submit(check_env, work, wheel, extra) for extra in [None, *checked]]
            for future in futures:
                try:
                    name, report, took = future.result()
                except RuntimeError as exc:
                    problems.append(str(exc))
                    continue
                reports[name] = report
                modules = report["modules"]
                assert isinstance(modules, dict)
                missing = sorted({f["extra"] for f in modules.values() if f and "extra" in f})
                broken = sum(1 for f in modules.values() if f and "error" in f)
                log(f"{name}: installed and imported {len(modules)} modules in {took:.0f} s"
                    + (f"; some need {', '.join(missing)}" if missing else "")
                    + (f"; {broken} FAILED" if broken else ""))
        if "core" in reports:
            problems += check_core_commands(work)
            problems += judge(reports, extras)
        for problem in problems:
            print(f"[check-install] FAIL {problem}", file=sys.stderr)
        log(f"{'FAILED' if problems else 'ok'}: core and {len(checked)} extras "
            f"({', '.join(checked)}) in {time.monotonic() - started:.0f} s")
        return 1 if problems else 0
    finally:
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.environ.pop("PYTHONPATH", None)
    raise SystemExit(main())
