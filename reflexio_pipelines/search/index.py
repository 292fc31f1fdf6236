"""A precomputed, immutable, versioned hybrid search index: tantivy BM25 + exact numpy cosine, fused by RRF.

The pipeline builds a version directory with `publish_index`; the serving process opens it read-only with
`LoadedIndex.load` and answers queries. Layout of one version::

    <index_root>/CURRENT                      name of the live version (replaced atomically)
    <index_root>/<version>/manifest.json      format, embedder model id + dim, counts, file digests
    <index_root>/<version>/docs.parquet       every doc field (payload as a JSON string), row-aligned per type
    <index_root>/<version>/bm25/<type>/       one tantivy index per entity type (stores only the row number)
    <index_root>/<version>/vectors/<type>.npy float32 (rows, dim), L2-normalised, row-aligned with the docs
    <index_root>/<version>/ann/<type>.faiss   HNSW graph (see `ann`), only for types with >= hnsw_min_rows rows
    <index_root>/<version>/delta/<name>/      docs.parquet + vectors/ of a later segment (see `search.incremental`)
    <index_root>/<version>/tombstones/<type>.npy  rows of earlier segments that this version no longer holds

A version is a base segment (the files above) plus zero or more delta segments appended by incremental builds:
rows are numbered across segments in order, the BM25 index holds every live row (tantivy segments of its own),
tombstones hide rows that were updated or deleted since, and the HNSW graph covers the base segment's rows only
(delta rows are scanned exactly). Files of earlier versions are shared by hard link, never modified.

Unlike the original system, the similarity threshold applies to the vector leg, the vector leg is a nearest
neighbour search over every row that passes the filters (exact below `HNSW_MIN_ROWS` rows per type or when the
filters admit few rows, an HNSW graph walk restricted to the admitted rows above), and documents and queries share
one text normalisation.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import secrets
import shutil
import tempfile
import threading
import time
import unicodedata
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from reflexio_pipelines.files import TMP_PREFIX, fsync_path, fsync_tree, sha256_file
from reflexio_pipelines.learning.embedding import Embedder, EmbeddingError, embed_one, l2_normalize
from reflexio_pipelines.search.shards import ShardSelector
from reflexio_pipelines.search.ann import (
    ANN_KIND,
    HNSW_MIN_ROWS,
    FlatVectors,
    HnswParams,
    HnswVectors,
    build_hnsw,
    write_hnsw,
)
from reflexio_pipelines.storage import (
    LakePath,
    download_tree,
    is_remote,
    lake_path,
    local_state_dir,
    remove_tree,
    upload_tree,
    write_bytes,
)

#: "interaction": published turns with their conversational context (search/conversation.py), served by
#: search_interactions only; the other three are learned items.
ENTITY_TYPES: tuple[str, ...] = ("profile", "user_playbook", "agent_playbook", "interaction")
SearchMode = Literal["hybrid", "vector", "fts"]
SEARCH_MODES: tuple[str, ...] = ("hybrid", "vector", "fts")

FORMAT_VERSION = 2  # 2: delta segments and tombstones; format 1 (one segment, no fingerprints) still loads
_READABLE_FORMATS = (1, 2)
TEXT_NORMALIZATION = "nfkc-casefold-nfkc-strip-controls-collapse-ws/v1"
BM25_TOKENIZER = "en_stem"
CURRENT_FILE = "CURRENT"
TURNS_WATERMARK = "turns_ingested_through_us"  # manifest watermark: the version holds live turns ingested up to it

_NEVER = np.iinfo(np.int64).max  # expires_at of docs that never expire
_EMBED_CHUNK = 512  # texts per embedder.embed call while building (the embedder batches further itself)
_MAX_QUERY_TERMS = 256  # bounds the BM25 query for pathological inputs (a 5,000-char paste)
_CANDIDATES_PER_RESULT = 5  # each leg contributes top_k * 5 candidates to the fusion
# When at most this many rows are inadmissible, the BM25 leg fetches that many extra hits and drops them itself
# instead of pushing the filters into tantivy, where every clause costs a posting-list walk per query.
_POSTFILTER_MAX_ROWS = 256
_VERSION_RE = re.compile(r"^\d{8}T\d{12}Z-[0-9a-f]{6}$")
_STRING_FILTER_FIELDS = ("user_id", "agent_version", "playbook_name", "status", "playbook_status")


class SearchIndexError(RuntimeError):
    """The index cannot be built, loaded or queried as asked."""


class IndexModelMismatch(SearchIndexError):
    """Vectors from a different embedding model (or dimension) than the index's were offered."""


class IndexCorrupt(SearchIndexError):
    """An index version on disk is incomplete or does not match its manifest."""


# ---------------------------------------------------------------------------------------------------------------
# value types


@dataclass(frozen=True)
class SearchDoc:
    """One searchable entity as the pipeline hands it to the index."""

    entity_type: str  # one of ENTITY_TYPES
    doc_id: str  # unique within entity_type
    text: str  # what BM25 indexes and what gets embedded
    payload: dict  # the API view returned to clients as-is (JSON-serialisable)
    user_id: str | None = None
    agent_version: str | None = None
    playbook_name: str | None = None
    status: str = "current"  # lifecycle: current | pending | archived | superseded
    playbook_status: str | None = None  # approval, agent playbooks: pending | approved | rejected
    created_at: int = 0  # unix seconds
    expires_at: int | None = None  # unix seconds; expired docs are hidden at query time
    # Users whose words the text holds besides `user_id` (an agent playbook's member users). Not stored in the
    # index: the embedding cache records them, so erasing any of them removes the text's cached vector.
    contributors: tuple[str, ...] = ()
    # (text, weight) pairs whose weighted sum of embeddings, normalised, is the doc's vector; empty = embed `text`.
    # A turn's vector is its own text's plus its neighbours' (search/conversation.py): each text is embedded once
    # (through the cache), however many windows it appears in.
    vector_parts: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class SearchFilters:
    """Which rows a query may return; every field narrows the set."""

    user_id: str | None = None
    agent_version: str | None = None
    playbook_name: str | None = None
    statuses: tuple[str, ...] = ("current",)
    playbook_statuses: tuple[str, ...] | None = ("approved", "pending")  # agent playbooks only; None = any
    start_time: int | None = None  # created_at >= start_time
    end_time: int | None = None  # created_at <= end_time
    now: int | None = None  # for expiry; default time.time()


@dataclass(frozen=True)
class SearchHit:
    """One result. `score` is the RRF score in every mode; ranks are 1-based within each leg (None = absent)."""

    doc_id: str
    entity_type: str
    score: float
    payload: dict
    bm25_rank: int | None
    vector_rank: int | None
    similarity: float | None  # cosine to the query vector whenever one was used


# ---------------------------------------------------------------------------------------------------------------
# text


_WS_CONTROLS = {"\t", "\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x1f", "\x85"}


def normalize_text(text: str) -> str:
    """The one normalisation for documents and queries: NFKC, casefold, drop control/format characters,
    collapse whitespace. Applied before embedding and before BM25 on both sides, so they always agree."""
    text = unicodedata.normalize("NFKC", str(text)).casefold()
    text = unicodedata.normalize("NFKC", text)  # casefolding can leave text that is not NFKC (e.g. "ǰ")
    # Control (Cc), format (Cf: zero-width spaces, BOM, bidi marks) and lone surrogates (Cs) carry no words;
    # surrogates would also break UTF-8 encoding downstream. Line breaks and tabs count as spaces.
    kept = [
        " " if ch in _WS_CONTROLS else ch
        for ch in text
        if ch in _WS_CONTROLS or unicodedata.category(ch) not in ("Cc", "Cf", "Cs")
    ]
    return " ".join("".join(kept).split())


_analyzers = threading.local()


def _analyzer() -> Any:
    """A per-thread tantivy analyzer equal to tantivy's built-in "en_stem" (the index side's tokenizer).

    Per thread because TextAnalyzer tokenises through a mutable borrow.
    """
    analyzer = getattr(_analyzers, "en_stem", None)
    if analyzer is None:
        import tantivy

        analyzer = (
            tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
            .filter(tantivy.Filter.remove_long(40))
            .filter(tantivy.Filter.lowercase())
            .filter(tantivy.Filter.stemmer("english"))
            .build()
        )
        _analyzers.en_stem = analyzer
    return analyzer


def query_terms(query: str) -> list[str]:
    """The distinct BM25 terms of a query: normalised, tokenised and stemmed exactly like indexed text.

    Only word tokens survive, so no user text ever reaches a query parser (no syntax errors, no injection).
    """
    return list(_analyse_query(query)[0])


@functools.lru_cache(maxsize=1024)
def _analyse_query(query: str) -> tuple[tuple[str, ...], bool]:
    """(distinct BM25 terms, is the query blank) of a query. Cached: a unified search analyses one query once
    per entity type, and normalising a long query character by character costs tens of microseconds."""
    text = normalize_text(query)
    terms: dict[str, None] = {}
    for token in _analyzer().analyze(text):
        terms.setdefault(token, None)
        if len(terms) >= _MAX_QUERY_TERMS:
            break
    return tuple(terms), not text


def embed_search_query(embedder: Embedder, query: str) -> np.ndarray | None:
    """The query vector for `LoadedIndex.search`: the query normalised exactly as documents were before
    embedding, then embedded (through the embedder's query cache). None for a blank query."""
    text = normalize_text(query)
    return embed_one(embedder, text) if text else None


# ---------------------------------------------------------------------------------------------------------------
# building


class VectorCache(Protocol):
    """Vectors an embedder made earlier for normalised texts (`lake.embedding_cache.EmbeddingCache`), so a build
    embeds only texts it has not seen. Vectors go in and come out as the exact float32 rows an index stores."""

    def lookup(self, model_id: str, dim: int, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """text -> (dim,) vector for those of `texts` (distinct) that were stored for this model and dimension."""
        ...

    def store(self, model_id: str, dim: int, texts: Sequence[str], vectors: np.ndarray,
              owners: Mapping[str, frozenset[str]]) -> None:  # fmt: skip
        """Store newly embedded `texts` (row i of `vectors` is texts[i]); `owners` maps every text of the build,
        cached or new, to the users whose words it holds."""
        ...


def doc_owners(doc: SearchDoc) -> frozenset[str]:
    """The users whose words a document's text holds: its user and its contributors."""
    return frozenset(u for u in (doc.user_id, *doc.contributors) if u)


def _validate_docs(docs: Sequence[SearchDoc]) -> dict[str, list[SearchDoc]]:
    """Group docs by entity type (sorted by doc_id, so a doc set always yields the same index); refuse bad docs."""
    by_type: dict[str, list[SearchDoc]] = {t: [] for t in ENTITY_TYPES}
    seen: set[tuple[str, str]] = set()
    for doc in docs:
        if doc.entity_type not in by_type:
            raise ValueError(f"unknown entity_type {doc.entity_type!r}; expected one of {ENTITY_TYPES}")
        if not isinstance(doc.doc_id, str) or not doc.doc_id:
            raise ValueError(f"doc_id must be a non-empty string, got {doc.doc_id!r}")
        key = (doc.entity_type, doc.doc_id)
        if key in seen:
            raise ValueError(f"duplicate doc_id {doc.doc_id!r} in {doc.entity_type}")
        seen.add(key)
        if not isinstance(doc.payload, dict):
            raise ValueError(f"payload of {doc.doc_id!r} must be a dict")
        if not isinstance(doc.status, str) or not doc.status:
            raise ValueError(f"status of {doc.doc_id!r} must be a non-empty string")
        for name in ("created_at", "expires_at"):
            value = getattr(doc, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"{name} of {doc.doc_id!r} must be int unix seconds, got {value!r}")
        by_type[doc.entity_type].append(doc)
    for group in by_type.values():
        group.sort(key=lambda d: d.doc_id)
    return by_type


def _embed_all(texts: list[str], embedder: Embedder, cache: VectorCache | None = None,
               owners: Mapping[str, frozenset[str]] | None = None) -> np.ndarray:  # fmt: skip
    """Vectors of normalised texts: each distinct text once, from `cache` when it holds it, else embedded (and then
    stored in `cache`, with every text's `owners`, in one call). Checks the embedder keeps its own contract."""
    dim = int(embedder.dim)
    if dim <= 0:
        raise IndexModelMismatch(f"embedder {embedder.model_id!r} reports dimension {dim}")
    if not texts:
        return np.zeros((0, dim), dtype=np.float32)
    unique = list(dict.fromkeys(texts))
    known = cache.lookup(embedder.model_id, dim, unique) if cache is not None else {}
    missing = [t for t in unique if t not in known]
    fresh = _embed_texts(missing, embedder, dim)
    if cache is not None:
        cache.store(embedder.model_id, dim, missing, fresh, owners or {})
    unique_vectors = np.empty((len(unique), dim), dtype=np.float32)
    position = {text: i for i, text in enumerate(missing)}
    for i, text in enumerate(unique):
        unique_vectors[i] = known[text] if text in known else fresh[position[text]]
    row = {text: i for i, text in enumerate(unique)}
    return unique_vectors[[row[t] for t in texts]]


def _embed_docs(by_type: Mapping[str, Sequence[SearchDoc]], embedder: Embedder, cache: VectorCache | None
                ) -> tuple[dict[str, list[str]], np.ndarray]:  # fmt: skip
    """Per entity type the docs' normalised texts, and their vectors in type order then doc order. Every type's
    texts in one call: one cache lookup and one cache commit per build, each shared text once. A doc with
    `vector_parts` gets the normalised weighted sum of its parts' vectors."""
    norm_texts = {t: [normalize_text(d.text) for d in by_type.get(t, ())] for t in ENTITY_TYPES}
    owners: dict[str, frozenset[str]] = {}
    inputs: list[str] = []  # every doc's texts to embed, doc after doc
    weights: list[float] = []
    starts: list[int] = []  # where each doc's texts begin in `inputs`
    for entity_type in ENTITY_TYPES:
        for doc, text in zip(by_type.get(entity_type, ()), norm_texts[entity_type], strict=True):
            parts = [(normalize_text(p), w) for p, w in doc.vector_parts] or [(text, 1.0)]
            starts.append(len(inputs))
            for part, weight in parts:
                inputs.append(part)
                weights.append(weight)
                owners[part] = owners.get(part, frozenset()) | doc_owners(doc)
    vectors = _embed_all(inputs, embedder, cache, owners)
    if len(inputs) == len(starts):  # one text per doc: its vector as embedded
        return norm_texts, vectors
    out = vectors[starts]  # docs without parts keep their vector bit for bit
    mixed = [i for i, doc in enumerate(d for t in ENTITY_TYPES for d in by_type.get(t, ())) if doc.vector_parts]
    sums = np.add.reduceat(vectors * np.asarray(weights, dtype=np.float32)[:, None], starts, axis=0)
    out[mixed] = l2_normalize(sums[mixed])
    return norm_texts, out


def _embed_texts(texts: list[str], embedder: Embedder, dim: int) -> np.ndarray:
    """Embed distinct texts in chunks, refusing vectors of the wrong shape and normalising them (unit rows)."""
    if not texts:
        return np.zeros((0, dim), dtype=np.float32)
    parts = []
    for start in range(0, len(texts), _EMBED_CHUNK):
        chunk = texts[start : start + _EMBED_CHUNK]
        vectors = np.asarray(embedder.embed(chunk))
        if vectors.shape != (len(chunk), dim):
            raise IndexModelMismatch(
                f"embedder {embedder.model_id!r} claims {dim} dimensions but returned shape {vectors.shape} "
                f"for {len(chunk)} texts"
            )
        try:
            parts.append(l2_normalize(vectors))  # defensive: the index relies on unit rows for cosine
        except EmbeddingError as exc:
            raise SearchIndexError(f"embedder {embedder.model_id!r} returned unusable vectors: {exc}") from None
    return np.concatenate(parts, axis=0)


def _bm25_schema() -> Any:
    import tantivy

    builder = tantivy.SchemaBuilder()
    # Term frequencies and field norms are all BM25 needs; positions (phrase queries) are never used.
    builder.add_text_field("text", tokenizer_name=BM25_TOKENIZER, index_option="freq")
    # Exact-match fields so filters are pushed down as term queries.
    for name in ("doc_id", *_STRING_FILTER_FIELDS):
        builder.add_text_field(name, tokenizer_name="raw", index_option="basic")
    builder.add_integer_field("created_at", indexed=True, fast=True)
    builder.add_integer_field("expires_at", indexed=True, fast=True)
    builder.add_unsigned_field("row", stored=True, fast=True)  # the only stored value: rows live in parquet
    return builder.build()


def _write_bm25(path: Path, docs: Sequence[SearchDoc], norm_texts: Sequence[str], *, first_row: int = 0,
                dead_ids: Iterable[str] = ()) -> None:  # fmt: skip
    """Index `docs` (rows from `first_row`) for BM25 at `path`: a new index, or, when `path` holds one (an
    incremental build's hard-linked copy), new tantivy segments beside the old ones after deleting `dead_ids`.
    tantivy never rewrites a segment file in place, so the older version sharing them is untouched."""
    import tantivy

    if (path / "meta.json").is_file():
        index = tantivy.Index.open(str(path))
    else:
        path.mkdir(parents=True)
        index = tantivy.Index(_bm25_schema(), path=str(path), reuse=False)
    # One indexing thread gives one segment whose doc order is the row order: reproducible builds.
    writer = index.writer(heap_size=64_000_000, num_threads=1)
    for doc_id in dead_ids:  # deletes apply to docs added before them: a re-added doc_id below survives
        writer.delete_documents_by_term("doc_id", doc_id)
    for row, (doc, text) in enumerate(zip(docs, norm_texts, strict=True), start=first_row):
        tdoc = tantivy.Document()
        tdoc.add_text("text", text)
        tdoc.add_text("doc_id", doc.doc_id)
        for name in _STRING_FILTER_FIELDS:
            value = getattr(doc, name)
            if value is not None:
                tdoc.add_text(name, str(value))
        tdoc.add_integer("created_at", int(doc.created_at))
        tdoc.add_integer("expires_at", _NEVER if doc.expires_at is None else int(doc.expires_at))
        tdoc.add_unsigned("row", row)
        writer.add_document(tdoc)
    writer.commit()
    writer.wait_merging_threads()


def payload_json(doc: SearchDoc) -> str:
    """The payload as stored in docs.parquet (and hashed into the fingerprint); refuses non-JSON payloads."""
    try:
        return json.dumps(doc.payload, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"payload of {doc.doc_id!r} is not JSON-serialisable: {exc}") from None


def doc_fingerprint(doc: SearchDoc) -> str:
    """A digest of everything a version stores about a doc (text, payload, filter fields, times): an incremental
    build re-indexes a doc exactly when its fingerprint changed. Over the fields' repr: 5x cheaper than JSON (3.7 vs
    20 s per 1M docs, measured), and payloads are built in a fixed key order, so an equal doc digests equally (a
    payload with its keys reordered would only be re-indexed once, needlessly)."""
    fields = (doc.text, doc.payload, *(getattr(doc, name) for name in _STRING_FILTER_FIELDS), doc.created_at,
              doc.expires_at)  # fmt: skip
    if doc.vector_parts:  # only then: docs without parts keep the fingerprints earlier versions stored
        fields += (doc.vector_parts,)
    return hashlib.blake2b(repr(fields).encode(), digest_size=16).hexdigest()


def _write_docs_parquet(path: Path, by_type: Mapping[str, Sequence[SearchDoc]],
                        first_rows: Mapping[str, int] | None = None) -> None:  # fmt: skip
    """One segment's docs; rows of type t are numbered from first_rows[t] (0 for a base segment)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns: dict[str, list[Any]] = {
        "entity_type": [], "row": [], "doc_id": [], "text": [], "payload": [], "user_id": [], "agent_version": [],
        "playbook_name": [], "status": [], "playbook_status": [], "created_at": [], "expires_at": [],
        "fingerprint": [],
    }  # fmt: skip
    for entity_type in ENTITY_TYPES:
        first = (first_rows or {}).get(entity_type, 0)
        for row, doc in enumerate(by_type.get(entity_type, ()), start=first):
            payload = payload_json(doc)
            columns["entity_type"].append(entity_type)
            columns["row"].append(row)
            columns["doc_id"].append(doc.doc_id)
            columns["text"].append(doc.text)
            columns["payload"].append(payload)
            for name in _STRING_FILTER_FIELDS:
                columns[name].append(getattr(doc, name))
            columns["created_at"].append(int(doc.created_at))
            columns["expires_at"].append(doc.expires_at)
            columns["fingerprint"].append(doc_fingerprint(doc))
    schema = pa.schema(
        [("entity_type", pa.string()), ("row", pa.int64()), ("doc_id", pa.string()), ("text", pa.string()),
         ("payload", pa.string())]
        + [(name, pa.string()) for name in _STRING_FILTER_FIELDS]
        + [("created_at", pa.int64()), ("expires_at", pa.int64()), ("fingerprint", pa.string())]
    )  # fmt: skip
    pq.write_table(pa.table(columns, schema=schema), path)


def _write_ann(out_dir: Path, entity_type: str, vectors: np.ndarray, params: HnswParams) -> dict[str, Any]:
    """Build and store one entity type's HNSW graph; return its manifest entry."""
    started = time.perf_counter()
    (out_dir / "ann").mkdir(exist_ok=True)
    relative = f"ann/{entity_type}.faiss"
    write_hnsw(build_hnsw(vectors, params), out_dir / relative)
    return {
        "kind": ANN_KIND,
        "path": relative,
        "sha256": sha256_file(out_dir / relative),
        "rows": int(len(vectors)),
        "params": params.to_manifest(),
        "build_seconds": round(time.perf_counter() - started, 3),
    }


def build_index(
    docs: Sequence[SearchDoc],
    embedder: Embedder,
    out_dir: Path,
    *,
    version: str | None = None,
    hnsw_min_rows: int = HNSW_MIN_ROWS,
    hnsw_params: HnswParams = HnswParams(),
    cache: VectorCache | None = None,
    watermarks: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """Build a self-contained index version in `out_dir` (which must not exist or be empty); return its manifest.

    Texts are normalised with `normalize_text`, embedded with `embedder` (only those `cache` does not hold, which
    are then stored in it: one lookup and one store per build) and indexed for BM25. Entity types with at least
    `hnsw_min_rows` rows also get an HNSW graph (`hnsw_params`) for their vector leg. Refuses unknown entity
    types, duplicate ids, non-JSON payloads and embedders whose vectors do not match their stated dim.
    `watermarks` go into the manifest as they are (e.g. up to which ingest instant the version holds turns).
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise SearchIndexError(f"{out_dir} is not empty; index versions are immutable")
    model_id = str(getattr(embedder, "model_id", "") or "")
    if not model_id:
        raise IndexModelMismatch("the embedder has no model_id; an index must record which model made its vectors")
    by_type = _validate_docs(docs)
    out_dir.mkdir(parents=True, exist_ok=True)

    started = time.perf_counter()
    vector_digests: dict[str, str] = {}
    ann: dict[str, dict[str, Any]] = {}
    (out_dir / "vectors").mkdir()
    dim = int(embedder.dim)
    norm_texts, all_vectors = _embed_docs(by_type, embedder, cache)
    offset = 0
    for entity_type in ENTITY_TYPES:
        group = by_type[entity_type]
        vectors = all_vectors[offset : offset + len(group)]
        offset += len(group)
        vector_path = out_dir / "vectors" / f"{entity_type}.npy"
        np.save(vector_path, np.ascontiguousarray(vectors, dtype=np.float32), allow_pickle=False)
        vector_digests[entity_type] = sha256_file(vector_path)
        if group and len(group) >= hnsw_min_rows:
            ann[entity_type] = _write_ann(out_dir, entity_type, vectors, hnsw_params)
        _write_bm25(out_dir / "bm25" / entity_type, group, norm_texts[entity_type])
    _write_docs_parquet(out_dir / "docs.parquet", by_type)

    now = datetime.now(timezone.utc)
    manifest: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "version": version or out_dir.name,
        "created_at": now.isoformat(),
        "created_at_unix": int(now.timestamp()),
        "embedder": {"model_id": model_id, "dim": dim},
        "counts": {t: len(by_type[t]) for t in ENTITY_TYPES},  # live docs
        "rows": {t: len(by_type[t]) for t in ENTITY_TYPES},  # rows over all segments, tombstoned ones included
        "vector_sha256": vector_digests,
        "deltas": [],  # segments appended by incremental builds (search.incremental), in row order
        "tombstones": {},  # entity type -> {"count", "sha256"} of tombstones/<type>.npy
        "ann_min_rows": int(hnsw_min_rows),
        "ann": ann,  # entity type -> HNSW file, digest, parameters; types absent here are searched exactly
        "docs_sha256": sha256_file(out_dir / "docs.parquet"),
        "text_normalization": TEXT_NORMALIZATION,
        "bm25_tokenizer": BM25_TOKENIZER,
        "build_seconds": round(time.perf_counter() - started, 3),
        "watermarks": dict(watermarks or {}),
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


# ---------------------------------------------------------------------------------------------------------------
# publishing


def new_version_id() -> str:
    """A lexicographically sortable version name: UTC timestamp with microseconds plus a random suffix."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ") + "-" + secrets.token_hex(3)


def _as_root(index_root: LakePath | str) -> LakePath:
    return lake_path(index_root) if isinstance(index_root, str) else index_root


def stage_index(
    index_root: LakePath,
    docs: Sequence[SearchDoc],
    embedder: Embedder,
    *,
    hnsw_min_rows: int = HNSW_MIN_ROWS,
    hnsw_params: HnswParams = HnswParams(),
    cache: VectorCache | None = None,
    watermarks: Mapping[str, int] | None = None,
) -> str:
    """Build a new version under `index_root` (a full build) and make it durable, without serving it yet.

    The pipeline stages, checks, then activates; `publish_index` does both at once. Returns the new version name.
    The HNSW, cache and watermark options are `build_index`'s. `search.incremental.stage_update` stages a delta
    instead.
    """

    def build(out_dir: Path, version: str) -> None:
        build_index(docs, embedder, out_dir, version=version, hnsw_min_rows=hnsw_min_rows, hnsw_params=hnsw_params,
                    cache=cache, watermarks=watermarks)  # fmt: skip

    return stage_version(index_root, build)


def stage_version(index_root: LakePath, build: Callable[[Path, str], Any]) -> str:
    """Run `build(directory, version)` for a new version name and make the result durable under `index_root`.

    Readers never see a half-built version: it is built in a hidden temp dir and renamed into place (on object
    storage: built locally and uploaded, manifest last, and a version without a manifest is not listed)."""
    index_root = _as_root(index_root)
    version = new_version_id()
    if is_remote(index_root):
        with tempfile.TemporaryDirectory(prefix="reflexio-index-") as tmp:
            local = Path(tmp) / version
            build(local, version)
            upload_tree(local, index_root / version, last="manifest.json")
        return version
    index_root.mkdir(parents=True, exist_ok=True)
    tmp = index_root / f".tmp-{uuid.uuid4().hex}"
    try:
        build(tmp, version)
        fsync_tree(tmp)
        os.rename(tmp, index_root / version)
        fsync_path(index_root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return version


def activate_version(index_root: LakePath, version: str) -> None:
    """Atomically point CURRENT at an existing, complete version (serving swaps to it on its next poll)."""
    index_root = _as_root(index_root)
    if not _VERSION_RE.match(version) or not (index_root / version / "manifest.json").is_file():
        raise IndexCorrupt(f"cannot activate {version!r}: no complete version of that name under {index_root}")
    write_bytes(index_root / CURRENT_FILE, (version + "\n").encode())


def publish_index(
    index_root: LakePath,
    docs: Sequence[SearchDoc],
    embedder: Embedder,
    *,
    hnsw_min_rows: int = HNSW_MIN_ROWS,
    hnsw_params: HnswParams = HnswParams(),
    cache: VectorCache | None = None,
    watermarks: Mapping[str, int] | None = None,
) -> str:
    """Stage a new version and point CURRENT at it. Publishes to one root should be serialised (one
    index-building run at a time): the last to finish sets CURRENT. Returns the new version name. The HNSW, cache
    and watermark options are `build_index`'s."""
    version = stage_index(index_root, docs, embedder, hnsw_min_rows=hnsw_min_rows, hnsw_params=hnsw_params,
                          cache=cache, watermarks=watermarks)  # fmt: skip
    activate_version(index_root, version)
    return version


def current_version(index_root: LakePath) -> str | None:
    """The version CURRENT points at, or None when nothing was published yet."""
    try:
        name = (_as_root(index_root) / CURRENT_FILE).read_text().strip()
    except FileNotFoundError:
        return None
    if not _VERSION_RE.match(name):
        raise IndexCorrupt(f"{index_root}/{CURRENT_FILE} holds an invalid version name {name!r}")
    return name


def version_watermark(manifest: Mapping[str, Any], name: str) -> int:
    """A watermark a version's manifest records (0 when it records none: built before watermarks existed)."""
    return int(manifest.get("watermarks", {}).get(name, 0))


def turns_watermark(index_root: LakePath) -> int:
    """Up to which ingest instant (unix microseconds) the current version holds turns; 0 if none published."""
    version = current_version(index_root)
    if version is None:
        return 0
    manifest = json.loads((_as_root(index_root) / version / "manifest.json").read_text())
    return version_watermark(manifest, TURNS_WATERMARK)


def list_versions(index_root: LakePath) -> list[str]:
    """All complete version directories under `index_root`, oldest first."""
    root = _as_root(index_root)
    names = _version_dirs(root)
    if is_remote(root):  # an upload is complete once its manifest (uploaded last) is there
        names = [n for n in names if (root / n / "manifest.json").exists()]
    return names


def _version_dirs(root: LakePath) -> list[str]:
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and _VERSION_RE.match(p.name))


def prune_versions(index_root: LakePath, keep: int = 5, *, stale_tmp_seconds: float = 3600.0) -> list[str]:
    """Delete all but the newest `keep` versions, never the current one; also remove temp build directories
    abandoned for longer than `stale_tmp_seconds`. Returns the deleted version names.

    A serving process that still has an old version open keeps working on Linux (open files and mmaps survive
    unlinking), but it should reload before its version is pruned.
    """
    root = _as_root(index_root)
    keep = max(1, keep)
    current = current_version(root)
    versions = list_versions(root)
    doomed = [v for v in versions[: max(0, len(versions) - keep)] if v != current]
    for name in doomed:
        remove_tree(root / name)
    cutoff = time.time() - stale_tmp_seconds
    if is_remote(root):
        # Uploads that never got their manifest; a version's name is its build time.
        for name in sorted(set(_version_dirs(root)) - set(versions)):
            if _version_time(name) < cutoff:
                remove_tree(root / name)
    else:
        for tmp in root.glob(".tmp-*"):
            if tmp.is_dir() and tmp.stat().st_mtime < cutoff:
                shutil.rmtree(tmp, ignore_errors=True)
    return doomed


def _version_time(name: str) -> float:
    return datetime.strptime(name.split("-", 1)[0], "%Y%m%dT%H%M%S%fZ").replace(tzinfo=timezone.utc).timestamp()


def local_copy(root: LakePath, name: str) -> Path:
    """A local directory holding version `name` of the index at `root`: the version itself for a local index, a
    copy in the cache directory (downloaded once) for a remote one. Cached versions the remote no longer has are
    deleted, so an erased user's documents leave the cache with the next load."""
    if not is_remote(root):
        return root / name
    cache = local_state_dir(root, "indexes")
    cache.mkdir(parents=True, exist_ok=True)
    live = set(list_versions(root))
    abandoned = time.time() - 3600  # a download in progress elsewhere on this host is younger than that
    for stale in cache.iterdir():
        if stale.name.startswith(TMP_PREFIX) and stale.stat().st_mtime > abandoned:
            continue
        if stale.name != name and stale.name not in live:
            shutil.rmtree(stale, ignore_errors=True)
    local = cache / name
    if not local.exists() and name in live:
        download_tree(root / name, local)
    return local


# ---------------------------------------------------------------------------------------------------------------
# loading and querying


@dataclass
class _Column:
    """A string column encoded as integer codes (-1 = null), so filters are vectorised comparisons."""

    codes: np.ndarray
    vocab: dict[str, int]
    has_null: bool

    @classmethod
    def encode(cls, values: Sequence[str | None]) -> _Column:
        vocab: dict[str, int] = {}
        codes = np.fromiter(
            (-1 if v is None else vocab.setdefault(v, len(vocab)) for v in values), dtype=np.int32, count=len(values)
        )
        return cls(codes, vocab, bool((codes < 0).any()))

    def equals(self, value: str) -> np.ndarray:
        code = self.vocab.get(value)
        return np.zeros(len(self.codes), dtype=bool) if code is None else self.codes == code

    def isin(self, values: Iterable[str]) -> np.ndarray:
        # A lookup table indexed by code + 1 (slot 0 = null, never admitted): one gather instead of np.isin's sort.
        admitted = np.zeros(len(self.vocab) + 1, dtype=bool)
        admitted[[self.vocab[v] + 1 for v in values if v in self.vocab]] = True
        return admitted[self.codes + 1]

    def admits_all(self, values: Iterable[str]) -> bool:
        """True when every row's value is one of `values`: the filter would select everything, so skip it."""
        return not self.has_null and set(self.vocab) <= set(values)


@dataclass
class _Table:
    """Everything about one entity type's rows; row i is the same doc in every array and in the BM25 index."""

    entity_type: str
    doc_ids: list[str]
    row_of: dict[str, int]
    id_rank: np.ndarray  # position of each doc_id in sorted order: a vectorised, deterministic tie-breaker
    payloads: list[str]
    texts: list[str]
    strings: dict[str, _Column]
    created_at: np.ndarray
    expires_at: np.ndarray
    vectors: np.ndarray  # in RAM (a read-only view of `flat`): queries read rows at random, slow from an mmap
    flat: FlatVectors  # exact scans of filtered subsets
    ann: HnswVectors | None  # the HNSW graph for large types (then `flat` is its storage: the base segment's rows)
    tail: np.ndarray  # with a graph, the vectors of the delta rows after it (scanned exactly); else empty
    alive: np.ndarray | None  # False for tombstoned rows; None when every row is live
    live: int  # rows not tombstoned
    bm25_live: int  # live docs in the BM25 index: `live`, or more when a shard selector loaded only some rows
    local_of: np.ndarray | None  # sharded: the row of each version row here (-1 = not loaded); None = identity
    bm25_schema: Any
    searcher: Any

    @property
    def size(self) -> int:
        """Rows over all segments, tombstoned ones included (row numbers run up to this)."""
        return len(self.doc_ids)

    @property
    def tail_start(self) -> int:
        """The first row whose vector is in `tail`, not in `vectors`."""
        return len(self.vectors)

    def gather(self, rows: Sequence[int] | np.ndarray) -> np.ndarray:
        """The vectors of `rows`, wherever they live."""
        rows = np.asarray(rows, dtype=np.int64)
        if not len(self.tail):
            return self.vectors[rows]
        head = rows < self.tail_start
        out = np.empty((len(rows), self.vectors.shape[1]), dtype=np.float32)
        out[head] = self.vectors[rows[head]]
        out[~head] = self.tail[rows[~head] - self.tail_start]
        return out

    def live_rows(self) -> np.ndarray:
        """Row numbers of the live docs, ascending."""
        return np.arange(self.size) if self.alive is None else np.flatnonzero(self.alive)


@dataclass(frozen=True)
class _Selection:
    """The rows a query may return, and which filter clauses actually exclude something."""

    mask: np.ndarray  # bool per row
    admitted: int  # mask.sum()
    clauses: frozenset[str]  # names of the filters that exclude at least one row (the others are skipped)
    excluded_ids: int  # rows of this table named in exclude_ids
    now: int  # the instant expiry was judged at, shared by the mask and the BM25 pushdown


def _resolve_version_dir(index_root: LakePath, version: str | None) -> Path:
    root = _as_root(index_root)
    name = version or current_version(root)
    if name is None:
        raise SearchIndexError(f"no index published under {root} (no {CURRENT_FILE} file)")
    if not _VERSION_RE.match(name):
        raise SearchIndexError(f"invalid index version name {name!r}")
    path = local_copy(root, name)
    if not (path / "manifest.json").is_file():
        raise IndexCorrupt(f"index version {root / name} is missing or has no manifest.json")
    return path


@dataclass(frozen=True)
class _Segment:
    """One segment of a version: its docs file and, per entity type, its vector file and that file's sha256."""

    docs: Path
    vectors: dict[str, tuple[Path, str]]


def _segments(version_dir: Path, manifest: Mapping[str, Any]) -> list[_Segment]:
    """The version's segments in row order: the base (the version's top-level files), then its deltas."""
    def segment(directory: Path, digests: Mapping[str, str]) -> _Segment:
        # A version built before an entity type existed has no files for it (digests name the types it has).
        return _Segment(directory / "docs.parquet",
                        {t: (directory / "vectors" / f"{t}.npy", digests[t]) for t in ENTITY_TYPES
                         if t in digests})  # fmt: skip

    deltas = [segment(version_dir / "delta" / d["name"], d["vector_sha256"]) for d in manifest.get("deltas", [])]
    return [segment(version_dir, manifest["vector_sha256"]), *deltas]


def version_doc_files(index_root: LakePath, version: str) -> list[LakePath]:
    """Every docs.parquet of a published version (base and delta segments): where its documents' words are."""
    directory = _as_root(index_root) / version
    manifest = json.loads((directory / "manifest.json").read_text())
    return [directory / "docs.parquet", *(directory / "delta" / d["name"] / "docs.parquet"
                                          for d in manifest.get("deltas", []))]  # fmt: skip


_DOC_COLUMNS = ("entity_type", "row", "doc_id", "text", "payload", *_STRING_FILTER_FIELDS, "created_at", "expires_at")


def _read_docs(paths: Sequence[Path], shards: ShardSelector | None = None) -> dict[str, dict[str, list[Any]]]:
    """The segments' docs split per entity type, each sorted by row (list index i is row i unless `shards` keeps
    only the rows of the users it holds, and docs of no user; the `row` column says which). Rows are filtered in
    Arrow, before any becomes a Python object: a sharded replica never holds the others' texts, not even briefly."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    import pyarrow.dataset as ds

    wanted = None
    if shards is not None:
        users = pc.unique(pa.concat_tables([pq.read_table(p, columns=["user_id"]) for p in paths])["user_id"])
        held = [u for u in users.to_pylist() if u is not None and shards.holds(u)]
        wanted = ds.field("user_id").is_null() | ds.field("user_id").isin(held)
    table = pa.concat_tables([pq.read_table(path, columns=list(_DOC_COLUMNS), filters=wanted) for path in paths])
    unknown = set(pc.unique(table["entity_type"]).to_pylist()) - set(ENTITY_TYPES)
    if unknown:
        raise IndexCorrupt(f"{paths[0].parent} holds unknown entity types {sorted(unknown)}")
    out = {t: table.filter(pc.equal(table["entity_type"], t)).sort_by("row").to_pydict() for t in ENTITY_TYPES}
    del table
    pa.default_memory_pool().release_unused()  # Arrow's allocator keeps freed pages otherwise (RSS)
    return out


def read_tombstones(version_dir: Path, manifest: Mapping[str, Any], entity_type: str, verify: bool = True
                    ) -> np.ndarray:  # fmt: skip
    """Sorted rows of `entity_type` that the version no longer holds (empty when it has no tombstones)."""
    entry = manifest.get("tombstones", {}).get(entity_type)
    if not entry:
        return np.zeros(0, dtype=np.int64)
    path = version_dir / "tombstones" / f"{entity_type}.npy"
    if verify and sha256_file(path) != entry["sha256"]:
        raise IndexCorrupt(f"{path} does not match the sha256 in the manifest")
    rows = np.load(path, allow_pickle=False)
    if rows.dtype != np.int64 or rows.ndim != 1 or len(rows) != entry["count"]:
        raise IndexCorrupt(f"{path} holds {rows.shape} {rows.dtype}, expected {entry['count']} int64 rows")
    return rows


def _segment_vectors(segment: _Segment, entity_type: str, rows: int, dim: int, verify: bool,
                     mmap: bool = False) -> np.ndarray:  # fmt: skip
    """One segment's vectors of `entity_type`, checked against the manifest's digest and shape (memory-mapped
    with `mmap`, for a caller reading a few rows)."""
    path, digest = segment.vectors[entity_type]
    if verify and sha256_file(path) != digest:
        raise IndexCorrupt(f"{path} does not match the sha256 in the manifest")
    stored = np.load(path, allow_pickle=False, mmap_mode="r" if mmap and rows else None)
    if stored.shape != (rows, dim) or stored.dtype != np.float32:
        raise IndexCorrupt(f"{path} has shape {stored.shape} {stored.dtype}, expected ({rows}, {dim}) float32")
    return stored


def _open_searcher(path: Path) -> Any:
    import tantivy

    index = tantivy.Index.open(str(path))
    # A version never changes after publishing: no reload watcher thread, one searcher shared by all queries
    # (tantivy searchers are immutable snapshots and release the GIL while searching).
    index.config_reader(reload_policy="manual")
    return index.searcher()


def _load_table(version_dir: Path, entity_type: str, columns: dict[str, list[Any]], dim: int, verify: bool,
                manifest: dict[str, Any], shards: ShardSelector | None = None) -> _Table:  # fmt: skip
    """One entity type's rows of a version; with `shards`, only the rows of users those shards hold (see
    `search.shards`), searched exactly (the version's HNSW graph holds every row's vector, so it is not loaded)."""
    rows_by_type = manifest.get("rows", manifest["counts"])
    n = int(rows_by_type.get(entity_type, -1))
    keep = None if shards is None else np.asarray(columns["row"], dtype=np.int64)  # `_read_docs` kept these rows
    if keep is not None and len(keep) == n and (not n or keep[-1] == n - 1):
        keep = None
    if keep is None and len(columns["doc_id"]) != n:
        raise IndexCorrupt(f"{entity_type}: the docs files hold {len(columns['doc_id'])} rows, manifest says "
                           f"{rows_by_type}")  # fmt: skip
    segments = _segments(version_dir, manifest)
    delta_rows = [int(d["rows"][entity_type]) for d in manifest.get("deltas", [])]
    sizes = [n - sum(delta_rows), *delta_rows]
    # Sharded: memory-mapped, so only the kept rows' vectors are ever read into RAM.
    parts = [_segment_vectors(seg, entity_type, size, dim, verify, mmap=keep is not None)
             for seg, size in zip(segments, sizes, strict=True)]  # fmt: skip
    ann = _load_ann(version_dir, entity_type, sizes[0], dim, verify, manifest) if keep is None else None
    tail = np.zeros((0, dim), dtype=np.float32)
    if ann is not None:
        # The graph's storage holds the base rows (one copy of them in RAM); delta rows are scanned exactly.
        flat = ann.flat
        if len(parts) > 1:
            tail = np.concatenate(parts[1:])
    else:
        stacked = _stack_rows(parts, keep, dim)
        flat = FlatVectors.from_array(stacked)
        del stacked
    del parts
    tombstones = read_tombstones(version_dir, manifest, entity_type, verify)
    alive = np.ones(n, dtype=bool)
    alive[tombstones] = False
    live = n - len(tombstones)
    if live != manifest["counts"].get(entity_type, -1):
        raise IndexCorrupt(f"{entity_type}: {live} live rows, manifest counts {manifest['counts']}")
    searcher = _open_searcher(version_dir / "bm25" / entity_type)
    if searcher.num_docs != live:
        raise IndexCorrupt(f"bm25/{entity_type} holds {searcher.num_docs} docs, expected {live}")
    local_of = None
    if keep is not None:
        local_of = np.full(n, -1, dtype=np.int64)
        local_of[keep] = np.arange(len(keep))
        alive = alive[keep]
    n_loaded = len(columns["doc_id"])
    doc_ids = [str(d) for d in columns["doc_id"]]
    id_rank = np.empty(n_loaded, dtype=np.int64)
    id_rank[np.argsort(np.asarray(doc_ids, dtype=object), kind="stable")] = np.arange(n_loaded)
    live_rows = np.flatnonzero(alive).tolist()
    return _Table(
        entity_type=entity_type,
        doc_ids=doc_ids,
        row_of={doc_ids[i]: i for i in live_rows},
        id_rank=id_rank,
        payloads=list(columns["payload"]),
        texts=list(columns["text"]),
        strings={name: _Column.encode(columns[name]) for name in _STRING_FILTER_FIELDS},
        created_at=np.asarray(columns["created_at"], dtype=np.int64),
        expires_at=np.asarray([_NEVER if e is None else e for e in columns["expires_at"]], dtype=np.int64),
        vectors=flat.vectors,
        flat=flat,
        ann=ann,
        tail=tail,
        alive=None if alive.all() else alive,
        live=len(live_rows),
        bm25_live=live,
        local_of=local_of,
        bm25_schema=_bm25_schema(),
        searcher=searcher,
    )


def _empty_table(entity_type: str, dim: int) -> _Table:
    """The rows of an entity type a version built before that type existed holds: none."""
    flat = FlatVectors.from_array(np.zeros((0, dim), dtype=np.float32))
    return _Table(entity_type=entity_type, doc_ids=[], row_of={}, id_rank=np.zeros(0, dtype=np.int64), payloads=[],
                  texts=[], strings={name: _Column.encode([]) for name in _STRING_FILTER_FIELDS},
                  created_at=np.zeros(0, dtype=np.int64), expires_at=np.zeros(0, dtype=np.int64), vectors=flat.vectors,
                  flat=flat, ann=None, tail=np.zeros((0, dim), dtype=np.float32), alive=None, live=0, bm25_live=0,
                  local_of=None, bm25_schema=None, searcher=None)  # fmt: skip


def _stack_rows(parts: Sequence[np.ndarray], keep: np.ndarray | None, dim: int) -> np.ndarray:
    """The segments' vectors as one matrix, only the rows `keep` names (global row numbers) when given."""
    if not parts:
        return np.zeros((0, dim), dtype=np.float32)
    if keep is None:
        return np.concatenate(parts)
    out = np.empty((len(keep), dim), dtype=np.float32)
    start = filled = 0
    for part in parts:
        inside = keep[(keep >= start) & (keep < start + len(part))] - start
        out[filled : filled + len(inside)] = part[inside]
        filled += len(inside)
        start += len(part)
    return out


def _load_ann(version_dir: Path, entity_type: str, n: int, dim: int, verify: bool,
              manifest: dict[str, Any]) -> HnswVectors | None:  # fmt: skip
    """The entity type's HNSW graph if the manifest lists one (checked against its digest with `verify`)."""
    entry = manifest.get("ann", {}).get(entity_type)
    if entry is None:
        return None
    path = version_dir / entry["path"]
    if entry.get("kind") != ANN_KIND:
        raise IndexCorrupt(f"{path}: unknown ANN kind {entry.get('kind')!r}, expected {ANN_KIND!r}")
    try:
        digest_ok = not verify or sha256_file(path) == entry["sha256"]
    except OSError as exc:
        raise IndexCorrupt(f"{path} cannot be read: {exc}") from None
    if not digest_ok:
        raise IndexCorrupt(f"{path} does not match the sha256 in the manifest")
    try:
        return HnswVectors.read(path, n, dim, HnswParams.from_manifest(entry["params"]))
    except (OSError, RuntimeError, ValueError) as exc:  # faiss reports unreadable files as RuntimeError
        raise IndexCorrupt(f"{path} cannot be loaded: {exc}") from None


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

    def __init__(self, version_dir: Path, manifest: dict[str, Any], tables: dict[str, _Table]) -> None:
        self.path = version_dir
        self.manifest = manifest
        self.version: str = manifest["version"]
        self.embedder_model_id: str = manifest["embedder"]["model_id"]
        self.dim: int = int(manifest["embedder"]["dim"])
        self._tables = tables
        self.shards: ShardSelector | None = None  # the shards loaded; None = the whole version

    @classmethod
    def load(cls, index_root: LakePath, version: str | None = None, *, verify: bool = True,
             shards: ShardSelector | None = None) -> LoadedIndex:  # fmt: skip
        """Open `version` under `index_root` (None = the one CURRENT points at). With `verify`, vector files
        are checked against the manifest's sha256. With `shards`, only those shards' users' documents are loaded
        (and shared ones); searches for them answer as the whole version does (`search.shards`)."""
        version_dir = _resolve_version_dir(index_root, version)
        manifest = json.loads((version_dir / "manifest.json").read_text())
        if manifest.get("format_version") not in _READABLE_FORMATS:
            raise IndexCorrupt(f"{version_dir}: format_version {manifest.get('format_version')}, "
                               f"need one of {_READABLE_FORMATS}")  # fmt: skip
        dim = int(manifest["embedder"]["dim"])
        columns = _read_docs([segment.docs for segment in _segments(version_dir, manifest)], shards)
        tables = {t: _load_table(version_dir, t, columns[t], dim, verify, manifest, shards) if t in manifest["counts"]
                  else _empty_table(t, dim) for t in ENTITY_TYPES}  # fmt: skip
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

    def vector(self, entity_type: str, doc_id: str) -> np.ndarray | None:
        """The stored (unit) vector of one doc, or None if this version does not hold it."""
        table = self._table(entity_type)
        row = table.row_of.get(doc_id)
        return None if row is None else table.gather([row])[0]

    def payload(self, entity_type: str, doc_id: str) -> dict | None:
        """The stored payload of one doc (a fresh dict), or None if this version does not hold it."""
        table = self._table(entity_type)
        row = table.row_of.get(doc_id)
        return None if row is None else json.loads(table.payloads[row])

    def _table(self, entity_type: str) -> _Table:
        try:
            return self._tables[entity_type]
        except KeyError:
            raise ValueError(f"unknown entity_type {entity_type!r}; expected one of {ENTITY_TYPES}") from None

    # -- filters

    def _select(self, table: _Table, filters: SearchFilters, exclude_ids: frozenset[str]) -> _Selection:
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

    def _filter_queries(self, table: _Table, filters: SearchFilters, selection: _Selection) -> list[Any]:
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
            must(Q.range_query(schema, "created_at", tantivy.FieldType.Integer,
                               lower_bound=filters.start_time, upper_bound=filters.end_time))  # fmt: skip
        if "expires_at" in selection.clauses:
            must(Q.range_query(schema, "expires_at", tantivy.FieldType.Integer, lower_bound=selection.now,
                               include_lower=False))  # fmt: skip
        return clauses

    # -- legs

    def _vector_leg(self, table: _Table, selection: _Selection, query_vector: np.ndarray, threshold: float,
                    limit: int) -> dict[int, float]:  # fmt: skip
        """Nearest admissible rows at or above `threshold`: row -> cosine, best first (ties by doc_id).

        Exact unless the type has an HNSW graph and the filters admit many rows; then the graph walk is confined
        to the admitted rows by a faiss ID selector (see `HnswVectors.search`)."""
        mask = selection.mask
        if table.ann is not None:
            rows, sims = table.ann.search(query_vector, limit, None if selection.admitted == table.size else
                                          mask[: table.tail_start])  # fmt: skip
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

    def _bm25_leg(self, table: _Table, selection: _Selection, terms: tuple[str, ...], filters: SearchFilters,
                  exclude_ids: frozenset[str], limit: int) -> list[int]:  # fmt: skip
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
        terms, blank = _analyse_query(query)
        use_vector = q is not None and mode in ("hybrid", "vector")
        use_bm25 = mode == "fts" or (mode == "hybrid" and not blank) or not use_vector
        if not use_vector and blank:
            return self._most_recent(table, selection.mask, top_k)

        limit = top_k * _CANDIDATES_PER_RESULT
        vector_hits = self._vector_leg(table, selection, q, threshold, limit) if use_vector else {}
        bm25_rows = self._bm25_leg(table, selection, terms, filters, exclude_ids, limit) if use_bm25 else []
        return self._fuse(table, bm25_rows, vector_hits, q if use_vector else None, top_k, rrf_k, bm25_weight,
                          vector_weight)  # fmt: skip

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

    def _most_recent(self, table: _Table, mask: np.ndarray, top_k: int) -> list[SearchHit]:
        rows = np.flatnonzero(mask)
        top, _ = _top_rows(rows, table.created_at[rows].astype(np.float64), table.id_rank, top_k)
        return [self._hit(table, int(r), 0.0, None, None, None) for r in top]

    def _fuse(self, table: _Table, bm25_rows: list[int], vector_hits: dict[int, float], q: np.ndarray | None,
              top_k: int, rrf_k: int, bm25_weight: float, vector_weight: float) -> list[SearchHit]:  # fmt: skip
        bm25_rank = {row: i + 1 for i, row in enumerate(bm25_rows)}
        vector_rank = {row: i + 1 for i, row in enumerate(vector_hits)}
        scores: dict[int, float] = {}
        for row, rank in bm25_rank.items():
            scores[row] = scores.get(row, 0.0) + bm25_weight / (rrf_k + rank)
        for row, rank in vector_rank.items():
            scores[row] = scores.get(row, 0.0) + vector_weight / (rrf_k + rank)
        ranked = sorted(scores, key=lambda row: (-scores[row], table.doc_ids[row]))[:top_k]
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
    def _hit(table: _Table, row: int, score: float, bm25_rank: int | None, vector_rank: int | None,
             similarity: float | None) -> SearchHit:  # fmt: skip
        return SearchHit(
            doc_id=table.doc_ids[row],
            entity_type=table.entity_type,
            score=float(score),
            payload=json.loads(table.payloads[row]),  # fresh per hit: callers may mutate it
            bm25_rank=bm25_rank,
            vector_rank=vector_rank,
            similarity=similarity,
        )
