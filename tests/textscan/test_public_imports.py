"""The rest of procflow reads the text engine through ``procflow.textscan``'s public
names; the private imports the injection and moderation scans still make (their
proxies, gates and joint RE2 sets) are listed here and may only shrink."""

from __future__ import annotations

import ast
from pathlib import Path

import procflow.textscan as textscan

PACKAGE = Path(textscan.__file__).resolve().parent.parent

KNOWN_PRIVATE: set[tuple[str, str]] = {
    ("processors/builtin/injection/patterns.py", "_views.WORD_GAP"),
    ("processors/builtin/injection/patterns.py", "_views.compile_pattern"),
    ("processors/builtin/injection/scan.py", "_anchors.PatternTable"),
    ("processors/builtin/injection/scan.py", "_literals.literal_gate"),
    ("processors/builtin/injection/scan.py", "_prefilter.may_start"),
    ("processors/builtin/injection/scan.py", "_prefilter.proxy"),
    ("processors/builtin/injection/scan.py", "_views.ROT13_BYTES"),
    ("processors/builtin/injection/scan.py", "_views.decode_payloads"),
    ("processors/builtin/injection/scan.py", "_views.sentence_bounds"),
    ("processors/builtin/injection/scan.py", "_views.smuggling_signals"),
    ("processors/builtin/moderation/idioms.py", "_anchors.PatternTable"),
    ("processors/builtin/moderation/idioms.py", "_views.compile_pattern"),
    ("processors/builtin/moderation/lexicon.py", "_anchors.JointScan"),
    ("processors/builtin/moderation/lexicon.py", "_anchors.PatternTable"),
    ("processors/builtin/moderation/lexicon.py", "_views.compile_pattern"),
    ("processors/builtin/moderation/lexicon.py", "_views.sentence_bounds"),
    ("processors/builtin/regex/filter.py", "_prefilter.load_re2"),
}
"""(module, private name) imported from ``procflow.textscan._*`` outside the package."""


def _textscan_imports() -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    public: set[tuple[str, str]] = set()
    private: set[tuple[str, str]] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("textscan/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("procflow.textscan."):
                        private.add((rel, alias.name.removeprefix("procflow.textscan.")))
            elif isinstance(node, ast.ImportFrom) and node.module is not None:
                if node.module == "procflow.textscan":
                    public.update((rel, alias.name) for alias in node.names)
                elif node.module.startswith("procflow.textscan."):
                    module = node.module.removeprefix("procflow.textscan.")
                    private.update((rel, f"{module}.{alias.name}") for alias in node.names)
    return public, private


def test_guards_import_public_names_or_known_private_ones() -> None:
    public, private = _textscan_imports()
    assert {name for _, name in public} <= set(textscan.__all__)
    assert private <= KNOWN_PRIVATE, f"new private imports: {sorted(private - KNOWN_PRIVATE)}"
    assert not KNOWN_PRIVATE - private, (
        f"no longer imported, drop from KNOWN_PRIVATE: {sorted(KNOWN_PRIVATE - private)}")


def test_pii_reads_through_the_public_entry_only() -> None:
    public, private = _textscan_imports()
    assert not {item for item in private if "/pii/" in item[0]}
    assert ("processors/builtin/pii/rules.py", "Scanner") in public
