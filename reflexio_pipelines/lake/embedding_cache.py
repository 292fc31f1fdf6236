"""The embedding cache: document vectors by (embedder model id, sha256 of the normalised text), in the lake.

An index build asks the cache for the vectors of every text it needs and embeds only the others
(`search.build.build_index`); the vectors stored are exactly the float32 rows the build wrote into its version, so
a build served from the cache gives the same bytes as one that embedded everything.

Table `tables/embedding_cache` (schema `lake.schemas.EMBEDDING_CACHE`), partitioned by `bucket` (the first byte of
the text hash modulo `BUCKETS`). A lookup reads only the partitions of the hashes it needs, and in two steps: the key
columns of their files, then the vectors of only the rows that matched (most texts a delta build looks up are new:
reading every candidate file's vectors made a 120-text lookup on a 1M-vector cache take 2.9 s, measured). Rows
name their owners: every user whose document held the text in a build since the row was stored (a profile's or user
playbook's user; an agent playbook's member users; a turn's user), so a text two users wrote, or an agent playbook
worded like one of its members' playbooks, lists them all. Owners a cached text gains later are appended as owner
rows (same key, an empty vector) rather than rewriting the vector row's bucket: rewriting the buckets of 20 claimed
texts on a 1M-vector cache took 22 s, and short turns ("thanks!") gain owners in almost every build.

- **Concurrency.** Reads and writes hold the lake lock `embedding-cache`. A build stores its new vectors and owner
  rows in one Delta commit (an append); under the lock it first drops texts another build added since its lookup,
  so two racing builds may embed a text twice but store it once. When a bucket has collected `MAX_SMALL_FILES`
  small files, they are compacted (a second commit, now and then).
- **Erasure.** `erase_owner` deletes every row of a text whose owners (over all its rows) include the user, also
  texts other users share (the next build embeds the text again for them), rewriting only the buckets that held
  such rows, then purges the table's history (`Lake.purge_history`). A build that read its documents before an
  erasure and stores its vectors after it would put the user's texts back: every erasure bumps an epoch
  (`state/embedding_cache/erasure_epoch`), an `EmbeddingCache` notes it when opened (before the build reads
  documents) and stores nothing if it changed.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.storage import (
    LakePath,
    delta_options,
    delta_uri,
    open_delta,
    pruned_dataset,
    read_delta,
    write_bytes,
)

CACHE_TABLE = "embedding_cache"
LOCK = "embedding-cache"
#: Hash partitions. Few enough that a build's append writes at most this many files; enough that a lookup of a
#: handful of texts reads a small share of the table.
BUCKETS = 64
#: Small files (under `APPEND_FILE_BYTES`) a bucket may collect from builds' appends before a build merges them into
#: one. Merging only those keeps the build's share of compaction to a few small files: merging every file under
#: 8 MB, as builds did, rewrote most of a 1M-vector cache's 2 GB every eighth build (6.9 s of one store, measured).
MAX_SMALL_FILES = 8
APPEND_FILE_BYTES = 1 << 20
#: The files `compact` merges buckets into (after a bulk fill; the nightly index compaction does not call it yet):
#: fewer files per lookup.
COMPACT_TARGET_BYTES = 8 << 20
#: Compaction and owner rewrites leave the files they replaced on disk for readers of an older snapshot (an analyst's
#: DuckDB view); they are deleted once they have been out of the table this long (erasure deletes them at once).
REMOVED_FILE_RETENTION_HOURS = 1
#: Rows per Parquet row group of the cache's files. A lookup reads the vectors of a matching row's whole row group:
#: 1,024 rows are 1.5 MB of 384-d vectors, where files written with the writer's default (one row group per file)
#: made a 20-hit lookup on a 1M-vector cache decode ~500 MB (1.0 s of its 1.4 s, measured).
ROW_GROUP_ROWS = 1024


def text_key(text: str) -> str:
    """The cache key of a normalised text: sha256 of its UTF-8 bytes, hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def bucket_of(key: str) -> int:
    """The partition of a text key."""
    return int(key[:2], 16) % BUCKETS


@dataclass
class CacheStats:
    """What one build asked of the cache: texts looked up, served from it, embedded (missing), stored (new rows
    committed), cached rows that gained owners, texts not stored because an erasure ran meanwhile, and data files
    read (those of the buckets looked up) of the files in the table."""

    texts: int = 0
    cached: int = 0
    embedded: int = 0
    stored: int = 0
    owners_added: int = 0
    not_stored_after_erasure: int = 0
    files_read: int = 0
    files_total: int = 0

    def metadata(self) -> dict[str, int]:
        """The counts as run metadata, `embedding_cache/<name>`."""
        return {f"embedding_cache/{name}": value for name, value in asdict(self).items()}


class EmbeddingCache:
    """The cache as one index build uses it (`search.build.VectorCache`).

    Open it BEFORE reading the documents the build embeds: it notes the erasure epoch then, and `store` writes
    nothing if an erasure ran since (the documents may hold the erased user's texts). `stats` counts this build's use.
    """

    def __init__(self, lake: Lake) -> None:
        self._lake = lake
        self._epoch = read_epoch(lake)
        self._owners: dict[str, frozenset[str]] = {}  # key -> owners stored, for the keys `lookup` found
        self._looked_at: frozenset[str] = frozenset()  # the data files `lookup` read the keys of
        self.stats = CacheStats()

    def lookup(self, model_id: str, dim: int, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """text -> cached (dim,) float32 vector, for the `texts` (normalised, distinct) the cache holds for this
        model and dimension."""
        keys = [text_key(t) for t in texts]
        with self._lake.lock(LOCK):
            rows, self._looked_at = _scan(
                self._lake, keys, model_id, dim, ["text_sha256", "vector", "owner_user_ids"], self.stats
            )
        found = _vectors(rows, dim)
        self._owners.update({k: v for k, v in _owners(rows).items() if k in found})
        out = {text: found[key] for text, key in zip(texts, keys) if key in found}
        self.stats.texts += len(texts)
        self.stats.cached += len(out)
        return out

    def store(
        self, model_id: str, dim: int, texts: Sequence[str], vectors: np.ndarray, owners: Mapping[str, frozenset[str]]
    ) -> None:
        """In one commit: store newly embedded `texts` (distinct; row i of `vectors` belongs to texts[i]), skipping
        those another build stored meanwhile, and add owners to cached rows that lack some. `owners` maps every text
        of the build to the users whose words it holds."""
        self.stats.embedded += len(texts)
        keys = [text_key(t) for t in texts]
        claims = {text_key(t): users for t, users in owners.items() if users}
        grown = {k for k, users in claims.items() if k in self._owners and users - self._owners[k]}
        if not texts and not grown:
            return
        with self._lake.lock(LOCK):
            if read_epoch(self._lake) != self._epoch:
                self.stats.not_stored_after_erasure += len(texts) + len(grown)
                return
            # What builds committed since the lookup (usually nothing: only files added since are read)
            since, _ = _scan(
                self._lake, keys + sorted(grown), model_id, dim, ["text_sha256", "owner_user_ids"], skip=self._looked_at
            )
            stored = _owners(since)
            fresh = [i for i, key in enumerate(keys) if key not in stored]
            # Texts another build stored meanwhile may lack owners this build saw: claimed like the looked-up ones.
            known = {
                k: self._owners.get(k, frozenset()) | stored.get(k, frozenset())
                for k in (self._owners.keys() | stored.keys()) & claims.keys()
            }
            claimed = {k: claims[k] - owners for k, owners in known.items() if claims[k] - owners}
            new = _rows(
                model_id,
                dim,
                [keys[i] for i in fresh],
                np.asarray(vectors)[fresh],
                [claims.get(keys[i], frozenset()) for i in fresh],
            )
            if claimed:
                new = pa.concat_tables([new, _owner_rows(model_id, dim, claimed)])
            if new.num_rows:
                _write(self._lake, new)
                _compact(self._lake, sorted(set(new.column("bucket").to_pylist())))
                _vacuum_removed(self._lake)
            self.stats.stored += len(fresh)
            self.stats.owners_added += len(claimed)


def erase_owner(lake: Lake, user_id: str) -> tuple[int, int]:
    """Delete every cached vector whose owners include `user_id` and purge the table's history; returns (rows
    deleted, data files purged). Bumps the erasure epoch first, so a build that opened its cache before this call
    stores nothing afterwards."""
    path = lake.table_path(CACHE_TABLE)
    deleted = 0
    with lake.lock(LOCK):
        write_bytes(_epoch_path(lake), str(read_epoch(lake) + 1).encode())
        if _exists(path):
            table = open_delta(path)
            owners = table.to_pyarrow_table(columns=["text_sha256", "owner_user_ids", "bucket"])  # no vectors: small
            owned = owners.filter(_owned_by(owners, user_id))
            buckets = sorted(set(owned.column("bucket").to_pylist()))
            if buckets:
                rows = read_delta(table, [("bucket", "in", buckets)])
                # every row of an owned text: its vector row may predate the owner row that names the user
                gone = pc.is_in(rows.column("text_sha256"), value_set=owned.column("text_sha256"))
                keep = rows.filter(pc.invert(gone))
                deleted = rows.num_rows - keep.num_rows
                # The predicate names bucket numbers only, never the user (see `Lake.replace_windows`).
                _write(lake, keep, replacing=f"bucket IN ({', '.join(map(str, buckets))})")
        # Always: earlier versions can hold the user's vectors even when the current one holds none.
        purged = lake.purge_history(CACHE_TABLE)
    return deleted, purged


def read_epoch(lake: Lake) -> int:
    """How many erasures have touched the cache (0 before the first)."""
    path = _epoch_path(lake)
    return int(path.read_text()) if path.exists() else 0


def _epoch_path(lake: Lake) -> LakePath:
    return lake.root / "state" / "embedding_cache" / "erasure_epoch"


def _exists(path: LakePath) -> bool:
    return (path / "_delta_log").exists()


def _owned_by(table: pa.Table, user_id: str) -> pa.Array:
    """Per row: does `owner_user_ids` list `user_id`."""
    owners = table.column("owner_user_ids").combine_chunks()
    hit = np.zeros(table.num_rows, dtype=bool)
    flat = pc.fill_null(pc.equal(pc.list_flatten(owners), user_id), False).to_numpy(zero_copy_only=False)
    hit[pc.list_parent_indices(owners).to_numpy()[flat]] = True
    return pa.array(hit)


def _scan(
    lake: Lake,
    keys: Sequence[str],
    model_id: str,
    dim: int,
    columns: list[str],
    stats: CacheStats | None = None,
    *,
    skip: frozenset[str] = frozenset(),
) -> tuple[pa.Table, frozenset[str]]:
    """The rows (vector and owner rows) of `keys` for this model and dimension, read from their buckets' data files
    except `skip`: the key columns of every candidate file (one threaded scan), then `columns` from only the files
    that hold a match. Returns the rows and the files looked at (with `skip`): a later scan of the same keys under
    the lock reads only files committed since."""
    path = lake.table_path(CACHE_TABLE)
    if not keys or not _exists(path):
        return _empty(columns), skip
    table = open_delta(path)
    buckets = sorted({bucket_of(k) for k in keys})
    dataset = pruned_dataset(table, [("bucket", "in", buckets)])
    fragments = [f for f in dataset.get_fragments() if f.path not in skip]
    if stats is not None:
        stats.files_total = len(table.file_uris())
        stats.files_read += len(fragments)
    looked_at = skip | {f.path for f in fragments}

    def files(subset: list) -> ds.FileSystemDataset:
        return ds.FileSystemDataset(subset, dataset.schema, dataset.format, dataset.filesystem)

    match = (
        pc.field("text_sha256").isin(pa.array(sorted(set(keys)), pa.string()))
        & (pc.field("model_id") == model_id)
        & (pc.field("dim") == dim)
    )
    held = set(files(fragments).to_table(columns=["__filename"], filter=match).column("__filename").to_pylist())
    if not held:
        return _empty(columns), looked_at
    return files([f for f in fragments if f.path in held]).to_table(columns=columns, filter=match), looked_at


def _empty(columns: list[str]) -> pa.Table:
    return pa.table({c: pa.array([], TABLES[CACHE_TABLE].field(c).type) for c in columns})


def _owners(rows: pa.Table) -> dict[str, frozenset[str]]:
    """text_sha256 -> its owners over all its scanned rows (the vector row and any owner rows)."""
    out: dict[str, frozenset[str]] = {}
    for key, owners in zip(rows.column("text_sha256").to_pylist(), rows.column("owner_user_ids").to_pylist()):
        out[key] = out.get(key, frozenset()) | frozenset(owners or ())
    return out


def _owner_rows(model_id: str, dim: int, claims: Mapping[str, frozenset[str]]) -> pa.Table:
    """Rows that add owners to cached texts: the key, the new owners and an empty vector (`_vectors` skips it)."""
    keys = sorted(claims)
    return _rows(model_id, dim, keys, np.empty((len(keys), 0), np.float32), [claims[k] for k in keys])


def _vectors(rows: pa.Table, dim: int) -> dict[str, np.ndarray]:
    """text_sha256 -> (dim,) float32 vector of scanned rows."""
    vectors = rows.column("vector").combine_chunks()
    whole = pc.equal(pc.list_value_length(vectors), dim).to_numpy(zero_copy_only=False)
    if not whole.all():  # a row of another length cannot be this model's: ignore it (the text is embedded anew)
        rows, vectors = rows.filter(pa.array(whole)), vectors.filter(pa.array(whole))
    matrix = pc.list_flatten(vectors).to_numpy(zero_copy_only=False).astype(np.float32, copy=False).reshape(-1, dim)
    return dict(zip(rows.column("text_sha256").to_pylist(), matrix))


def _rows(model_id: str, dim: int, keys: list[str], vectors: np.ndarray, owners: Sequence[frozenset[str]]) -> pa.Table:
    """New cache rows, sorted by (bucket, key) so each bucket's file is in key order; `vectors` is (n, dim), or
    (n, 0) for owner rows."""
    order = sorted(range(len(keys)), key=lambda i: (bucket_of(keys[i]), keys[i]))
    width = vectors.shape[1]
    flat = np.ascontiguousarray(vectors[order], dtype=np.float32).reshape(-1)
    offsets = pa.array(np.arange(len(order) + 1, dtype=np.int32) * width)
    return pa.table(
        {
            "model_id": [model_id] * len(order),
            "dim": pa.array([dim] * len(order), pa.int32()),
            "text_sha256": [keys[i] for i in order],
            "vector": pa.ListArray.from_arrays(offsets, pa.array(flat, pa.float32())),
            "owner_user_ids": [sorted(owners[i]) for i in order],
            "created_at": [int(time.time())] * len(order),
            "bucket": pa.array([bucket_of(keys[i]) for i in order], pa.int32()),
        },
        schema=TABLES[CACHE_TABLE],
    )


def _write(lake: Lake, rows: pa.Table, *, replacing: str | None = None) -> None:
    """Append `rows` to the cache table or, with `replacing` (a predicate), put them in place of the rows it
    matches."""
    from deltalake import write_deltalake

    path = lake.table_path(CACHE_TABLE)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Key order within each bucket's file, also for rewrites (files' key statistics stay narrow).
    rows = (
        rows.select(TABLES[CACHE_TABLE].names)
        .cast(TABLES[CACHE_TABLE])
        .sort_by([("bucket", "ascending"), ("text_sha256", "ascending")])
    )
    uri, options, properties = delta_uri(path), delta_options(path), _writer_properties()
    if replacing is None:
        write_deltalake(
            uri, rows, mode="append", partition_by=["bucket"], storage_options=options, writer_properties=properties
        )
    else:
        write_deltalake(
            uri,
            rows,
            mode="overwrite",
            predicate=replacing,
            partition_by=["bucket"],
            storage_options=options,
            writer_properties=properties,
        )


def _writer_properties() -> Any:
    from deltalake import WriterProperties

    return WriterProperties(max_row_group_size=ROW_GROUP_ROWS)


def compact(lake: Lake) -> None:
    """Merge every bucket's files under `COMPACT_TARGET_BYTES` into files of about that size (after a bulk fill),
    so a lookup opens few files per bucket."""
    if _exists(lake.table_path(CACHE_TABLE)):
        with lake.lock(LOCK):
            _compact(lake, list(range(BUCKETS)), small_bytes=COMPACT_TARGET_BYTES, min_files=2)
            _vacuum_removed(lake)


def _compact(
    lake: Lake, buckets: list[int], *, small_bytes: int = APPEND_FILE_BYTES, min_files: int = MAX_SMALL_FILES
) -> None:
    """Merge the files under `small_bytes` of those of `buckets` that hold `min_files` of them into files of up to
    `small_bytes` (caller holds LOCK)."""
    table = open_delta(lake.table_path(CACHE_TABLE))
    actions = pa.table(table.get_add_actions(flatten=True))
    small: dict[int, int] = {}
    for bucket, size in zip(actions.column("partition.bucket").to_pylist(), actions.column("size_bytes").to_pylist()):
        if size < small_bytes:
            small[bucket] = small.get(bucket, 0) + 1
    full = [b for b in buckets if small.get(b, 0) >= min_files]
    if not full:
        return
    table.optimize.compact(
        partition_filters=[("bucket", "in", [str(b) for b in full])],
        target_size=small_bytes,
        writer_properties=_writer_properties(),
    )


def _vacuum_removed(lake: Lake) -> None:
    """Delete the files compactions and owner rewrites took out of the table `REMOVED_FILE_RETENTION_HOURS` ago
    (a no-op, and no commit, while there are none)."""
    open_delta(lake.table_path(CACHE_TABLE)).vacuum(
        retention_hours=REMOVED_FILE_RETENTION_HOURS, dry_run=False, enforce_retention_duration=False
    )
