"""The atomic-fact memory: one LanceDB table, one row per fact, searched as parent turns.

Search follows MERA: each query string retrieves top atomic facts over the *whole* memory
(never a graph neighbourhood); every matched fact is replaced by the record of all facts of its
parent turn, ranked by its best atomic score; results are merged across queries, deduplicated by
parent turn, and turns already viewed are excluded before ranking (prefilter), so a later round
always surfaces new turns.

Large memories get an approximate-nearest-neighbour index on the vector column (see
:class:`AnnSettings`): below its row threshold an exact scan is fast enough and exact; above it
the IVF index keeps per-query latency flat while recall@k stays measured against brute force
(``benchmarks/bench_retrieval.py``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from mera_pipelines.core.embedding import Embedder
from mera_pipelines.core.errors import ConfigError
from mera_pipelines.core.records import Fact

logger = logging.getLogger(__name__)

FACT_COLUMNS = [f for f in Fact.__dataclass_fields__]
# What a search reads per matched fact: enough to build the parent-turn record, and the vector
# for MMR. The score column is named explicitly (LanceDB stops auto-projecting it).
HIT_COLUMNS = [
    "fact_id",
    "turn_id",
    "memory_id",
    "text",
    "speaker",
    "timestamp",
    "turn_facts",
    "vector",
]


@dataclass(frozen=True)
class SearchSettings:
    """Retrieval settings shared by MERA and the baselines, so a gain is the loop's."""

    k: int = 8  # parent turns returned per query
    fact_fanout: int = 4  # facts fetched per wanted turn, before aggregation
    mmr_lambda: float | None = None  # e.g. 0.95 (paper); None disables MMR
    hybrid: bool = False  # add LanceDB native full-text search, fused by reciprocal rank
    rrf_k: int = 60
    # How turns found by several queries are ranked: "max" (best score of any query) or "rrf"
    # (reciprocal rank over the queries, which keeps one query's score scale from dominating).
    query_fusion: str = "max"

    @classmethod
    def from_params(cls, params: dict[str, Any] | None) -> SearchSettings:
        params = dict(params or {})
        unknown = set(params) - set(cls.__dataclass_fields__)
        if unknown:
            raise ConfigError(
                f"Unknown retrieval settings {sorted(unknown)}; known: "
                f"{sorted(cls.__dataclass_fields__)}"
            )
        settings = cls(**params)
        if settings.k < 1 or settings.fact_fanout < 1:
            raise ConfigError("retrieval.k and retrieval.fact_fanout must be >= 1")
        if settings.query_fusion not in ("max", "rrf"):
            raise ConfigError("retrieval.query_fusion must be 'max' or 'rrf'")
        if settings.mmr_lambda is not None and not 0.0 <= settings.mmr_lambda <= 1.0:
            raise ConfigError("retrieval.mmr_lambda must be in [0, 1] or null")
        return settings


# Largest memory searched exactly on an in-process copy of its vectors (1.5 KB a fact in RAM):
# one matrix product over 100k rows took 6 ms here, less than a LanceDB ANN query.
EXACT_SEARCH_MAX_ROWS = 250_000

ANN_INDEX_TYPES = ("IVF_PQ", "IVF_HNSW_SQ", "IVF_HNSW_PQ", "IVF_SQ", "IVF_RQ", "IVF_FLAT")


@dataclass(frozen=True)
class AnnSettings:
    """When to build an approximate index on the fact vectors, and how to search it.

    ``index``: "none" (always exact search, never build), "auto" (build ``auto_type`` once the
    table, and one memory in it, holds ``min_rows`` facts) or an index type such as "ivf_pq" /
    "ivf_hnsw_sq" (built at the same threshold). Search-time knobs: ``nprobes`` IVF partitions scanned, ``refine_factor``
    re-ranks ``limit * refine_factor`` candidates on the full vectors (recovers PQ's loss),
    ``ef`` for the HNSW variants. ``None`` leaves LanceDB's default.
    """

    index: str = "auto"
    # Rows one memory needs before the index is built and its searches may use it: a small
    # memory in a big shared table is searched exactly (its rows are found through the
    # memory_id index), since IVF partitions would scatter its few facts. The default is where
    # the in-process exact path stops: below it an index would be built and never searched.
    min_rows: int = EXACT_SEARCH_MAX_ROWS
    # Full vectors in the partitions: at 1M synthetic facts IVF_FLAT searched in 26-33 ms with
    # recall@8 0.96-0.99, where IVF_SQ took 92 ms for 0.966 and IVF_PQ capped at 0.84-0.86
    # (benchmarks/results/retrieval_sq_vs_flat.json, retrieval_1m_index_types.json).
    # Its cost: the index holds a second copy of the vectors (1.5 KB a fact on disk).
    auto_type: str = "IVF_FLAT"
    num_partitions: int | None = None  # None: about sqrt(rows)
    num_sub_vectors: int | None = None  # IVF_PQ / IVF_HNSW_PQ; None: dim / 8
    nprobes: int | None = 32
    refine_factor: int | None = 1  # exact re-rank of the returned candidates only
    ef: int | None = None

    @classmethod
    def from_params(cls, params: dict[str, Any] | str | None) -> AnnSettings:
        if params is None:
            return cls()
        if isinstance(params, str):  # the short form `memory.ann_index: none`
            params = {"index": params}
        params = dict(params)
        unknown = set(params) - set(cls.__dataclass_fields__)
        if unknown:
            raise ConfigError(
                f"Unknown memory.ann_index settings {sorted(unknown)}; known: "
                f"{sorted(cls.__dataclass_fields__)}"
            )
        settings = cls(**params)
        if settings.index.lower() not in ("auto", "none") and settings.index_type is None:
            raise ConfigError(
                f"memory.ann_index.index must be auto, none or one of {list(ANN_INDEX_TYPES)} "
                f"(any case), not {settings.index!r}"
            )
        if settings.auto_type.upper() not in ANN_INDEX_TYPES:
            raise ConfigError(f"memory.ann_index.auto_type must be one of {list(ANN_INDEX_TYPES)}")
        if settings.min_rows < 1:
            raise ConfigError("memory.ann_index.min_rows must be >= 1")
        return settings

    @property
    def enabled(self) -> bool:
        return self.index.lower() != "none"

    @property
    def index_type(self) -> str | None:
        """The LanceDB index type this setting builds (None when disabled)."""
        wanted = self.index.upper()
        if wanted == "NONE":
            return None
        if wanted == "AUTO":
            return self.auto_type.upper()
        return wanted if wanted in ANN_INDEX_TYPES else None


@dataclass
class TurnCandidate:
    """A parent turn as retrieval returns it: all facts of the turn, ranked by its best fact."""

    memory_id: str
    turn_id: str
    speaker: str
    timestamp: str | None
    facts: list[str]
    score: float
    matched_facts: list[str] = field(default_factory=list)
    query_indices: list[int] = field(default_factory=list)

    def render(self) -> str:
        when = self.timestamp or "unknown time"
        return f"[{self.turn_id}] ({when}, {self.speaker}) " + " ".join(self.facts)


@dataclass
class UpsertStats:
    memories_written: int = 0
    memories_unchanged: int = 0
    facts_written: int = 0
    embed_seconds: float = 0.0
    write_seconds: float = 0.0

    @property
    def facts_per_second(self) -> float:
        total = self.embed_seconds + self.write_seconds
        return self.facts_written / total if total > 0 else 0.0

    def as_dict(self) -> dict[str, float]:
        return {**vars(self), "facts_per_second": self.facts_per_second}


def search_text(text: str, keywords: Sequence[str], topics: Sequence[str]) -> str:
    """What gets embedded and full-text indexed: the fact with its keywords and topics."""
    parts = [text]
    if len(keywords):
        parts.append("keywords: " + ", ".join(keywords))
    if len(topics):
        parts.append("topics: " + ", ".join(topics))
    return " | ".join(parts)


def embed_unique(embedder: Embedder, texts: list[str], *, progress: bool = False) -> np.ndarray:
    """Embed each distinct text once: memories that share sessions (LongMemEval-S haystacks
    draw from one pool) repeat the same facts, and re-embedding them would dominate the build."""
    unique, inverse = np.unique(np.asarray(texts, dtype=object), return_inverse=True)
    if len(unique) == len(texts):
        return embedder.embed(texts, progress=progress)
    vectors = embedder.embed(unique.tolist(), progress=progress)
    return vectors[inverse.reshape(-1)]


def sql_string(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


class MemoryIndex:
    """Handle on the fact table: add / search / delete / describe / close."""

    def __init__(
        self,
        uri: str,
        table_name: str,
        embedder: Embedder,
        ann: AnnSettings | None = None,
        exact_cache_rows: int = EXACT_SEARCH_MAX_ROWS,
        storage_options: dict[str, str] | None = None,
    ) -> None:
        import lancedb

        self.uri = uri
        self.table_name = table_name
        self.embedder = embedder
        self.ann = ann or AnnSettings()
        # Exact search of a memory up to this many rows runs on an in-process copy of its
        # vectors (one matrix product) instead of a LanceDB query, whose fixed cost (~7 ms)
        # dominated the loop; larger memories use the ANN index (see search_path). Same
        # ranking as LanceDB's scan; 0 always queries LanceDB.
        self.exact_cache_rows = exact_cache_rows
        self._exact_cache = _MemoryVectorCache(max_rows=4 * exact_cache_rows)
        # uri may be a folder or an object store (s3://, gs://, az://); storage_options carry
        # its region / endpoint / credentials (LanceDB also reads the usual AWS_* variables).
        self._db = lancedb.connect(uri, storage_options=storage_options)
        self._table = self._open_table()
        self._fts_ready = False
        self._ann_type: str | None = None
        self._memory_rows: dict[str, int] = {}  # per-memory row counts, reset on every write
        self._has_memory_id_index = False
        if self._table is not None:
            self._check_embedder()
            self._read_index_state()

    # ----------------------------------------------------------------- writing
    def upsert_facts(self, facts: pd.DataFrame, *, progress: bool = False) -> UpsertStats:
        """Write the facts of each memory in ``facts``, replacing that memory's old rows.

        A memory whose facts (and embedder) are unchanged is skipped: rebuilding costs nothing
        and never duplicates rows.
        """
        missing = [c for c in FACT_COLUMNS if c not in facts.columns]
        if missing:
            raise ConfigError(f"Facts table lacks columns {missing}")
        stats = UpsertStats()
        if facts.empty:
            return stats
        frame = facts.copy()
        frame["search_text"] = [
            search_text(t, k, p)
            for t, k, p in zip(frame["text"], frame["keywords"], frame["topics"], strict=True)
        ]
        hashes = {
            memory_id: self._memory_hash(group)
            for memory_id, group in frame.groupby("memory_id", sort=False)
        }
        existing = self._stored_hashes()
        changed = [m for m, h in hashes.items() if existing.get(m) != h]
        stats.memories_unchanged = len(hashes) - len(changed)
        if not changed:
            return stats
        frame = frame[frame["memory_id"].isin(changed)].reset_index(drop=True)
        frame["memory_hash"] = frame["memory_id"].map(hashes)
        frame["embedder"] = self.embedder.name

        started = time.perf_counter()
        vectors = embed_unique(self.embedder, frame["search_text"].tolist(), progress=progress)
        stats.embed_seconds = time.perf_counter() - started

        started = time.perf_counter()
        table = self._arrow_table(frame, vectors)
        if self._table is None:
            self._table = self._db.create_table(self.table_name, table)
        else:
            self._delete_where(f"memory_id IN ({', '.join(sql_string(m) for m in changed)})")
            self._table.add(table)
        self._after_write()
        stats.write_seconds = time.perf_counter() - started
        stats.memories_written = len(changed)
        stats.facts_written = len(frame)
        return stats

    def delete_memory(self, memory_id: str) -> int:
        return self._delete_and_compact(f"memory_id = {sql_string(memory_id)}")

    def delete_turn(self, memory_id: str, turn_id: str) -> int:
        return self._delete_and_compact(
            f"memory_id = {sql_string(memory_id)} AND turn_id = {sql_string(turn_id)}"
        )

    def compact(self) -> None:
        """Merge small fragments and drop old table versions (every add makes a version)."""
        if self._table is None:
            return
        with warnings.catch_warnings():
            # Dropping every old version is safe here: the pipeline is the table's only writer
            # and readers open the latest version.
            warnings.filterwarnings("ignore", message=r"optimize\(cleanup_older_than=0\)")
            self._table.optimize(cleanup_older_than=timedelta(0))

    # ----------------------------------------------------------------- reading
    def memory_ids(self) -> list[str]:
        if self._table is None:
            return []
        return sorted(set(self._scan(["memory_id"])["memory_id"].to_pylist()))

    def require_memories(self, memory_ids: Iterable[str]) -> None:
        """A clear error for memories with no facts in the table: their searches would find
        nothing, and the recall would read as the planner's failure."""
        built = set(self.memory_ids())
        missing = sorted(set(memory_ids) - built)
        if missing:
            raise ConfigError(
                f"The memory table '{self.table_name}' at {self.uri} has no facts for memories "
                f"{missing[:10]}{' ...' if len(missing) > 10 else ''} ({len(built)} memories "
                "built); build them from the same source first (kedro run --pipeline=memory)"
            )

    def count(self, memory_id: str | None = None) -> int:
        if self._table is None:
            return 0
        if memory_id is None:
            return self._table.count_rows()
        return self._table.count_rows(f"memory_id = {sql_string(memory_id)}")

    def describe(self) -> dict[str, Any]:
        return {
            "uri": self.uri,
            "table": self.table_name,
            "embedder": self.embedder.name,
            "dim": self.embedder.dim,
            "facts": self.count(),
            "memories": len(self.memory_ids()),
            "versions": len(self._table.list_versions()) if self._table is not None else 0,
            "full_text_index": self._fts_ready,
            "ann_index": self._ann_type,
            "ann_settings": vars(self.ann),
        }

    @property
    def has_ann_index(self) -> bool:
        return self._ann_type is not None

    def build_ann_index(self, index_type: str | None = None) -> str | None:
        """Build (or rebuild) the approximate index on the vector column; returns its type.

        Uses ``index_type`` or the configured one. Needs a few hundred rows to train the IVF
        centroids (LanceDB's minimum); the index covers rows present now, and later writes are
        folded in by :meth:`compact` (``optimize``) without retraining.
        """
        if self._table is None:
            return None
        kind = (index_type or self.ann.index_type or self.ann.auto_type).upper()
        if kind not in ANN_INDEX_TYPES:
            raise ConfigError(f"Unknown ANN index type {kind!r}; known: {list(ANN_INDEX_TYPES)}")
        rows = self._table.count_rows()
        options: dict[str, Any] = {
            "metric": "cosine",
            "vector_column_name": "vector",
            "index_type": kind,
            "num_partitions": self.ann.num_partitions or max(1, int(round(rows**0.5))),
            "replace": True,
        }
        if "PQ" in kind:
            options["num_sub_vectors"] = self.ann.num_sub_vectors or _sub_vectors(self.embedder.dim)
        started = time.perf_counter()
        self._table.create_index(**options)
        logger.info(
            "Built %s index over %d facts in %.1f s", kind, rows, time.perf_counter() - started
        )
        self._read_index_state()
        self.compact()  # drop the version the index build made
        return self._ann_type

    def search(
        self,
        queries: Sequence[str],
        memory_id: str,
        settings: SearchSettings = SearchSettings(),
        exclude_turn_ids: Iterable[str] = (),
    ) -> list[TurnCandidate]:
        """Top parent turns for all queries, merged, deduplicated, viewed turns excluded."""
        per_query = self.search_per_query(queries, memory_id, settings, exclude_turn_ids)
        if settings.query_fusion == "rrf":
            return merge_candidates_rrf(per_query, settings.rrf_k)
        return merge_candidates(per_query)

    def search_per_query(
        self,
        queries: Sequence[str],
        memory_id: str,
        settings: SearchSettings = SearchSettings(),
        exclude_turn_ids: Iterable[str] = (),
    ) -> list[list[TurnCandidate]]:
        queries = [q for q in queries if q and q.strip()]
        if not queries or self._table is None:
            return [[] for _ in queries]
        vectors = self.embedder.embed(list(queries))
        return self._search_embedded(queries, vectors, memory_id, settings, exclude_turn_ids)

    def search_vectors(
        self,
        vectors: np.ndarray,
        memory_id: str,
        settings: SearchSettings = SearchSettings(),
        exclude_turn_ids: Iterable[str] = (),
    ) -> list[list[TurnCandidate]]:
        """Dense search from query vectors already embedded (one row per query), per query."""
        if settings.hybrid:
            raise ConfigError("Hybrid search needs the query text: use search_per_query")
        vectors = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
        if self._table is None or not len(vectors):
            return [[] for _ in vectors]
        return self._search_embedded(
            [""] * len(vectors), vectors, memory_id, settings, exclude_turn_ids
        )

    def _search_embedded(
        self,
        queries: Sequence[str],
        vectors: np.ndarray,
        memory_id: str,
        settings: SearchSettings,
        exclude_turn_ids: Iterable[str],
    ) -> list[list[TurnCandidate]]:
        n_facts = settings.k * settings.fact_fanout
        path = self.search_path(memory_id)
        in_process = path == "in_process"
        where = (
            None if in_process and not settings.hybrid else self._where(memory_id, exclude_turn_ids)
        )
        if in_process:
            dense = self._cached_dense_hits(vectors, memory_id, exclude_turn_ids, n_facts)
        else:
            dense = self._dense_hits(vectors, where, n_facts, approximate=path == "ann")
        results = []
        for index, query in enumerate(queries):
            hits = dense.get(index, [])
            if settings.hybrid:
                hits = reciprocal_rank_fusion(
                    [hits, self._fulltext_hits(query, where, n_facts)], settings.rrf_k
                )
            turns = aggregate_to_turns(hits, index)
            if settings.mmr_lambda is not None:
                turns = mmr_select(turns, settings.mmr_lambda, settings.k)
            results.append([candidate for candidate, _ in turns[: settings.k]])
        return results

    def search_path(self, memory_id: str) -> str:
        """How dense search reaches this memory: "in_process" (exact, on a cached copy of its
        vectors), "ann" (the LanceDB index) or "scan" (LanceDB's exact scan).

        A memory that fits the cache is searched exactly even when an ANN index exists: one
        matrix product over 100k rows took 7 ms here where LanceDB's IVF_SQ query took 15 and
        IVF_FLAT 27 (benchmarks/bench_retrieval.py), and exact search loses no recall."""
        if self._fits_exact_cache(memory_id):
            return "in_process"
        return "ann" if self._use_ann(memory_id) else "scan"

    def close(self) -> None:
        self._table = None
        self._db = None

    # --------------------------------------------------------------- internals
    def _open_table(self):
        try:
            return self._db.open_table(self.table_name)
        except (FileNotFoundError, ValueError):
            return None

    def _scan(self, columns: list[str]) -> pa.Table:
        """Read a few columns of every row (no vectors), without needing the lance package."""
        return self._table.search().select(columns).limit(self._table.count_rows()).to_arrow()

    def _check_embedder(self) -> None:
        row = self._table.search().select(["embedder"]).limit(1).to_list()
        if row and row[0]["embedder"] != self.embedder.name:
            raise ConfigError(
                f"The memory table '{self.table_name}' at {self.uri} was embedded with "
                f"'{row[0]['embedder']}', but the configured embedder is '{self.embedder.name}'. "
                "Rebuild the memory (delete the table folder) or configure the same embedder."
            )

    def _memory_hash(self, group: pd.DataFrame) -> str:
        digest = hashlib.sha256(self.embedder.name.encode())
        ordered = group.sort_values("fact_id")
        for row in ordered[["fact_id", "search_text", "speaker", "timestamp"]].itertuples(
            index=False
        ):
            digest.update(json.dumps(list(row), default=str).encode())
        for facts in ordered["turn_facts"]:
            digest.update(json.dumps(list(facts)).encode())
        return digest.hexdigest()

    def _stored_hashes(self) -> dict[str, str]:
        if self._table is None:
            return {}
        table = self._scan(["memory_id", "memory_hash"])
        return dict(
            zip(table["memory_id"].to_pylist(), table["memory_hash"].to_pylist(), strict=True)
        )

    def _arrow_table(self, frame: pd.DataFrame, vectors: np.ndarray) -> pa.Table:
        dim = vectors.shape[1] if vectors.ndim == 2 else self.embedder.dim
        strings = [
            "fact_id",
            "memory_id",
            "turn_id",
            "text",
            "speaker",
            "timestamp",
            "source_text",
            "search_text",
            "memory_hash",
            "embedder",
        ]
        lists = ["keywords", "topics", "turn_facts"]
        columns: dict[str, pa.Array] = {}
        for name in strings:
            columns[name] = pa.array(
                [None if v is None else str(v) for v in frame[name]], type=pa.string()
            )
        for name in lists:
            columns[name] = pa.array([list(v) for v in frame[name]], type=pa.list_(pa.string()))
        flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).ravel())
        columns["vector"] = pa.FixedSizeListArray.from_arrays(flat, dim)
        return pa.table(columns)

    def _read_index_state(self) -> None:
        indices = list(self._table.list_indices())
        self._fts_ready = any("search_text" in idx.columns for idx in indices)
        self._has_memory_id_index = any(idx.columns == ["memory_id"] for idx in indices)
        self._ann_type = next(
            (_ann_type_name(idx.index_type) for idx in indices if "vector" in idx.columns), None
        )

    def _after_write(self) -> None:
        # Native full-text index (no tantivy), rebuilt after each write so hybrid search sees
        # every fact; then compact, which also drops the versions the write and index made
        # and folds new rows into an existing ANN index.
        from lancedb.index import FTS

        self._table.create_index("search_text", config=FTS(), replace=True)
        self._fts_ready = True
        if not self._has_memory_id_index:
            # Every search prefilters on memory_id: a B-tree finds a memory's rows without
            # scanning the column of a large shared table. compact() keeps it up to date.
            from lancedb.index import BTree

            self._table.create_index("memory_id", config=BTree(), replace=True)
            self._has_memory_id_index = True
        self._memory_rows.clear()
        self._exact_cache.clear()
        self.compact()
        if self.ann.enabled and not self.has_ann_index and self._largest_memory_reaches_min_rows():
            self.build_ann_index()

    def _delete_where(self, predicate: str) -> int:
        before = self._table.count_rows()
        self._table.delete(predicate)
        return before - self._table.count_rows()

    def _delete_and_compact(self, predicate: str) -> int:
        if self._table is None:
            return 0
        removed = self._delete_where(predicate)
        if removed:
            self._after_write()
        return removed

    def _where(self, memory_id: str, exclude_turn_ids: Iterable[str]) -> str | None:
        """The prefilter of a search in LanceDB (None: no filter).

        The memory_id clause is left out when the memory is the whole table (one long history
        per table): LanceDB would otherwise build an allow-list of every row first, which
        doubles the latency of an ANN search (12.4 vs 6.4 ms at 200k facts, IVF_SQ)."""
        clauses = []
        if self._memory_size(memory_id) < self._table_rows():
            clauses.append(f"memory_id = {sql_string(memory_id)}")
        excluded = sorted(set(exclude_turn_ids))
        if excluded:
            clauses.append(f"turn_id NOT IN ({', '.join(sql_string(t) for t in excluded)})")
        return " AND ".join(clauses) or None

    def _largest_memory_reaches_min_rows(self) -> bool:
        """Only a memory of ``min_rows`` facts is searched through the index, so a table of
        many small memories (500 LongMemEval haystacks) is not worth an index build."""
        if self._table.count_rows() < self.ann.min_rows:
            return False
        counts = pa.compute.value_counts(self._scan(["memory_id"])["memory_id"])
        return max(counts.field("counts").to_pylist()) >= self.ann.min_rows

    def _table_rows(self) -> int:
        if "" not in self._memory_rows:  # "" is never a memory id: the table's row count
            self._memory_rows[""] = self._table.count_rows()
        return self._memory_rows[""]

    def _fits_exact_cache(self, memory_id: str) -> bool:
        # A table no larger than the cache limit needs no per-memory count (one query less
        # on the first search of each memory).
        if self._table_rows() <= self.exact_cache_rows:
            return True
        return self._memory_size(memory_id) <= self.exact_cache_rows

    def _memory_size(self, memory_id: str) -> int:
        if memory_id not in self._memory_rows:
            self._memory_rows[memory_id] = self.count(memory_id)
        return self._memory_rows[memory_id]

    def _use_ann(self, memory_id: str) -> bool:
        if not (self.ann.enabled and self.has_ann_index):
            return False
        return self._memory_size(memory_id) >= self.ann.min_rows

    def _cached_dense_hits(
        self, vectors: np.ndarray, memory_id: str, exclude_turn_ids: Iterable[str], n_facts: int
    ) -> dict[int, list[dict]]:
        """Exact cosine top-n over the memory's cached rows, ranked as LanceDB ranks them
        (score descending, then row order), with viewed turns excluded before ranking."""
        rows = self._exact_cache.get(memory_id)
        if rows is None:
            rows = self._exact_cache.put(memory_id, self._read_memory_rows(memory_id))
        if not rows.num_rows:
            return {}
        excluded = [rows.turn_code[t] for t in set(exclude_turn_ids) if t in rows.turn_code]
        allowed = ~np.isin(rows.turn_codes, excluded) if excluded else None
        n = min(n_facts, rows.num_rows if allowed is None else int(allowed.sum()))
        if n == 0:
            return {}
        queries = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
        norms = np.linalg.norm(queries, axis=1, keepdims=True)
        with _blas_threads_for(rows.num_rows):
            scores = (queries / np.where(norms == 0, 1, norms)) @ rows.vectors.T
        if allowed is not None:
            scores[:, ~allowed] = -np.inf  # excluded before ranking, like the prefilter
        by_query: dict[int, list[dict]] = {}
        for query_index, query_scores in enumerate(scores):
            top = np.argpartition(-query_scores, n - 1)[:n]
            top = top[np.lexsort((top, -query_scores[top]))]
            hits = rows.table.take(pa.array(top)).to_pylist()  # no vector column: see below
            for row, row_index, score in zip(hits, top, query_scores[top], strict=True):
                row["score"] = float(score)
                row["vector"] = rows.vectors[row_index]  # for MMR; skips 384 Python floats
            by_query[query_index] = hits
        return by_query

    def _read_memory_rows(self, memory_id: str) -> _MemoryRows:
        table = (
            self._table.search()
            .where(f"memory_id = {sql_string(memory_id)}")
            .select(HIT_COLUMNS)
            .limit(max(1, self._memory_rows.get(memory_id) or self._table_rows()))
            .to_arrow()
        )
        vectors = table["vector"].combine_chunks()
        dim = vectors.type.list_size
        matrix = np.asarray(vectors.flatten().to_numpy(zero_copy_only=False), dtype=np.float32)
        matrix = matrix.reshape(-1, dim)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)  # cosine, as LanceDB computes it
        matrix = matrix / np.where(norms == 0, 1, norms)
        turn_ids = table["turn_id"].to_pylist()
        turn_code = {turn_id: code for code, turn_id in enumerate(dict.fromkeys(turn_ids))}
        turn_codes = np.fromiter((turn_code[t] for t in turn_ids), dtype=np.int64)
        return _MemoryRows(
            # One chunk: take() on a table of ~100 record batches cost 4 ms per query at 100k.
            table=table.drop_columns(["vector"]).combine_chunks(),
            vectors=matrix,
            turn_codes=turn_codes,
            turn_code=turn_code,
        )

    def _dense_hits(
        self, vectors: np.ndarray, where: str | None, n_facts: int, approximate: bool = False
    ) -> dict[int, list[dict]]:
        query = (
            self._table.search(list(vectors) if len(vectors) > 1 else vectors[0])
            .distance_type("cosine")
            .select([*HIT_COLUMNS, "_distance"])
            .limit(n_facts)
        )
        if where:
            query = query.where(where, prefilter=True)
        if not approximate:
            query = query.bypass_vector_index()
        else:
            if self.ann.nprobes:
                query = query.nprobes(self.ann.nprobes)
            if self.ann.refine_factor:
                query = query.refine_factor(self.ann.refine_factor)
            if self.ann.ef and "HNSW" in (self._ann_type or ""):
                query = query.ef(self.ann.ef)
        rows = query.to_list()
        by_query: dict[int, list[dict]] = {}
        for row in rows:
            row["score"] = 1.0 - float(row.pop("_distance"))
            by_query.setdefault(int(row.pop("query_index", 0)), []).append(row)
        for hits in by_query.values():
            hits.sort(key=lambda r: -r["score"])
        return by_query

    def _fulltext_hits(self, query: str, where: str | None, n_facts: int) -> list[dict]:
        if not self._fts_ready:
            return []
        search = self._table.search(query, query_type="fts")
        if where:
            search = search.where(where, prefilter=True)
        rows = search.select([*HIT_COLUMNS, "_score"]).limit(n_facts).to_list()
        for row in rows:
            row["score"] = float(row.pop("_score", 0.0))
        return rows

    # ---------------------------------------------------------- forgetting (issue 5)
    def purge(self, memory_id: str, turn_id: str | None = None) -> int:
        """Forget a memory (or one of its turns) so that no byte of its facts stays on disk.

        A delete only marks rows as deleted (their bytes stay in the data files until a
        compaction happens to rewrite them); here the remaining rows are rewritten into new
        files and every older version, with its files, is removed. Returns the rows removed.
        """
        if self._table is None:
            return 0
        import pyarrow.compute as pc

        rows = self._table.to_arrow()
        forgotten = pc.equal(rows["memory_id"], memory_id)
        if turn_id is not None:
            forgotten = pc.and_(forgotten, pc.equal(rows["turn_id"], turn_id))
        forgotten = pc.fill_null(forgotten, False)
        removed = int(pc.sum(forgotten).as_py() or 0)
        if removed == 0:
            return 0
        self._table.add(rows.filter(pc.invert(forgotten)), mode="overwrite")
        self._after_write()  # new full-text index; old versions and their files dropped
        return removed

    def version_count(self) -> int:
        """How many versions of the table are kept on disk (1 after a compaction)."""
        return 0 if self._table is None else len(self._table.list_versions())


@functools.lru_cache(maxsize=1)
def _blas_controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


# Rows from which a query-by-memory product uses all BLAS threads. The product is
# memory-bound: below this, BLAS threads mostly add synchronisation, which cost ~4x on a busy
# machine (10k x 384: 9.7 ms threaded vs 2.3 single); above it, a second core halves it
# (100k x 384: 5.8 vs 11.4 ms, 250k: 17.5 vs 35.9 on an idle 2-core machine).
THREADED_PRODUCT_ROWS = 50_000


def _blas_threads_for(rows: int):
    if rows >= THREADED_PRODUCT_ROWS:
        return contextlib.nullcontext()
    return _blas_controller().limit(limits=1, user_api="blas")


@dataclass
class _MemoryRows:
    """One memory's rows as search reads them, and its unit vectors as one matrix."""

    table: pa.Table
    vectors: np.ndarray
    turn_codes: np.ndarray  # one int per row: its turn, for fast exclusion masks
    turn_code: dict[str, int]

    @property
    def num_rows(self) -> int:
        return self.table.num_rows


class _MemoryVectorCache:
    """Least-recently-used memories, bounded by their total rows (vectors are 1.5 KB a row)."""

    def __init__(self, max_rows: int) -> None:
        self.max_rows = max_rows
        self._items: OrderedDict[str, _MemoryRows] = OrderedDict()
        self._lock = threading.Lock()  # evaluation may search from a thread pool

    def get(self, memory_id: str) -> _MemoryRows | None:
        with self._lock:
            rows = self._items.get(memory_id)
            if rows is not None:
                self._items.move_to_end(memory_id)
            return rows

    def put(self, memory_id: str, rows: _MemoryRows) -> _MemoryRows:
        with self._lock:
            self._items[memory_id] = rows
            while len(self._items) > 1 and self._total() > self.max_rows:
                self._items.popitem(last=False)
            return rows

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def _total(self) -> int:
        return sum(rows.num_rows for rows in self._items.values())


def _ann_type_name(reported: Any) -> str:
    """LanceDB lists an index as e.g. ``IvfPq``; name it as create_index spells it (IVF_PQ)."""
    by_letters = {kind.replace("_", ""): kind for kind in ANN_INDEX_TYPES}
    letters = str(reported).upper().replace("_", "")
    return by_letters.get(letters, str(reported))


def _sub_vectors(dim: int) -> int:
    """PQ sub-vectors: 8 dimensions each (finer than LanceDB's dim/16 default, for recall)."""
    for size in (8, 16, 4, 2, 1):
        if dim % size == 0:
            return dim // size
    return 1


def reciprocal_rank_fusion(rankings: list[list[dict]], rrf_k: int = 60) -> list[dict]:
    """Fuse ranked fact lists by 1/(rrf_k + rank); the fused score replaces ``score``."""
    fused: dict[str, dict] = {}
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, row in enumerate(ranking):
            key = row["fact_id"]
            fused.setdefault(key, row)
            scores[key] = scores.get(key, 0.0) + 1.0 / (rrf_k + rank + 1)
    out = []
    for key, row in fused.items():
        out.append({**row, "score": scores[key]})
    out.sort(key=lambda r: -r["score"])
    return out


def aggregate_to_turns(hits: list[dict], query_index: int) -> list[tuple[TurnCandidate, Any]]:
    """Fact hits -> parent turns ranked by their best fact (keeping that fact's vector for MMR)."""
    turns: dict[str, tuple[TurnCandidate, Any]] = {}
    for row in hits:  # hits arrive best first
        key = row["turn_id"]
        if key not in turns:
            candidate = TurnCandidate(
                memory_id=row["memory_id"],
                turn_id=key,
                speaker=row["speaker"],
                timestamp=row["timestamp"],
                facts=list(row["turn_facts"]),
                score=float(row["score"]),
                query_indices=[query_index],
            )
            turns[key] = (candidate, row.get("vector"))
        turns[key][0].matched_facts.append(row["text"])
    return sorted(turns.values(), key=lambda item: -item[0].score)


def mmr_select(
    turns: list[tuple[TurnCandidate, Any]], lambda_: float, k: int
) -> list[tuple[TurnCandidate, Any]]:
    """Maximal marginal relevance over candidate turns, using each turn's best-fact vector."""
    if len(turns) <= 1:
        return turns
    vectors = np.asarray([np.asarray(v, dtype=np.float32) for _, v in turns])
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = vectors / np.where(norms == 0, 1, norms)
    relevance = np.asarray([c.score for c, _ in turns])
    selected: list[int] = []
    remaining = list(range(len(turns)))
    while remaining and len(selected) < k:
        if selected:
            redundancy = (vectors[remaining] @ vectors[selected].T).max(axis=1)
        else:
            redundancy = np.zeros(len(remaining))
        marginal = lambda_ * relevance[remaining] - (1 - lambda_) * redundancy
        best = remaining[int(np.argmax(marginal))]
        selected.append(best)
        remaining.remove(best)
    return [turns[i] for i in selected]


def merge_candidates(per_query: list[list[TurnCandidate]]) -> list[TurnCandidate]:
    """Merge per-query turn lists: dedup by turn, keep the best score, remember every query."""
    merged: dict[str, TurnCandidate] = {}
    for candidates in per_query:
        for candidate in candidates:
            known = merged.get(candidate.turn_id)
            if known is None:
                merged[candidate.turn_id] = TurnCandidate(**{**vars(candidate)})
                continue
            known.query_indices = sorted(set(known.query_indices + candidate.query_indices))
            known.matched_facts = list(dict.fromkeys(known.matched_facts + candidate.matched_facts))
            known.score = max(known.score, candidate.score)
    return sorted(merged.values(), key=lambda c: -c.score)


def merge_candidates_rrf(
    per_query: list[list[TurnCandidate]], rrf_k: int = 60
) -> list[TurnCandidate]:
    """Merge per-query turn lists by reciprocal rank; ties keep the earlier query's order."""
    fused: dict[str, float] = {}
    for candidates in per_query:
        for rank, candidate in enumerate(candidates):
            fused[candidate.turn_id] = fused.get(candidate.turn_id, 0.0) + 1.0 / (rrf_k + rank + 1)
    merged = {c.turn_id: c for c in merge_candidates(per_query)}
    for turn_id, score in fused.items():
        merged[turn_id].score = score
    return sorted(merged.values(), key=lambda c: -c.score)
