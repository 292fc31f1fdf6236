"""Querying a loaded index version: filters, the BM25 and vector legs, and their fusion by RRF.

Unlike the original system, the similarity threshold applies to the vector leg, the vector leg is a nearest
neighbour search over every row that passes the filters (exact below `HNSW_MIN_ROWS` rows per type or when the
filters admit few rows, an HNSW graph walk restricted to the admitted rows above), and documents and queries share
one text normalisation.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from reflexio_pipelines.learning.embedding import Embedder
from reflexio_pipelines.search.shards import ShardSelector
from reflexio_pipelines.search.tables import Table, empty_table, load_table, read_docs
from reflexio_pipelines.search.text import analyse_query, content_terms
from reflexio_pipelines.search.types import (
    ENTITY_TYPES,
    SEARCH_MODES,
    IndexCorrupt,
    IndexModelMismatch,
    SearchFilters,
    SearchHit,
    SearchMode,
)
from reflexio_pipelines.search.versions import resolve_version_dir, version_segments
from reflexio_pipelines.storage import LakePath

_READABLE_FORMATS = (1, 2)  # formats `LoadedIndex.load` opens; `build.FORMAT_VERSION` is the one written
#: Each leg contributes top_k * 5 candidates to the fusion (the landing-file fallback too, serving/recent_ranking.py).
CANDIDATES_PER_RESULT = 5
# When at most this many rows are inadmissible, the BM25 leg fetches that many extra hits and drops them itself
# instead of pushing the filters into tantivy, where every clause costs a posting-list walk per query.
_POSTFILTER_MAX_ROWS = 256


@dataclass(frozen=True)
class _Selection:
    """The rows a query may return, and which filter clauses actually exclude something."""

    mask: np.ndarray  # bool per row
    admitted: int  # mask.sum()
    clauses: frozenset[str]  # names of the filters that exclude at least one row (the others are skipped)
    excluded_ids: int  # rows of this table named in exclude_ids
    now: int  # the instant expiry was judged at, shared by the mask and the BM25 pushdown


def _top_rows(rows: np.ndarray, keys: np.ndarray, id_rank: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """The `limit` rows with the highest keys and their keys, ties broken by doc_id ascending; deterministic."""
    if len(rows) > limit:
        # Partition first so only candidates at or above the limit-th key are sorted; >= keeps boundary ties.
        kth = np.partition(keys, len(keys) - limit)[len(keys) - limit]
        keep = keys >= kth
        rows, keys = rows[keep], keys[keep]
    order = np.lexsort((id_rank[rows], -keys))[:limit]
    return rows[order], keys[order]


class LoadedIndex:
    """A published index version opened read-only; `search` is safe to call from many threads at once."""

    def __init__(self, version_dir: Path, manifest: dict[str, Any], tables: dict[str, Table]) -> None:
        self.path = version_dir
        self.manifest = manifest
        self.version: str = manifest["version"]
        self.embedder_model_id: str = manifest["embedder"]["model_id"]
        self.dim: int = int(manifest["embedder"]["dim"])
        self._tables = tables
        self.shards: ShardSelector | None = None  # the shards loaded; None = the whole version

    @classmethod
    def load(
        cls,
        index_root: LakePath,
        version: str | None = None,
        *,
        verify: bool = True,
        shards: ShardSelector | None = None,
    ) -> LoadedIndex:
        """Open `version` under `index_root` (None = the one CURRENT points at). With `verify`, vector files
        are checked against the manifest's sha256. With `shards`, only those shards' users' documents are loaded
        (and shared ones); searches for them answer as the whole version does (`search.shards`)."""
        version_dir = resolve_version_dir(index_root, version)
        manifest = json.loads((version_dir / "manifest.json").read_text())
        if manifest.get("format_version") not in _READABLE_FORMATS:
            raise IndexCorrupt(
                f"{version_dir}: format_version {manifest.get('format_version')}, need one of {_READABLE_FORMATS}"
            )
        dim = int(manifest["embedder"]["dim"])
        columns = read_docs([segment.docs for segment in version_segments(version_dir, manifest)], shards)
        tables = {
            t: load_table(version_dir, t, columns[t], dim, verify, manifest, shards)
            if t in manifest["counts"]
            else empty_table(t, dim)
            for t in ENTITY_TYPES
        }
        index = cls(version_dir, manifest, tables)
        index.shards = shards
        return index

    def __repr__(self) -> str:
        counts = ", ".join(f"{t}={self.count(t)}" for t in ENTITY_TYPES)
        return f"LoadedIndex(version={self.version!r}, model={self.embedder_model_id!r}, {counts})"

    def count(self, entity_type: str) -> int:
        """Number of docs of `entity_type` in this version (before any filtering)."""
        return self._table(entity_type).live

    def check_embedder(self, embedder: Embedder) -> None:
        """Raise IndexModelMismatch unless `embedder` is the model this index's vectors were made with."""
        if embedder.model_id != self.embedder_model_id or int(embedder.dim) != self.dim:
            raise IndexModelMismatch(
                f"index {self.version} was built with {self.embedder_model_id!r} ({self.dim}-d); "
                f"refusing query vectors from {embedder.model_id!r} ({embedder.dim}-d)"
            )

    def field_values(self, entity_type: str, field: str) -> dict[str, str | None]:
        """doc_id -> the value of a filter field (e.g. `playbook_status`) for every doc of `entity_type`."""
        table = self._table(entity_type)
        column = table.strings[field]
        names = {code: value for value, code in column.vocab.items()}
        return {table.doc_ids[row]: names.get(int(column.codes[row])) for row in table.live_rows()}

    def sample(self, entity_type: str, n: int) -> list[tuple[str, str]]:
        """Up to `n` (doc_id, text) pairs spread evenly over the version's docs, for sanity checks."""
        table = self._table(entity_type)
        live = table.live_rows()
        if not len(live):
            return []
        picks = np.unique(np.linspace(0, len(live) - 1, num=min(n, len(live))).astype(int))
        return [(table.doc_ids[r], table.texts[r]) for r in live[picks]]

    def text_count(self, entity_type: str, text: str) -> int:
        """How many live docs of `entity_type` have exactly this text."""
        table = self._table(entity_type)
        same = table.texts.matches(text)
        if table.alive is not None:
            same &= table.alive
        return int(np.count_nonzero(same))

    def vector(self, entity_type: str, doc_id: str) -> np.ndarray | None:
        """The stored (unit) vector of one doc, or None if this version does not hold it."""
        table = self._table(entity_type)
        row = table.row_of.get(doc_id)
        return None if row is None else table.gather([row])[0]

    def newest(self, entity_type: str, filters: SearchFilters, exclude_ids: frozenset[str] = frozenset()) -> int | None:
        """`created_at` of the newest admissible doc (unix seconds), None when no doc is admissible."""
        table = self._table(entity_type)
        if table.size == 0:
            return None
        mask = self._select(table, filters, exclude_ids).mask
        return int(table.created_at[mask].max()) if mask.any() else None

    def payload(self, entity_type: str, doc_id: str) -> dict | None:
        """The stored payload of one doc (a fresh dict), or None if this version does not hold it."""
        table = self._table(entity_type)
        row = table.row_of.get(doc_id)
        return None if row is None else orjson.loads(table.payloads[row])

    def _table(self, entity_type: str) -> Table:
        try:
            return self._tables[entity_type]
        except KeyError:
            raise ValueError(f"unknown entity_type {entity_type!r}; expected one of {ENTITY_TYPES}") from None

    # -- filters

    def _select(self, table: Table, filters: SearchFilters, exclude_ids: frozenset[str]) -> _Selection:
        """The admissible rows. Clauses that cannot exclude any row of this table are skipped here and in the BM25
        pushdown: at 333k rows each costs a pass over the column, and each tantivy clause a posting-list walk."""
        mask = np.ones(table.size, dtype=bool) if table.alive is None else table.alive.copy()
        clauses: set[str] = set()
        now = int(time.time()) if filters.now is None else int(filters.now)

        def narrow(name: str, admitted: np.ndarray) -> None:
            np.logical_and(mask, admitted, out=mask)
            clauses.add(name)

        for name in ("user_id", "agent_version", "playbook_name"):
            value = getattr(filters, name)
            if value is not None:
                narrow(name, table.strings[name].equals(value))
        if not table.strings["status"].admits_all(filters.statuses):
            narrow("status", table.strings["status"].isin(filters.statuses))
        if table.entity_type == "agent_playbook" and filters.playbook_statuses is not None:
            column = table.strings["playbook_status"]
            if not column.admits_all(filters.playbook_statuses):
                narrow("playbook_status", column.isin(filters.playbook_statuses))
        if table.size:
            if filters.start_time is not None and filters.start_time > table.created_at.min():
                narrow("created_at", table.created_at >= filters.start_time)
            if filters.end_time is not None and filters.end_time < table.created_at.max():
                narrow("created_at", table.created_at <= filters.end_time)
            if table.expires_at.min() <= now:
                narrow("expires_at", table.expires_at > now)
        excluded = [row for row in map(table.row_of.get, exclude_ids) if row is not None]
        mask[excluded] = False
        return _Selection(mask, int(np.count_nonzero(mask)), frozenset(clauses), len(excluded), now)

    def _filter_queries(self, table: Table, filters: SearchFilters, selection: _Selection) -> list[Any]:
        """The active clauses of `selection` (all but exclude_ids) as tantivy clauses, so the BM25 leg's top hits
        are admissible."""
        import tantivy

        schema, Q, Occur = table.bm25_schema, tantivy.Query, tantivy.Occur
        clauses: list[Any] = []

        def must(query: Any) -> None:
            # Constant 0 score: filters must select, not add to the BM25 score.
            clauses.append((Occur.Must, Q.const_score_query(query, 0.0)))

        def any_of(field: str, values: Iterable[str]) -> Any:
            # A disjunction of term queries: tantivy's term_set_query scans the term dictionary (~0.4 ms).
            return Q.boolean_query([(Occur.Should, Q.term_query(schema, field, v)) for v in values])

        for name in ("user_id", "agent_version", "playbook_name"):
            if name in selection.clauses:
                must(Q.term_query(schema, name, getattr(filters, name)))
        if "status" in selection.clauses:
            must(any_of("status", filters.statuses))
        if "playbook_status" in selection.clauses:
            must(any_of("playbook_status", filters.playbook_statuses or ()))
        if "created_at" in selection.clauses:
            must(
                Q.range_query(
                    schema,
                    "created_at",
                    tantivy.FieldType.Integer,
                    lower_bound=filters.start_time,
                    upper_bound=filters.end_time,
                )
            )
        if "expires_at" in selection.clauses:
            must(
                Q.range_query(
                    schema, "expires_at", tantivy.FieldType.Integer, lower_bound=selection.now, include_lower=False
                )
            )
        return clauses

    # -- legs

    def _vector_leg(
        self, table: Table, selection: _Selection, query_vector: np.ndarray, threshold: float, limit: int
    ) -> dict[int, float]:
        """Nearest admissible rows at or above `threshold`: row -> cosine, best first (ties by doc_id).

        Exact unless the type has an HNSW graph and the filters admit many rows; then the graph walk is confined
        to the admitted rows by a faiss ID selector (see `HnswVectors.search`)."""
        mask = selection.mask
        if table.ann is not None:
            rows, sims = table.ann.search(
                query_vector, limit, None if selection.admitted == table.size else mask[: table.tail_start]
            )
            if len(table.tail):  # delta rows since the graph was built: few, scanned exactly
                tail_rows = np.flatnonzero(mask[table.tail_start :])
                rows = np.concatenate([rows, tail_rows + table.tail_start])
                sims = np.concatenate([sims, table.tail[tail_rows] @ query_vector])
        elif selection.admitted * 4 >= table.size:
            # Most rows admitted: one matrix-vector product over all rows beats skipping the others.
            rows = np.flatnonzero(mask)
            sims = (table.vectors @ query_vector)[rows]
        else:
            rows, sims = table.flat.scan(query_vector, limit, mask, selection.admitted)
        keep = sims >= threshold
        top, top_sims = _top_rows(rows[keep], sims[keep], table.id_rank, limit)
        return dict(zip(top.tolist(), top_sims.tolist()))

    def _bm25_leg(
        self,
        table: Table,
        selection: _Selection,
        terms: tuple[str, ...],
        filters: SearchFilters,
        exclude_ids: frozenset[str],
        limit: int,
    ) -> list[int]:
        """Rows ranked by BM25 over the OR of the query terms, restricted to the admissible rows."""
        if not terms:
            return []
        import tantivy

        Q, Occur = tantivy.Query, tantivy.Occur
        text_query = Q.boolean_query([(Occur.Should, Q.term_query(table.bm25_schema, "text", t)) for t in terms])
        # Tombstoned rows are deleted in tantivy (never hits); rows of shards not loaded are hits to drop.
        rejected = table.bm25_live - selection.admitted
        if rejected <= _POSTFILTER_MAX_ROWS:
            # Few rejected rows: fetch that many extra hits and drop them below; exact, and no filter clauses.
            clauses, fetch = [], limit + rejected
        else:
            clauses = self._filter_queries(table, filters, selection)
            fetch = limit + selection.excluded_ids
            if selection.excluded_ids > _POSTFILTER_MAX_ROWS:
                clauses.append((Occur.MustNot, Q.term_set_query(table.bm25_schema, "doc_id", sorted(exclude_ids))))
                fetch = limit
        query = Q.boolean_query([(Occur.Must, text_query), *clauses]) if clauses else text_query
        hits = table.searcher.search(query, fetch, count=False).hits
        if not hits:
            return []
        rows = np.asarray(table.searcher.fast_field_values("row", [address for _, address in hits]), dtype=np.int64)
        scores = np.asarray([score for score, _ in hits], dtype=np.float64)
        if table.local_of is not None:
            rows = table.local_of[rows]
            scores, rows = scores[rows >= 0], rows[rows >= 0]
        admissible = selection.mask[rows]  # post-filters what was not pushed down; keeps both legs consistent
        top, _ = _top_rows(rows[admissible], scores[admissible], table.id_rank, limit)
        return top.tolist()

    # -- public

    def search(
        self,
        entity_type: str,
        query: str,
        query_vector: np.ndarray | None,
        *,
        top_k: int,
        threshold: float,
        mode: SearchMode,
        filters: SearchFilters,
        rrf_k: int = 60,
        bm25_weight: float = 1.0,
        vector_weight: float = 1.0,
        exclude_ids: frozenset[str] = frozenset(),
    ) -> list[SearchHit]:
        """Search one entity type; return at most `top_k` hits, best first (ties by doc_id).

        hybrid fuses the BM25 and vector legs by reciprocal rank (missing rank = 0 contribution); vector and fts
        use one leg. `threshold` is a minimum cosine for the vector leg. Without a query vector, hybrid and
        vector fall back to fts; a blank query without a vector returns the most recent admissible docs.
        Raises IndexModelMismatch if the query vector's dimension differs from the index's.
        """
        if mode not in SEARCH_MODES:
            raise ValueError(f"unknown search mode {mode!r}; expected one of {SEARCH_MODES}")
        table = self._table(entity_type)
        q = self._prepare_query_vector(query_vector)
        if top_k <= 0 or table.size == 0:
            return []
        selection = self._select(table, filters, exclude_ids)
        if selection.admitted == 0:
            return []
        terms, blank = analyse_query(query)
        if entity_type != "interaction":
            terms = content_terms(terms)
        vector = q if mode in ("hybrid", "vector") else None  # None: no vector leg
        use_bm25 = mode == "fts" or (mode == "hybrid" and not blank) or vector is None
        if vector is None and blank:
            return self._most_recent(table, selection.mask, top_k)

        limit = top_k * CANDIDATES_PER_RESULT
        vector_hits = self._vector_leg(table, selection, vector, threshold, limit) if vector is not None else {}
        bm25_rows = self._bm25_leg(table, selection, terms, filters, exclude_ids, limit) if use_bm25 else []
        return self._fuse(table, bm25_rows, vector_hits, vector, top_k, rrf_k, bm25_weight, vector_weight)

    def _prepare_query_vector(self, query_vector: np.ndarray | None) -> np.ndarray | None:
        if query_vector is None:
            return None
        q = np.asarray(query_vector, dtype=np.float32)
        if q.ndim == 2 and q.shape[0] == 1:  # a one-row batch from embedder.embed([query])
            q = q[0]
        if q.ndim != 1 or q.shape[0] != self.dim:
            raise IndexModelMismatch(
                f"query vector has shape {np.shape(query_vector)}; index {self.version} holds {self.dim}-d vectors "
                f"from {self.embedder_model_id!r}"
            )
        norm = float(np.linalg.norm(q))
        if not np.isfinite(norm) or norm == 0.0:
            raise ValueError("query vector must be finite and non-zero")
        return q / norm  # cosine needs unit length; embedders normalise already, this guards hand-made vectors

    def _most_recent(self, table: Table, mask: np.ndarray, top_k: int) -> list[SearchHit]:
        rows = np.flatnonzero(mask)
        top, _ = _top_rows(rows, table.created_at[rows].astype(np.float64), table.id_rank, top_k)
        return [self._hit(table, int(r), 0.0, None, None, None) for r in top]

    def _fuse(
        self,
        table: Table,
        bm25_rows: list[int],
        vector_hits: dict[int, float],
        q: np.ndarray | None,
        top_k: int,
        rrf_k: int,
        bm25_weight: float,
        vector_weight: float,
    ) -> list[SearchHit]:
        bm25_rank = {row: i + 1 for i, row in enumerate(bm25_rows)}
        vector_rank = {row: i + 1 for i, row in enumerate(vector_hits)}
        scores: dict[int, float] = {}
        for row, rank in bm25_rank.items():
            scores[row] = scores.get(row, 0.0) + bm25_weight / (rrf_k + rank)
        for row, rank in vector_rank.items():
            scores[row] = scores.get(row, 0.0) + vector_weight / (rrf_k + rank)
        # Vectorised like the legs (ties by doc_id): a pool of 50 fuses ~500 rows per search.
        rows = np.fromiter(scores, dtype=np.int64, count=len(scores))
        fused = np.fromiter(scores.values(), dtype=np.float64, count=len(scores))
        ranked = _top_rows(rows, fused, table.id_rank, top_k)[0].tolist()
        similarity: dict[int, float | None] = dict.fromkeys(ranked)
        if q is not None:
            # Only the returned rows need a cosine: the vector leg's, plus a few dot products for BM25-only hits.
            missing = [row for row in ranked if row not in vector_hits]
            similarity.update({row: vector_hits[row] for row in ranked if row in vector_hits})
            if missing:
                similarity.update(zip(missing, (table.gather(missing) @ q).tolist()))
        return [
            self._hit(table, row, scores[row], bm25_rank.get(row), vector_rank.get(row), similarity[row])
            for row in ranked
        ]

    @staticmethod
    def _hit(
        table: Table, row: int, score: float, bm25_rank: int | None, vector_rank: int | None, similarity: float | None
    ) -> SearchHit:
        return SearchHit(
            doc_id=table.doc_ids[row],
            entity_type=table.entity_type,
            score=float(score),
            payload=orjson.loads(table.payloads[row]),  # fresh per hit: callers may mutate it
            bm25_rank=bm25_rank,
            vector_rank=vector_rank,
            similarity=similarity,
        )
