"""``MessageIndex``: semantic search over the vectors a ``VectorStore`` keeps beside the
messages.

Vectors are stored in the same store as their messages, under an *embedding space* that
names the embedder and the vectors' size (``"hash-v1/256"``). A search only ever
compares vectors of the query's space, so two embedders' vectors are never mixed.

Each scope (a thread, or a resource's threads) is loaded from the store on its first
search, then kept in process memory as one float32 matrix of unit vectors. Before every
search the scope's version is read (one indexed lookup); when another writer has
changed it, only the rows written since are read. Exact cosine search is one
matrix-vector product and a partial sort in numpy, in a worker thread, so the event
loop never waits for it. With ``approximate=True`` a scope larger than
``approximate_above`` vectors (default ``APPROXIMATE_ABOVE``) is searched through a
hnswlib HNSW index instead (``procflow[ann]``), built in a worker thread on its first
search.

When the embedder changes, its space has no vectors yet: the first search of a scope
embeds that scope's messages that have none (up to ``catch_up_limit`` per search, in
batches, through the embedding cache), and ``Memory.reindex()`` does the whole scope at
once. Messages whose indexing failed are caught up the same way.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, final

import anyio
import anyio.to_thread

from procflow._extras import needs
from procflow.memory.base import Embedder, StoredVector, VectorBatch, VectorMatch, VectorStore
from procflow.memory.codec import is_hidden
from procflow.messages import Message

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vector = npt.NDArray[np.float32]

__all__ = ["APPROXIMATE_ABOVE", "MessageIndex", "embedder_name", "indexable_text"]

APPROXIMATE_ABOVE: Final = 200_000
"""Scope size above which ``approximate=True`` switches from exact to HNSW search."""

_EMBED_BATCH: Final = 256


def embedder_name(embedder: Embedder) -> str:
    """The embedder's ``name`` attribute, else its class's qualified name."""
    name = getattr(embedder, "name", None)
    if isinstance(name, str) and name:
        return name
    kind = type(embedder)
    return f"{kind.__module__}.{kind.__qualname__}"


def indexable_text(message: Message) -> str | None:
    """The text recall searches a message by, or ``None`` (not a user or assistant
    message, a hidden signal, or no text)."""
    if message.role not in ("user", "assistant") or is_hidden(message):
        return None
    text = message.text
    return text if text.strip() else None


def _numpy() -> Any:
    with needs("vector", feature="semantic recall (vector search)"):
        import numpy
    return numpy


def _unit(rows: Sequence[Sequence[float]]) -> Vector:
    np = _numpy()
    matrix = np.asarray(rows, dtype=np.float64)  # float32 squares of tiny values underflow
    if matrix.ndim != 2:
        raise ValueError(f"the embedder returned vectors of different sizes "
                         f"({sorted({len(r) for r in rows})}); one embedder must give one size")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: Vector = (matrix / norms).astype(np.float32)
    return unit


@final
class _Scope:
    """One scope's vectors in process memory (touched only in worker threads, under
    ``lock``): a float32 matrix grown by doubling, ids by row, and optionally an HNSW
    index of the rows."""

    def __init__(self, dimensions: int) -> None:
        self.lock = threading.Lock()
        self.dimensions = dimensions
        self.ids: list[str] = []
        self.threads: list[str] = []
        self.rows: dict[str, int] = {}
        self.dead: set[int] = set()
        self.matrix: Vector = _numpy().empty((0, dimensions), dtype=_numpy().float32)
        self.version = -1
        self.last_seq = 0
        self.checked = False
        self.ann: Any = None

    def __len__(self) -> int:
        return len(self.ids) - len(self.dead)

    def apply(self, batch: VectorBatch) -> None:
        np = _numpy()
        with self.lock:
            rows: list[int] = []
            blobs: list[bytes] = []
            for message_id, thread, vector in zip(batch.ids, batch.threads, batch.vectors,
                                                  strict=True):
                row = self.rows.get(message_id)
                if row is None:
                    if vector is None:
                        continue
                    row = self._append(message_id, thread)
                if vector is None:
                    self.dead.add(row)
                    continue
                if len(vector) != 4 * self.dimensions:
                    raise ValueError(f"stored vector of message {message_id!r} has "
                                     f"{len(vector) // 4} values, not {self.dimensions}")
                self.threads[row] = thread
                self.dead.discard(row)
                rows.append(row)
                blobs.append(vector)
            if rows:
                block = np.frombuffer(b"".join(blobs), dtype=np.float32)
                self.matrix[rows] = block.reshape(len(rows), self.dimensions)
            if batch.seqs:
                self.last_seq = max(self.last_seq, batch.seqs[-1])
            if self.ann is not None and rows:
                self._ann_add(rows)

    def _append(self, message_id: str, thread: str) -> int:
        row = len(self.ids)
        if row == self.matrix.shape[0]:
            np = _numpy()
            grown = np.empty((max(1024, row * 2), self.dimensions), dtype=np.float32)
            grown[:row] = self.matrix[:row]
            self.matrix = grown
        self.ids.append(message_id)
        self.threads.append(thread)
        self.rows[message_id] = row
        return row

    def _ann_add(self, rows: list[int]) -> None:
        np = _numpy()
        keys = np.asarray(sorted(set(rows)), dtype=np.int64)
        needed = int(self.ann.get_current_count()) + len(keys)
        if needed > int(self.ann.get_max_elements()):
            self.ann.resize_index(max(needed, 2 * int(self.ann.get_max_elements())))
        # hnswlib replaces the vector of a label it already holds
        self.ann.add_items(self.matrix[keys], keys, num_threads=1)

    def search(self, query: Vector, top_k: int, approximate_above: int | None,
               ) -> list[tuple[int, float]]:
        np = _numpy()
        with self.lock:
            count = len(self.ids)
            if count == 0 or top_k <= 0:
                return []
            if approximate_above is not None and count > approximate_above:
                return self._search_ann(query, top_k)
            # BLAS gemv (releases the GIL): 4.8 ms p50 at 100k x 256 on an idle 2-core
            # machine against 11.8 ms for einsum's own loop; on a saturated machine its
            # thread hand-offs can cost more (OPENBLAS_NUM_THREADS=1 pins it to one core).
            scores = self.matrix[:count] @ query
            if self.dead:
                scores[list(self.dead)] = -np.inf
            k = min(top_k, count)
            picked = np.argpartition(-scores, k - 1)[:k] if k < count else np.arange(count)
            order = picked[np.lexsort((picked, -scores[picked]))]
            return [(int(i), float(scores[i])) for i in order if scores[i] != -np.inf]

    def _search_ann(self, query: Vector, top_k: int) -> list[tuple[int, float]]:
        np = _numpy()
        if self.ann is None:
            with needs("ann", feature="approximate vector search"):
                import hnswlib
            live = np.asarray([r for r in range(len(self.ids)) if r not in self.dead],
                              dtype=np.int64)
            index = hnswlib.Index(space="ip", dim=self.dimensions)
            index.init_index(max_elements=max(len(live), 1), ef_construction=200, M=16)
            if len(live):
                index.add_items(self.matrix[live], live)
            self.ann = index
        size = int(self.ann.get_current_count())
        k = min(top_k + len(self.dead), size)
        if k == 0:
            return []
        self.ann.set_ef(max(64, 2 * k))
        labels, distances = self.ann.knn_query(query, k=k)
        hits = [(int(key), 1.0 - float(distance))
                for key, distance in zip(labels[0], distances[0], strict=True)
                if int(key) not in self.dead]
        return hits[:top_k]


@final
class MessageIndex:
    """Indexes messages into a ``VectorStore`` and searches them, per scope.

    Args:
        store: Where messages and their vectors live.
        embedder: Turns texts into vectors.
        approximate: Search scopes larger than ``approximate_above`` with an HNSW
            index (needs ``procflow[ann]``); exact search otherwise.
        approximate_above: See ``approximate``.
        cache_embeddings: Keep embeddings in the store by content hash, so the same
            text is embedded once (default: unless the embedder says it is local, with
            a false ``cacheable`` attribute).
        catch_up_limit: At most this many unindexed messages are embedded during one
            search (the rest at the next one, or with ``reindex()``).
    """

    def __init__(self, store: VectorStore, embedder: Embedder, *, approximate: bool = False,
                 approximate_above: int = APPROXIMATE_ABOVE,
                 cache_embeddings: bool | None = None, catch_up_limit: int = 1000) -> None:
        if approximate:
            with needs("ann", feature="approximate vector search"):
                import hnswlib  # noqa: F401 - used on the first large search
                import numpy  # noqa: F401
        _numpy()
        self.store = store
        self.embedder = embedder
        self.name = embedder_name(embedder)
        self.approximate_above = approximate_above if approximate else None
        self.cache = (bool(getattr(embedder, "cacheable", True)) if cache_embeddings is None
                      else cache_embeddings)
        self.catch_up_limit = catch_up_limit
        self._scopes: dict[tuple[str, str], _Scope] = {}
        self._locks: dict[tuple[str, str], anyio.Lock] = {}
        self._dimensions: int | None = None

    def __repr__(self) -> str:
        return f"MessageIndex(store={self.store!r}, embedder={self.name!r})"

    def space(self, dimensions: int) -> str:
        """The embedding space of this embedder's vectors of ``dimensions`` values."""
        return f"{self.name}/{dimensions}"

    async def current_space(self) -> str:
        """The embedder's space: its size from the last embedding, else from its
        ``dimensions`` attribute, else from embedding one probe text (cached).

        Raises:
            APICallError: The embedder failed.
        """
        if self._dimensions is None:
            declared = getattr(self.embedder, "dimensions", None)
            if isinstance(declared, int) and not isinstance(declared, bool):
                self._dimensions = declared
            else:
                return self.space(int((await self.embed(["dimensions probe"])).shape[1]))
        return self.space(self._dimensions)

    # -- embedding -------------------------------------------------------------------

    async def embed(self, texts: Sequence[str]) -> Vector:
        """Unit float32 vectors of ``texts`` (one row each), through the cache.

        Raises:
            APICallError: The embedder failed.
        """
        np = _numpy()
        if not texts:
            return np.empty((0, 0), dtype=np.float32)  # type: ignore[no-any-return]
        if not self.cache:
            return await self._embed_all(list(texts))
        hashes = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
        found = await self.store.get_cached_embeddings(self.name, hashes)
        missing = list(dict.fromkeys(t for t, h in zip(texts, hashes, strict=True)
                                     if h not in found))
        if missing:
            fresh = await self._embed_all(missing)
            new = {hashlib.sha256(t.encode("utf-8")).hexdigest(): row.tobytes()
                   for t, row in zip(missing, fresh, strict=True)}
            await self.store.cache_embeddings(self.name, new)
            found.update(new)
        rows = [np.frombuffer(found[h], dtype=np.float32) for h in hashes]
        return self._sized(_unit(rows))

    async def _embed_all(self, texts: list[str]) -> Vector:
        rows: list[list[float]] = []
        for start in range(0, len(texts), _EMBED_BATCH):
            chunk = texts[start:start + _EMBED_BATCH]
            got = await self.embedder.embed(chunk)
            if len(got) != len(chunk):
                raise ValueError(f"embedder {self.name!r} returned {len(got)} vectors for "
                                 f"{len(chunk)} texts")
            rows += got
        return self._sized(_unit(rows))

    def _sized(self, vectors: Vector) -> Vector:
        self._dimensions = int(vectors.shape[1])
        return vectors

    # -- writing ---------------------------------------------------------------------

    async def index(self, messages: Sequence[Message], *, space: str | None = None) -> None:
        """Embed and store the vectors of ``messages`` (those with nothing to embed are
        recorded as such, so they are not offered again).

        Args:
            messages: The messages (with their thread and resource ids).
            space: The space to store them in (default: the embedder's, from the size
                of the vectors it returns).

        Raises:
            APICallError: The embedder failed; nothing was stored.
        """
        wanted = [(m, text) for m in messages if (text := indexable_text(m)) is not None]
        by_id: dict[str, bytes] = {}
        if wanted:
            vectors = await self.embed([text for _, text in wanted])
            space = self.space(int(vectors.shape[1]))
            by_id = {m.id: row.tobytes() for (m, _), row in zip(wanted, vectors, strict=True)}
        spaces = [space] if space is not None else self._known_spaces()
        for name in spaces:
            await self.store.save_vectors(name, [
                StoredVector(m.id, m.thread_id or "", m.resource_id, by_id.get(m.id))
                for m in messages])

    def _known_spaces(self) -> list[str]:
        return sorted({space for space, _ in self._scopes if space.startswith(self.name + "/")})

    def forget_checks(self, scopes: Sequence[str]) -> None:
        """Look for unindexed messages of these scopes again at their next search."""
        for (_, scope), cached in self._scopes.items():
            if scope in scopes:
                cached.checked = False

    async def catch_up(self, space: str, scope: str, *, limit: int | None = None) -> int:
        """Embed and store the scope's messages that have no vector in ``space``.

        Returns:
            How many messages were indexed.
        """
        done = 0
        while limit is None or done < limit:
            size = 256 if limit is None else min(256, limit - done)
            pending = await self.store.unindexed_messages(space, scope, limit=size)
            if not pending:
                break
            await self.index(pending, space=space)
            done += len(pending)
            if len(pending) < size:
                break
        return done

    # -- searching -------------------------------------------------------------------

    async def search(self, text: str, *, scope: str, top_k: int) -> list[VectorMatch]:
        """The ``top_k`` messages of ``scope`` most similar to ``text``, best first.

        Args:
            text: The query.
            scope: ``"thread:<id>"`` or ``"resource:<id>"``.
            top_k: How many.

        Raises:
            APICallError: The embedder failed.
        """
        query = (await self.embed([text]))[0]
        space = self.space(int(query.shape[0]))
        cached = await self._fresh(space, scope, int(query.shape[0]))
        hits = await anyio.to_thread.run_sync(cached.search, query, top_k,
                                              self.approximate_above)
        return [VectorMatch(id=cached.ids[row], score=score,
                            metadata={"thread_id": cached.threads[row]})
                for row, score in hits]

    async def _fresh(self, space: str, scope: str, dimensions: int) -> _Scope:
        key = (space, scope)
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            cached = self._scopes.get(key)
            if cached is None or cached.dimensions != dimensions:
                cached = self._scopes[key] = _Scope(dimensions)
            if not cached.checked:
                indexed = await self.catch_up(space, scope, limit=self.catch_up_limit)
                cached.checked = indexed < self.catch_up_limit
            version = await self.store.vector_version(space, scope)
            if version != cached.version:
                async for batch in self.store.load_vectors(space, scope,
                                                           after=cached.last_seq):
                    await anyio.to_thread.run_sync(cached.apply, batch)
                cached.version = version
            return cached
