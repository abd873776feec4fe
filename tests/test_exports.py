"""The public API: every name in ``__all__`` exists, and DESIGN's names are exported."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

MODULES = ["procflow", "procflow.messages", "procflow.context", "procflow.errors",
           "procflow.storage", "procflow.steps", "procflow.workflows", "procflow.runtime",
           "procflow.processors", "procflow.processors.builtin", "procflow.agent",
           "procflow.models", "procflow.studio", "procflow.cache", "procflow.memory",
           "procflow.evals", "procflow.textscan"]

DESIGN = {
    "procflow": ["create_workflow", "create_step", "step", "Workflow", "Run", "WorkflowResult",
                 "StepContext", "RequestContext", "set_default_storage", "Agent", "tool"],
    "procflow.errors": ["ProcflowError", "WorkflowDefinitionError", "StepValidationError",
                        "TripwireError", "APICallError", "RunNotFoundError"],
    "procflow.storage": ["Storage", "InMemoryStorage", "SQLiteStorage", "RedisStorage"],
    "procflow.processors": ["Processor", "ProcessorStepSchema", "Signal", "APIErrorResult",
                            "ProcessInputArgs", "TokenLimiter", "ToolCallFilter",
                            "ProviderHistoryCompat", "PrefillErrorHandler",
                            "StreamErrorRetryProcessor", "ModerationProcessor",
                            "PromptInjectionDetector", "PIIDetector", "UnicodeNormalizer",
                            "RegexFilterProcessor", "BatchPartsProcessor",
                            "ToolSearchProcessor", "CostGuardProcessor", "ResponseCache",
                            "build_response_cache_key", "DEFAULT_RESPONSE_CACHE_TTL_SECONDS"],
    "procflow.cache": ["ServerCache", "InMemoryServerCache", "RedisCache"],
    # The memory processors come from procflow.memory: processors sits below memory,
    # which builds on it, so procflow.processors may not re-export them.
    "procflow.memory": ["Memory", "SemanticRecallOptions", "WorkingMemoryOptions",
                        "MessageHistory", "SemanticRecall", "WorkingMemory"],
    "procflow.models": ["ScriptedModel", "FunctionModel", "ModelResponse", "ToolCall",
                        "LanguageModel", "FallbackModel"],
    "procflow.evals": ["Dataset", "Case", "scorer", "ExactMatch", "Contains", "Regex",
                       "IsInstance", "LLMJudge", "NoPII", "NoInjection", "ToolCalled"],
}


@pytest.mark.parametrize("module", MODULES)
def test_all_names_exist(module: str) -> None:
    mod = importlib.import_module(module)
    for name in mod.__all__:
        assert hasattr(mod, name), f"{module}.{name} is in __all__ but missing"


@pytest.mark.parametrize("module", sorted(DESIGN))
def test_design_names_are_exported(module: str) -> None:
    mod = importlib.import_module(module)
    assert set(DESIGN[module]) <= set(mod.__all__)


def test_errors_share_one_root() -> None:
    errors = importlib.import_module("procflow.errors")
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.ProcflowError)


def test_import_is_light() -> None:
    code = ("import sys, procflow; heavy = {'networkx', 'rich', 'tiktoken', 'redis', 'httpx'}"
            "; print(sorted(heavy & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("module", MODULES)
def test_lazy_names_are_exported(module: str) -> None:
    """What a package loads on first use (its ``TYPE_CHECKING`` imports) is in its
    ``__all__``, and ``procflow.processors`` re-exports every built-in."""
    from procflow._lazy import declared_exports

    mod = importlib.import_module(module)
    lazy = set(declared_exports(module, vars(mod)))
    assert lazy <= set(mod.__all__)
    if module == "procflow.processors":
        assert lazy == set(importlib.import_module("procflow.processors.builtin").__all__)


def test_a_lazy_package_declares_its_exports_once() -> None:
    """``procflow.processors.builtin`` lists each name once, as an import under
    ``TYPE_CHECKING``; the lazy table and ``__all__`` are read from that block."""
    builtin = importlib.import_module("procflow.processors.builtin")
    table = builtin._EXPORTS
    assert builtin.__all__ == sorted(table) and len(table) == 32
    assert table["PIIDetector"] == "procflow.processors.builtin.pii"
    assert table["DetectionResult"] == "procflow.processors.builtin._detection"
    source = Path(builtin.__file__).read_text(encoding="utf-8")
    assert all(source.count(f"{name} as {name}") == 1 for name in table)
