"""``merge_processor_results``: join the branches of a parallel processor step.

After ``.parallel([...])`` a processor workflow holds one envelope per branch, keyed
``processor:<id>``. Picking one branch with ``.map()`` drops the others' edits; this
reducer keeps them all: every branch's text edits (e.g. redactions by several guards)
are applied to the shared starting point, messages a branch removed (the "filter"
strategy) are removed, messages a branch added are added, and warnings are collected.
A block needs no merging: a branch that aborts ends the workflow with its tripwire.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from procflow.errors import ProcessorError
from procflow.messages import Message, MessageList
from procflow.processors.args import ProcessorViolation
from procflow.processors.step import ProcessorStepSchema
from procflow.steps.context import StepContext

__all__ = ["merge_processor_results", "merge_text_edits"]


def merge_processor_results(
        results: StepContext | Mapping[str, Any]) -> ProcessorStepSchema:
    """Merge parallel processor branches into one envelope.

    Use it directly as the map after a parallel: ``.parallel([...]).map(merge_processor_results)``,
    or call it with the dict of branch envelopes.

    Raises:
        ProcessorError: No branch output is a ``ProcessorStepSchema`` envelope.
    """
    data = results.input_data if isinstance(results, StepContext) else results
    if not isinstance(data, Mapping):
        raise ProcessorError("merge_processor_results() needs the parallel output (a dict "
                             f"of branch envelopes), got {type(data).__name__}")
    envs = [v for v in data.values() if isinstance(v, ProcessorStepSchema)]
    if not envs:
        raise ProcessorError("merge_processor_results(): no branch returned a "
                             f"ProcessorStepSchema envelope (keys: {sorted(data)})")
    first = envs[0]
    if first.phase == "output_stream":
        return _merge_stream(envs)
    base = first.base if first.base is not None else first.live_list()
    merged = base.copy()
    lists = [env.live_list() for env in envs]
    for original in [*base.system(), *base.all()]:
        versions = [ml.get(original.id) for ml in lists]
        if any(v is None for v in versions):
            merged.remove_by_ids([original.id])
            continue
        changed = [v for v in versions if v is not None and v.model_dump() != original.model_dump()]
        if not changed:
            continue
        texts = list(dict.fromkeys(v.text for v in changed if v.text != original.text))
        winner: Message = changed[0]
        if len(texts) > 1:
            winner = winner.with_text(merge_text_edits(original.text, texts))
        merged.replace(original.id, winner)
    _add_new(merged, base, lists)
    violations = _violations(envs)
    view = (merged.input() if first.phase == "input" else
            merged.response() if first.phase == "output_result" else merged.all())
    return first.model_copy(update={"message_list": merged, "messages": view,
                                    "system_messages": merged.system(), "base": None,
                                    "violations": violations})


def _add_new(merged: MessageList, base: MessageList, lists: list[MessageList]) -> None:
    for ml in lists:
        for msg in [*ml.system(), *ml.all()]:
            if base.get(msg.id) is None and merged.get(msg.id) is None:
                if msg.role == "system":
                    merged.add_system(msg)
                else:
                    merged.add(msg, source=ml.source_of(msg.id))


def _violations(envs: list[ProcessorStepSchema]) -> list[ProcessorViolation]:
    seen: list[ProcessorViolation] = []
    for env in envs:
        for v in env.violations:
            if v not in seen:
                seen.append(v)
    return seen


def _merge_stream(envs: list[ProcessorStepSchema]) -> ProcessorStepSchema:
    first = envs[0]
    if any(env.part is None for env in envs):
        part = None
    else:
        texts = [env.part.text for env in envs if env.part is not None]
        original = first.stream_parts[-1].text if first.stream_parts else texts[0]
        edited = list(dict.fromkeys(t for t in texts if t != original))
        part = first.part
        if edited and part is not None:
            from procflow.messages import ReasoningDelta, TextDelta

            merged = merge_text_edits(original, edited)
            part = (ReasoningDelta(merged, part.metadata) if isinstance(part, ReasoningDelta)
                    else TextDelta(merged, part.metadata))
    return first.model_copy(update={"part": part, "violations": _violations(envs)})


def merge_text_edits(base: str, variants: list[str]) -> str:
    """Apply every variant's edits of ``base`` to it (a three-way merge of strings).

    Non-overlapping edits from different variants are all kept; where edits overlap,
    the one covering the widest span of ``base`` wins (for redactions: the most
    cautious one).
    """
    edits: list[tuple[int, int, str]] = []
    for variant in variants:
        matcher = difflib.SequenceMatcher(None, base, variant, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag != "equal":
                edits.append((i1, i2, variant[j1:j2]))
    edits.sort(key=lambda e: (e[0], -(e[1] - e[0])))
    kept: list[tuple[int, int, str]] = []
    for start, end, text in edits:
        if kept and start < kept[-1][1]:
            last = kept[-1]
            if end - start > last[1] - last[0]:
                kept[-1] = (min(start, last[0]), max(end, last[1]), text)
            else:
                kept[-1] = (last[0], max(end, last[1]), last[2])
            continue
        if kept and start == kept[-1][0] == kept[-1][1] == end and text == kept[-1][2]:
            continue  # the same insertion from two variants
        kept.append((start, end, text))
    out: list[str] = []
    cursor = 0
    for start, end, text in kept:
        out.append(base[cursor:start])
        out.append(text)
        cursor = end
    out.append(base[cursor:])
    return "".join(out)
