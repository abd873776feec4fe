"""A guard in service: throughput and memory over a long stream of text it has not met.

``python benchmarks/guard_stream.py [PATH ...] [--guard NAME] [--limit MB] [--block MB]``

``benchmarks/guards.py`` times the guards over text met again, and over half of its set
read once after the other half. A guard in service reads a stream of new text; the RE2
sets of the injection and moderation tables build a DFA state for each new mix of
partly matched rules, so the first megabytes cost more than the same text met again and
later ones less, as the states most text leads to are built. This script feeds one
guard (``injection`` by default, or ``moderation``, ``pii``) the text files under each
PATH (default: ``/usr/share/doc`` where it exists, and the Python standard library's
modules), each file once, cut into pieces of 300 to 10,000 characters (a fixed seed),
and prints, for each ``--block`` megabytes (default 2) up to ``--limit`` (default 24):
that block's throughput by CPU time, and the process's resident memory.

Files that are not UTF-8 text (``.gz`` files are read decompressed) and HTML pages are
skipped. Point it at a folder of your own documents to see what a guard costs on them.

Exit code always 0: a report, never a gate.
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import resource
import sys
import sysconfig
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from time import process_time
from typing import Any

import anyio

from procflow.processors.builtin.injection import PromptInjectionDetector
from procflow.processors.builtin.moderation import ModerationProcessor
from procflow.processors.builtin.pii import PIIDetector

PIECES = (300, 2_000, 5_000, 10_000)
_MAX_FILE = 1_000_000


def default_paths() -> list[Path]:
    paths = [Path("/usr/share/doc")] if Path("/usr/share/doc").is_dir() else []
    return [*paths, Path(sysconfig.get_paths()["stdlib"])]


def read_text(path: Path) -> str | None:
    """The file's text, or ``None`` when it is not UTF-8 text (or too large, or HTML)."""
    try:
        if path.stat().st_size > _MAX_FILE:
            return None
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile):
        return None
    if "\0" in text or "<html" in text[:1_000].lower():
        return None
    return text


def files_under(roots: list[Path], seed: int = 0) -> list[Path]:
    """The files under ``roots`` (each root a file or a folder), in a shuffled order."""
    files: list[Path] = []
    for root in roots:
        if root.is_file():
            files.append(root)
            continue
        # ``os.walk`` passes over folders it cannot read (``rglob`` raises)
        for folder, _, names in os.walk(root):
            files.extend(path for name in names
                         if (path := Path(folder, name)).is_file() and not path.is_symlink())
    files.sort()
    random.Random(seed).shuffle(files)
    return files


def pieces(files: list[Path], seed: int = 0) -> Iterator[str]:
    """Each of ``files`` that is text, cut into pieces."""
    rng = random.Random(seed)
    for path in files:
        text = read_text(path)
        if not text:
            continue
        pos = 0
        while pos < len(text):
            size = rng.choice(PIECES)
            yield text[pos:pos + size]
            pos += size


def resident_mb() -> int:
    """The process's resident memory now (MB), where ``/proc`` tells; else its peak."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * resource.getpagesize() >> 20
    except (OSError, IndexError, ValueError):
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) >> 10


def make_guard(name: str) -> Callable[[str], Awaitable[Any]]:
    if name == "injection":
        return PromptInjectionDetector().detect
    if name == "moderation":
        return ModerationProcessor().detect
    return PIIDetector().detect


async def run(roots: list[Path], guard: str, limit: float, block: float) -> None:
    detect = make_guard(guard)
    files = files_under(roots)
    await detect("warm-up: the rule tables are compiled on import, this loads the rest")
    print(f"{guard}: a stream of new text from {', '.join(map(str, roots))}; "
          f"resident memory before it: {resident_mb()} MB")
    print(f"{'read (MB)':>10}{'MB/s cpu':>10}{'resident (MB)':>15}")
    done = size = 0
    start = process_time()
    for text in pieces(files):
        await detect(text)
        size += len(text.encode())
        if size >= block * 1e6:
            took = max(process_time() - start, 1e-9)
            done += size
            print(f"{done / 1e6:>10.1f}{size / took / 1e6:>10.2f}{resident_mb():>15}")
            size = 0
            if done >= limit * 1e6:
                return
            start = process_time()
    if not done and not size:
        print("no text files found under those paths")
    elif size:
        done += size
        print(f"{done / 1e6:>10.1f}{size / max(process_time() - start, 1e-9) / 1e6:>10.2f}"
              f"{resident_mb():>15}  (the rest)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("paths", nargs="*", type=Path, help="files or folders of text")
    parser.add_argument("--guard", choices=("injection", "moderation", "pii"),
                        default="injection")
    parser.add_argument("--limit", type=float, default=24.0, help="megabytes to read")
    parser.add_argument("--block", type=float, default=2.0, help="megabytes per line")
    args = parser.parse_args()
    if args.limit <= 0 or args.block <= 0:
        parser.error("--limit and --block must be positive")
    roots = args.paths or default_paths()
    missing = [str(p) for p in roots if not p.exists()]
    if missing:
        parser.error(f"no such file or folder: {', '.join(missing)}")
    anyio.run(run, roots, args.guard, args.limit, args.block)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
