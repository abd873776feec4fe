"""``ToolSearchProcessor``: let an agent find and load tools on demand.

Instead of sending every tool's schema with every model call, the agent is offered two
meta-tools: ``search_tools(query)`` ranks the hidden tools by a BM25 score over their
names and descriptions (offline and deterministic), and ``load_tool(name)`` makes one
available. A loaded tool is offered from the following step on.

What a conversation has loaded is remembered per thread (``THREAD_ID_KEY`` in the
request context) for ``ttl`` seconds after the thread last used it, in a bounded
in-process store; without a thread id it lasts for the request only.
"""

from __future__ import annotations

import difflib
import math
import re
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from procflow.context import THREAD_ID_KEY
from procflow.errors import ProcessorError
from procflow.processors.args import ProcessInputStepArgs, ProcessInputStepResult
from procflow.processors.base import Processor
from procflow.tools import Tool

__all__ = ["LOAD_TOOL_NAME", "SEARCH_TOOLS_NAME", "ToolSearchHit", "ToolSearchOptions",
           "ToolSearchProcessor"]

SEARCH_TOOLS_NAME: Final = "search_tools"
LOAD_TOOL_NAME: Final = "load_tool"
_META_NAMES: Final = frozenset({SEARCH_TOOLS_NAME, LOAD_TOOL_NAME})
DEFAULT_TTL: Final = 3600.0
DEFAULT_MAX_THREADS: Final = 10_000

_K1: Final = 1.2
_B: Final = 0.75
_NAME_WEIGHT: Final = 2  # name tokens count twice: a name says more than prose
_TOKEN = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_STOPWORDS: Final = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "how", "i", "in", "is",
    "it", "of", "on", "or", "the", "this", "to", "with"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSearchOptions:
    """How ``search_tools`` ranks.

    Attributes:
        top_k: The most results one search returns (an int > 0).
        min_score: Results must score above this (a number >= 0); a tool sharing no
            word with the query scores 0 and is never returned.

    Raises:
        ValueError: A setting is out of range.
    """

    top_k: int = 5
    min_score: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k <= 0:
            raise ValueError(f"ToolSearchProcessor: search top_k must be an int > 0, "
                             f"got {self.top_k!r}")
        if (isinstance(self.min_score, bool) or not isinstance(self.min_score, int | float)
                or not math.isfinite(self.min_score) or self.min_score < 0):
            raise ValueError(f"ToolSearchProcessor: search min_score must be a number >= 0, "
                             f"got {self.min_score!r}")


@dataclass(frozen=True, slots=True)
class ToolSearchHit:
    """One search result.

    Attributes:
        name: The tool's name (pass it to ``load_tool``).
        description: The tool's description.
        score: Its BM25 relevance to the query (higher is better), rounded to 4 places.
    """

    name: str
    description: str
    score: float


def tokenize(text: str) -> list[str]:
    """Lowercase words of ``text``, splitting snake_case, kebab-case and camelCase and
    dropping a few stop words."""
    words = (w.lower() for w in _TOKEN.findall(text))
    return [w for w in words if w not in _STOPWORDS]


class _Index:
    """A BM25 index over tool names and descriptions."""

    __slots__ = ("_avg", "_docs", "_idf", "_names")

    def __init__(self, tools: Iterable[Tool]) -> None:
        self._docs: dict[str, tuple[Counter[str], int]] = {}
        for t in tools:
            words = tokenize(t.id) * _NAME_WEIGHT + tokenize(t.description)
            self._docs[t.id] = (Counter(words), len(words))
        self._names = sorted(self._docs)
        count = len(self._docs)
        self._avg = sum(n for _, n in self._docs.values()) / count if count else 0.0
        df: Counter[str] = Counter()
        for counts, _ in self._docs.values():
            df.update(counts.keys())
        self._idf = {w: math.log(1 + (count - d + 0.5) / (d + 0.5)) for w, d in df.items()}

    def score(self, query: str) -> dict[str, float]:
        terms = set(tokenize(query))
        out: dict[str, float] = {}
        for name in self._names:
            counts, length = self._docs[name]
            total = 0.0
            norm = _K1 * (1 - _B + _B * length / self._avg) if self._avg else _K1
            for term in terms:
                tf = counts.get(term, 0)
                if tf:
                    total += self._idf[term] * tf * (_K1 + 1) / (tf + norm)
            out[name] = round(total, 4)
        return out


@dataclass(slots=True)
class _Entry:
    names: dict[str, None]
    touched: float


class _LoadedStore:
    """Thread id -> loaded tool names, forgotten ``ttl`` seconds after last use; at most
    ``max_threads`` threads (the least recently used go first)."""

    __slots__ = ("_clock", "_entries", "_max", "_ttl")

    def __init__(self, ttl: float, max_threads: int, clock: Callable[[], float]) -> None:
        self._ttl = ttl
        self._max = max_threads
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    def _live(self, key: str) -> _Entry | None:
        now = self._clock()
        while self._entries:  # oldest first: drop what has expired
            oldest_key, oldest = next(iter(self._entries.items()))
            if now - oldest.touched < self._ttl:
                break
            del self._entries[oldest_key]
        entry = self._entries.get(key)
        if entry is not None:
            entry.touched = now
            self._entries.move_to_end(key)
        return entry

    def names(self, key: str) -> list[str]:
        entry = self._live(key)
        return list(entry.names) if entry is not None else []

    def add(self, key: str, name: str) -> bool:
        entry = self._live(key)
        if entry is None:
            entry = self._entries[key] = _Entry({}, self._clock())
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        if name in entry.names:
            return False
        entry.names[name] = None
        return True

    def __len__(self) -> int:
        return len(self._entries)


class _SearchInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(description="Keywords describing the capability you need.")


class _LoadInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="The exact name of a tool returned by search_tools.")


class _RequestLoaded:
    """The loaded names of one request without a thread id."""

    __slots__ = ("_names",)

    def __init__(self) -> None:
        self._names: dict[str, None] = {}

    def names(self) -> list[str]:
        return list(self._names)

    def add(self, name: str) -> bool:
        if name in self._names:
            return False
        self._names[name] = None
        return True


class _ThreadLoaded:
    """The loaded names of one thread, kept in the processor's store."""

    __slots__ = ("_key", "_store")

    def __init__(self, store: _LoadedStore, key: str) -> None:
        self._store = store
        self._key = key

    def names(self) -> list[str]:
        return self._store.names(self._key)

    def add(self, name: str) -> bool:
        return self._store.add(self._key, name)


def _as_tool_list(tools: Any) -> list[Tool]:
    if tools is None:
        return []
    if isinstance(tools, Mapping):
        return list(tools.values())
    return list(tools)


class ToolSearchProcessor(Processor):
    """Hides a large set of tools behind ``search_tools`` and ``load_tool`` meta-tools.

    On every step the model is offered the step's own tools, the two meta-tools, and
    the hidden tools this conversation has loaded so far.

    Args:
        tools: The searchable tools (``Tool`` objects, names unique).
        search: ``ToolSearchOptions``, or a dict of its fields (``top_k``, ``min_score``).
        ttl: Seconds a thread's loaded tools are kept after its last step (> 0).
        max_threads: Most threads remembered at once (least recently used are dropped).
        clock: Returns the time in seconds (default ``time.monotonic``; inject one in tests).
        id: The processor id.

    Raises:
        ValueError: No tools, a non-``Tool`` item, duplicate names, a name reserved for a
            meta-tool, or an invalid setting.

    Example::

        agent = Agent(id="ops", model=model,
                      input_processors=[ToolSearchProcessor(all_tools, search={"top_k": 3})])
    """

    def __init__(self, tools: Sequence[Tool] | Mapping[str, Tool], *,
                 search: ToolSearchOptions | Mapping[str, Any] | None = None,
                 ttl: float = DEFAULT_TTL, max_threads: int = DEFAULT_MAX_THREADS,
                 clock: Callable[[], float] = time.monotonic, id: str = "tool-search") -> None:
        if not isinstance(id, str) or not id:
            raise ValueError(f"ToolSearchProcessor: id must be a non-empty str, got {id!r}")
        self.id = id
        self.options = _options(search)
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0:
            raise ValueError(f"ToolSearchProcessor: ttl must be a number of seconds > 0, "
                             f"got {ttl!r}")
        if isinstance(max_threads, bool) or not isinstance(max_threads, int) or max_threads < 1:
            raise ValueError(f"ToolSearchProcessor: max_threads must be an int > 0, "
                             f"got {max_threads!r}")
        self.tools: dict[str, Tool] = _checked_tools(tools)
        self.ttl = float(ttl)
        self._index = _Index(self.tools.values())
        self._store = _LoadedStore(self.ttl, max_threads, clock)

    # -- direct use -----------------------------------------------------------------

    def search(self, query: str) -> list[ToolSearchHit]:
        """The hidden tools best matching ``query``: at most ``top_k``, each scoring
        above ``min_score``, best first (ties by name)."""
        scores = self._index.score(query)
        ranked = sorted(((s, n) for n, s in scores.items() if s > self.options.min_score),
                        key=lambda item: (-item[0], item[1]))
        return [ToolSearchHit(n, self.tools[n].description, s)
                for s, n in ranked[:self.options.top_k]]

    def loaded(self, thread_id: str) -> list[str]:
        """The tools a thread has loaded (in load order), refreshing its TTL."""
        return [n for n in self._store.names(thread_id) if n in self.tools]

    def close_names(self, name: str, limit: int = 5) -> list[str]:
        """Tool names resembling ``name`` (spelling first, then shared words)."""
        found = difflib.get_close_matches(name, list(self.tools), n=limit, cutoff=0.5)
        for hit in self.search(name):
            if hit.name not in found:
                found.append(hit.name)
        return found[:limit]

    def offered_tools(self) -> list[Tool]:
        """The meta-tools, then the searchable tools (for drawing the agent's loop)."""
        return [*self._meta_tools(_RequestLoaded()), *self.tools.values()]

    # -- the hook -------------------------------------------------------------------

    def process_input_step(self, args: ProcessInputStepArgs) -> ProcessInputStepResult:
        """Offer the step's tools, the meta-tools and the loaded tools.

        Raises:
            ProcessorError: The step already has another tool named like a meta-tool.
        """
        state = args.state
        meta: list[Tool] | None = state.get("meta")
        if meta is None:
            thread = args.request_context.get(THREAD_ID_KEY)
            loaded: _ThreadLoaded | _RequestLoaded = (
                _ThreadLoaded(self._store, str(thread)) if thread else _RequestLoaded())
            state["loaded"] = loaded
            meta = state["meta"] = self._meta_tools(loaded)
        current = _as_tool_list(args.tools)
        names = {t.id for t in current}
        for t in current:
            if t.id in _META_NAMES and t not in meta:
                raise ProcessorError(
                    f"ToolSearchProcessor: the step already has a tool named {t.id!r}, which "
                    f"clashes with the meta-tool of processor {self.id!r}; rename that tool",
                    processor_id=self.id, hook="process_input_step")
        out = current + [t for t in meta if t.id not in names]
        for name in state["loaded"].names():
            if name not in names and name in self.tools:
                out.append(self.tools[name])
        return ProcessInputStepResult(tools=out)

    def _meta_tools(self, loaded: _ThreadLoaded | _RequestLoaded) -> list[Tool]:

        def search_tools(data: _SearchInput) -> dict[str, Any]:
            have = set(loaded.names())
            hits = [{"name": h.name, "description": h.description, "score": h.score,
                     "loaded": h.name in have} for h in self.search(data.query)]
            hint = ("Call load_tool with a name to use that tool from your next step."
                    if hits else "No tool matched; try other keywords.")
            return {"query": data.query, "results": hits, "hint": hint}

        def load_tool(data: _LoadInput) -> dict[str, Any]:
            name = data.name.strip()
            if name not in self.tools:
                close = self.close_names(name)
                suggestion = (f"did you mean: {', '.join(close)}?" if close
                              else "no similar tool exists;")
                raise LookupError(f"unknown tool {name!r}; {suggestion} Use search_tools to "
                                  "find tools by keyword.")
            added = loaded.add(name)
            return {"name": name, "loaded": True,
                    "message": (f"Tool {name!r} is loaded; you can call it from your next step."
                                if added else f"Tool {name!r} was already loaded.")}

        return [
            Tool(SEARCH_TOOLS_NAME,
                 "Search the available tools by keywords. Returns matching tool names, "
                 "descriptions and relevance scores; load one with load_tool to use it.",
                 _SearchInput, search_tools),
            Tool(LOAD_TOOL_NAME,
                 "Load a tool by its exact name (from search_tools) so that you can call "
                 "it from your next step.", _LoadInput, load_tool),
        ]


def _options(search: ToolSearchOptions | Mapping[str, Any] | None) -> ToolSearchOptions:
    if search is None:
        return ToolSearchOptions()
    if isinstance(search, ToolSearchOptions):
        return search
    if isinstance(search, Mapping):
        allowed = {"top_k", "min_score"}
        unknown = sorted(str(k) for k in search if k not in allowed)
        if unknown:
            raise ValueError(f"ToolSearchProcessor: unknown search option(s) {unknown}; "
                             f"expected {sorted(allowed)}")
        return ToolSearchOptions(**search)
    raise ValueError(f"ToolSearchProcessor: search must be a ToolSearchOptions or a dict, "
                     f"got {type(search).__name__}")


def _checked_tools(tools: Sequence[Tool] | Mapping[str, Tool]) -> dict[str, Tool]:

    if isinstance(tools, str | bytes) or not isinstance(tools, Sequence | Mapping):
        raise ValueError(f"ToolSearchProcessor: tools must be a list of Tool, "
                         f"got {type(tools).__name__}")
    items = list(tools.values()) if isinstance(tools, Mapping) else list(tools)
    if not items:
        raise ValueError("ToolSearchProcessor: tools is empty; give the tools to search")
    out: dict[str, Tool] = {}
    duplicates: list[str] = []
    for i, item in enumerate(items):
        if not isinstance(item, Tool):
            raise ValueError(f"ToolSearchProcessor: tools[{i}] is {item!r}, not a Tool; "
                             "wrap functions with @tool")
        if item.id in _META_NAMES:
            raise ValueError(f"ToolSearchProcessor: a tool may not be named {item.id!r} "
                             f"(reserved for the meta-tools {sorted(_META_NAMES)})")
        if item.id in out:
            duplicates.append(item.id)
        out[item.id] = item
    if duplicates:
        raise ValueError(f"ToolSearchProcessor: duplicate tool names {sorted(set(duplicates))}; "
                         "every tool needs a unique name")
    if isinstance(tools, Mapping):
        wrong = sorted(str(k) for k, v in tools.items() if k != v.id)
        if wrong:
            raise ValueError(f"ToolSearchProcessor: tools mapping keys {wrong} differ from "
                             "their tools' names")
    return out
