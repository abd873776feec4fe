"""PIIDetector's offline "name" and "address" rules: the census gazetteer, cues,
neighbouring PII, street lines, PO boxes, hard negatives, spans and redaction."""

from __future__ import annotations

import gzip
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from procflow.processors.builtin.pii import PIIDetector
from procflow.processors.builtin.pii.names import gazetteer, name_key

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "procflow" / "processors" / "builtin" / "pii" / "data" / "names.txt.gz"


def load_script(path: Path) -> ModuleType:
    module_spec = importlib.util.spec_from_file_location(path.stem, path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module
    module_spec.loader.exec_module(module)
    return module


async def found(text: str) -> list[tuple[str, str]]:
    detector = PIIDetector(detection_types=["name", "address"])
    return [(d.type, d.value) for d in await detector.detect(text)]


# -- the gazetteer ----------------------------------------------------------------------


def test_gazetteer_holds_census_names_in_rank_order() -> None:
    names = gazetteer()
    assert names.last["smith"] == 0 and names.last["johnson"] == 1
    assert names.first["james"] < names.first["mary"] < names.first["patricia"]
    assert len(names.last) == 20_000 and len(names.first) > 5_000
    assert {"will", "rose", "brown"} <= names.common
    assert "john" not in names.common
    assert names.common <= set(names.first) | set(names.last)


def test_shipped_file_names_its_source_and_licence() -> None:
    header = gzip.decompress(DATA.read_bytes()).decode("ascii").split("\n[first]\n")[0]
    assert "1990 US Census" in header and "public domain" in header
    assert "scripts/build_names.py" in header


def test_name_key_folds_accents_apostrophes_and_case() -> None:
    assert name_key("Müller") == "muller"
    assert name_key("O'Brien") == "obrien"
    assert name_key("O’Brien") == "obrien"
    assert name_key("SMITH") == "smith"


def test_build_script_writes_ranked_sections_deterministically(tmp_path: Path) -> None:
    build = load_script(ROOT / "scripts" / "build_names.py")
    census = tmp_path / "census"
    census.mkdir()
    (census / "dist.female.first").write_text(
        "MARY           2.629  2.629      1\nROSE           0.200  2.829      2\n")
    (census / "dist.male.first").write_text(
        "JAMES          3.318  3.318      1\nMARY           0.100  3.418      2\n")
    (census / "dist.all.last").write_text(
        "SMITH          1.006  1.006      1\nBROWN          0.621  1.627      2\n"
        "ZYLSTRA        0.001  1.628      3\n")
    words = tmp_path / "words"
    words.write_text("brown\nrose\ntable\nZebra\n")
    data = build.build(census, words, 2)
    assert data == build.build(census, words, 2)
    text = gzip.decompress(data).decode("ascii")
    body = text[text.index("\n[first]\n") + 1:].split("\n")
    assert body == ["[first]", "james", "mary", "rose", "[last]", "smith", "brown",
                    "[common]", "brown", "rose", ""]


# -- names ------------------------------------------------------------------------------

NAMES = [
    ("Hi, my name is Sarah Mitchell and I need help.", "Sarah Mitchell"),
    ("Please forward this to Kevin Harris in accounting.", "Kevin Harris"),
    ("Attn: Robert Chen, Receiving Dept.", "Robert Chen"),
    ("Best regards,\nMichael Thompson\nSenior Analyst", "Michael Thompson"),
    ("Dear Ms. Alvarez,\nThank you for your letter.", "Alvarez"),
    ("The account belongs to Joseph A. Martinez.", "Joseph A. Martinez"),
    ("Margaret O'Brien called twice.", "Margaret O'Brien"),
    ("Ich heiße Thomas Müller.", "Thomas Müller"),
    ("Customer Ravi Shankar (ravi.s@infosys-mail.in) asked for a call.", "Ravi Shankar"),
    ("Send it to Daniel Okafor, d.okafor@lagos.example, today.", "Daniel Okafor"),
    ("Patient Grace Lee, D.O.B. 12/08/1955.", "Grace Lee"),
]


@pytest.mark.parametrize(("text", "name"), NAMES)
async def test_names_are_found(text: str, name: str) -> None:
    assert ("name", name) in await found(text)


HARD_NEGATIVES = [
    "I bought an Apple Watch and an iPhone last week.",
    "The new Air Jordan sneakers sold out in minutes.",
    "We visited Jordan and Egypt on our honeymoon.",
    "The Jordan River flows into the Dead Sea.",
    "Rose Gold is the most popular colour this season.",
    "Will Johnson come to the meeting?",
    "Mercedes Benz recalled the model last spring.",
    "Austin Texas has great barbecue.",
    "Virginia Beach is lovely in June.",
    "Santa Monica Pier is crowded on weekends.",
    "Georgia Tech won the match on Saturday.",
    "Tesla Model 3 deliveries slipped in March.",
    "Dear Customer, your order has shipped.",
    "Thanks, Support",
    "I am Happy with the result.",
    "Top 10 Park Avenue restaurants for brunch.",
    "Springfield, IL is the state capital.",
    "Floor 3, room 12 is near the main road.",
]


@pytest.mark.parametrize("text", HARD_NEGATIVES)
async def test_hard_negatives_are_not_flagged(text: str) -> None:
    assert await found(text) == []


# -- addresses --------------------------------------------------------------------------

ADDRESSES = [
    ("I live at 42 Oak Street, Springfield, IL 62704.", "42 Oak Street, Springfield, IL 62704"),
    ("Ship it to 1200 W Main St, Apt 3B, Boise, ID 83702 please.",
     "1200 W Main St, Apt 3B, Boise, ID 83702"),
    ("1600 Pennsylvania Avenue NW, Washington, DC 20500",
     "1600 Pennsylvania Avenue NW, Washington, DC 20500"),
    ("Mail the check to P.O. Box 4471, Tulsa, OK 74159.", "P.O. Box 4471, Tulsa, OK 74159"),
    ("my address is 15 maple drive, Columbus, OH 43215", "15 maple drive, Columbus, OH 43215"),
    ("Jane Doe\n123 Main Street\nAnytown, CA 90210", "123 Main Street\nAnytown, CA 90210"),
    ("Office: 350 5th Avenue, Suite 3300, New York, NY 10118",
     "350 5th Avenue, Suite 3300, New York, NY 10118"),
    ("We moved to 18 Willow Lane, Reading RG1 8EQ.", "18 Willow Lane, Reading RG1 8EQ"),
]


@pytest.mark.parametrize(("text", "address"), ADDRESSES)
async def test_addresses_are_found(text: str, address: str) -> None:
    assert ("address", address) in await found(text)


# -- spans and redaction ----------------------------------------------------------------


async def test_spans_point_into_the_original_text() -> None:
    text = "Forward to Kevin\u00a0Harris at 42\u200b Oak Street, Springfield, IL 62704."
    detector = PIIDetector(detection_types=["name", "address"])
    for d in await detector.detect(text):
        assert text[d.start:d.end] == d.value
    assert [d.type for d in await detector.detect(text)] == ["name", "address"]


@pytest.mark.parametrize(("method", "expected"), [
    ("placeholder", "Ask [NAME] at [ADDRESS]."),
    ("mask", "Ask ***** ****** at ** *** ******, ***********, ** *****."),
    ("remove", "Ask  at ."),
])
async def test_redaction_handles_names_and_addresses(method: str, expected: str) -> None:
    detector = PIIDetector(detection_types=["name", "address"],
                           redaction_method=method)  # type: ignore[arg-type]
    text = "Ask Kevin Harris at 42 Oak Street, Springfield, IL 62704."
    assert detector.redact(text, await detector.detect(text)) == expected


async def test_hash_redaction_tags_the_type() -> None:
    detector = PIIDetector(detection_types=["name"], redaction_method="hash")
    text = "Ask Kevin Harris."
    assert detector.redact(text, await detector.detect(text)).startswith("Ask [NAME:")


def test_dev_and_heldout_files_are_well_formed() -> None:
    for name in ("pii_names_dev.jsonl", "pii_names_heldout.jsonl"):
        path = ROOT / "tests" / "processors" / "data" / name
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            for span in row["spans"]:
                assert span["type"] in ("name", "address")
                assert span["value"] in row["text"], (name, span)
            assert row["hard_negative"] == (not row["spans"])
