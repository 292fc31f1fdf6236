"""Incremental index versions: the next version costs in proportion to the documents that changed.

`build_index` writes a version that is one base segment. `extend_index` makes the next version from a previous one
without touching any of its files:

- every file of the previous version is hard-linked into the new one (tantivy's small JSON files are copied,
  since tantivy replaces them), so the previous version stays exactly as it was and keeps serving;
- rows of docs that were deleted or changed are tombstoned (`tombstones/<type>.npy`, and deleted in tantivy);
- new and changed docs become a delta segment (`delta/<version>/docs.parquet`, `vectors/<type>.npy`), with row
  numbers after the previous version's last row, embedded through the vector cache, and added to BM25 as a new
  tantivy segment (BM25 statistics stay global across segments, as in one index);
- the HNSW graph is shared as it is: it covers the base rows, delta rows are scanned exactly;
- beyond `MAX_DELTAS` segments the deltas are folded into one (their files concatenated: rows keep their
  numbers, nothing is embedded or indexed again).

`needs_compaction` says when a full rebuild (a new base without tombstones, the graph over every row) is due; the
`search_index` asset does it then, or when asked (`compact`, the daily compaction schedule). A full rebuild from the
same lake gives the same documents, vectors and search results (BM25 scores can differ slightly while tombstones
exist: tantivy counts deleted docs in its term statistics until its segments merge).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from reflexio_pipelines.files import sha256_file
from reflexio_pipelines.learning.embedding import Embedder
from reflexio_pipelines.search.ann import HNSW_MIN_ROWS, HnswParams
from reflexio_pipelines.search.build import (
    FORMAT_VERSION,
    VectorCache,
    doc_fingerprint,
    embed_docs,
    validate_docs,
    write_bm25,
    write_docs_parquet,
)
from reflexio_pipelines.search.tables import read_tombstones
from reflexio_pipelines.search.types import ENTITY_TYPES, IndexModelMismatch, SearchDoc
from reflexio_pipelines.search.versions import current_version, local_copy, stage_index, stage_version, version_segments
from reflexio_pipelines.storage import LakePath

MAX_DELTAS = 8  # segments beyond the base before they are folded into one (bounds files per version and load)
# A full rebuild is due once tombstoned plus delta rows exceed this share of the base (and at least
# COMPACT_MIN_ROWS): searches then scan more dead and ungraphed rows than they would after a rebuild.
COMPACT_FRACTION = 0.25
COMPACT_MIN_ROWS = 1000
_TANTIVY_LOCKS = (".tantivy-writer.lock", ".tantivy-meta.lock")

Fingerprints = dict[str, dict[str, tuple[int, str]]]  # entity type -> doc_id -> (row, fingerprint), live docs


@dataclass
class IndexChanges:
    """What a new version changes against the previous one: docs to (re)index and doc ids to drop."""

    upserts: list[SearchDoc] = field(default_factory=list)
    deleted: dict[str, list[str]] = field(default_factory=dict)  # entity type -> doc ids no longer in the lake
    replaced: dict[str, int] = field(default_factory=dict)  # entity type -> upserts of a doc id the prior holds

    @property
    def empty(self) -> bool:
        return not self.upserts and not any(self.deleted.values())

    def counts(self) -> dict[str, int]:
        """How many docs are upserted and deleted (run metadata)."""
        return {"docs_upserted": len(self.upserts), "docs_deleted": sum(len(v) for v in self.deleted.values())}


def live_fingerprints(version_dir: Path, manifest: Mapping[str, Any]) -> Fingerprints | None:
    """The previous version's live docs with their rows and fingerprints; None when the version predates
    fingerprints (format 1), so it can only be replaced by a full build."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if manifest.get("format_version") != FORMAT_VERSION:
        return None
    columns = ["entity_type", "row", "doc_id", "fingerprint"]
    table = pa.concat_tables([pq.read_table(s.docs, columns=columns) for s in version_segments(version_dir, manifest)])
    data = table.to_pydict()
    out: Fingerprints = {t: {} for t in ENTITY_TYPES}
    dead = {t: set(read_tombstones(version_dir, manifest, t).tolist()) for t in ENTITY_TYPES}
    for entity_type, row, doc_id, fingerprint in zip(
        data["entity_type"], data["row"], data["doc_id"], data["fingerprint"], strict=True
    ):
        if row not in dead[entity_type]:
            out[entity_type][doc_id] = (row, fingerprint)
    return out


def served_doc_ids(index_root: LakePath, entity_type: str, doc_ids: Iterable[str]) -> frozenset[str]:
    """Which of `doc_ids` the served version holds live as `entity_type` docs (none before the first version). Reads
    the two id columns of the matching rows only."""
    import pyarrow.parquet as pq

    wanted = sorted(set(doc_ids))
    current = current_version(index_root)
    if current is None or not wanted:
        return frozenset()
    version_dir = local_copy(index_root, current)
    manifest = json.loads((version_dir / "manifest.json").read_text())
    dead = set(read_tombstones(version_dir, manifest, entity_type).tolist())
    held: set[str] = set()
    for segment in version_segments(version_dir, manifest):
        table = pq.read_table(
            segment.docs,
            columns=["row", "doc_id"],
            filters=[("entity_type", "=", entity_type), ("doc_id", "in", wanted)],
        )
        held.update(
            d for d, r in zip(table["doc_id"].to_pylist(), table["row"].to_pylist(), strict=True) if r not in dead
        )
    return frozenset(held)


#: Entity types whose docs belong to one user: a scoped build (`DocScope`) rebuilds only some users' docs of these.
USER_TYPES = ("profile", "user_playbook", "interaction")


@dataclass(frozen=True)
class DocScope:
    """A build's docs hold, for each user type, only the docs of `users[type]` (every doc of the other types);
    `owners` names the user of each prior doc of those types, so the prior docs of other users are kept as they
    are."""

    users: Mapping[str, frozenset[str]]
    owners: dict[str, dict[str, str | None]]

    @classmethod
    def of(cls, users: frozenset[str], docs: Sequence[SearchDoc], owners: dict[str, dict[str, str | None]]) -> DocScope:
        """The scope of a build whose docs hold the profiles and user playbooks of `users`, and the turns of those
        users and of the users with turns new to the version (search/documents.py `scoped_turn_rows`): every turn
        doc's user is in scope."""
        turn_users = users | {d.user_id for d in docs if d.entity_type == "interaction" and d.user_id}
        return cls({"profile": users, "user_playbook": users, "interaction": turn_users}, owners)


def prior_owners(version_dir: Path, manifest: Mapping[str, Any]) -> dict[str, dict[str, str | None]]:
    """Per user type: doc id -> user id of every doc a version's segments hold (two columns read)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = ["entity_type", "doc_id", "user_id"]
    data = pa.concat_tables([pq.read_table(s.docs, columns=columns) for s in version_segments(version_dir, manifest)])
    out: dict[str, dict[str, str | None]] = {t: {} for t in USER_TYPES}
    for entity_type, doc_id, user_id in zip(*(data[c].to_pylist() for c in columns), strict=True):
        if entity_type in out:
            out[entity_type][doc_id] = user_id
    return out


def plan_changes(prior: Fingerprints, docs: Sequence[SearchDoc], scope: DocScope | None = None) -> IndexChanges:
    """The docs whose fingerprint is new or differs from `prior`, and the prior doc ids `docs` no longer hold
    (with `scope`, only prior docs of the scope's users can be missing). Refuses the same bad docs `build_index`
    refuses."""
    by_type = validate_docs(docs)
    changes = IndexChanges()
    for entity_type in ENTITY_TYPES:
        known = prior.get(entity_type, {})
        for doc in by_type[entity_type]:
            seen = known.get(doc.doc_id)
            if seen is None or seen[1] != doc_fingerprint(doc):
                changes.upserts.append(doc)
                if seen is not None:
                    changes.replaced[entity_type] = changes.replaced.get(entity_type, 0) + 1
        present = {doc.doc_id for doc in by_type[entity_type]}
        candidates = set(known)
        if scope is not None and entity_type in scope.users:
            owners = scope.owners.get(entity_type, {})
            candidates = {d for d in candidates if owners.get(d) in scope.users[entity_type]}
        changes.deleted[entity_type] = sorted(candidates - present)
    return changes


def live_counts(prior: Fingerprints, changes: IndexChanges) -> dict[str, int]:
    """Live docs per entity type of the version `changes` make from `prior`'s."""
    inserted = {t: 0 for t in ENTITY_TYPES}
    for doc in changes.upserts:
        inserted[doc.entity_type] += doc.doc_id not in prior[doc.entity_type]
    return {t: len(prior[t]) - len(set(changes.deleted.get(t, ())) & set(prior[t])) + inserted[t] for t in ENTITY_TYPES}


def needs_compaction(
    manifest: Mapping[str, Any], changes: IndexChanges, *, hnsw_min_rows: int = HNSW_MIN_ROWS
) -> str | None:
    """Why the next version should be a full rebuild rather than a delta on `manifest`'s version, or None.

    Small indexes (no HNSW graph) rebuild once dead and delta rows pass `COMPACT_FRACTION` of the base: cheap, and
    it keeps them at one segment. Indexes with a graph wait for the scheduled compaction (rebuilding a graph over
    1M rows takes an hour), unless their delta rows alone would need one (`hnsw_min_rows`)."""
    if int(manifest.get("ann_min_rows", HNSW_MIN_ROWS)) != int(hnsw_min_rows):
        return "the HNSW row threshold changed"
    upserted = {t: 0 for t in ENTITY_TYPES}
    for doc in changes.upserts:
        upserted[doc.entity_type] += 1
    for entity_type in ENTITY_TYPES:
        total = int(manifest.get("rows", manifest["counts"])[entity_type])
        delta = sum(int(d["rows"][entity_type]) for d in manifest.get("deltas", [])) + upserted[entity_type]
        dead = int(manifest.get("tombstones", {}).get(entity_type, {}).get("count", 0))
        # an update tombstones its prior row; a new doc tombstones nothing (counted as dead too, each new doc weighed
        # twice and a growing index rebuilt in full at half the growth: 2 of 3 learning runs under steady publishing)
        dead += len(changes.deleted.get(entity_type, ())) + changes.replaced.get(entity_type, 0)
        base = total - (delta - upserted[entity_type])
        if delta >= hnsw_min_rows:
            return f"{entity_type}: {delta} delta rows would be scanned without a graph"
        graphed = entity_type in manifest.get("ann", {})
        if not graphed and dead + delta > max(COMPACT_MIN_ROWS, COMPACT_FRACTION * base):
            return f"{entity_type}: {dead} dead and {delta} delta rows against a base of {base}"
    return None


def extend_index(
    prev_dir: Path,
    out_dir: Path,
    changes: IndexChanges,
    embedder: Embedder,
    *,
    version: str,
    cache: VectorCache | None = None,
    prior: Fingerprints | None = None,
    watermarks: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """Write the version after `prev_dir` into `out_dir` (absent or empty): `prev_dir`'s files shared by hard link,
    `changes` applied as tombstones and one new delta segment. Returns the new manifest. `prev_dir` is never
    modified. `prior` is `live_fingerprints(prev_dir)` when the caller has it already; `watermarks` replace the
    previous version's (None keeps them). Raises IndexModelMismatch if `embedder` is not the model the previous
    version was built with."""
    started = time.perf_counter()
    manifest = json.loads((prev_dir / "manifest.json").read_text())
    dim = int(embedder.dim)
    if manifest["embedder"] != {"model_id": embedder.model_id, "dim": dim}:
        raise IndexModelMismatch(
            f"version {manifest['version']} holds {manifest['embedder']} vectors, the embedder "
            f"is {embedder.model_id!r} ({dim}-d): a full build is needed"
        )
    prior = prior if prior is not None else live_fingerprints(prev_dir, manifest)
    if prior is None:
        raise ValueError(f"version {manifest['version']} has no fingerprints (format 1): a full build is needed")
    by_type = validate_docs(changes.upserts)
    _link_tree(prev_dir, out_dir)

    rows = {t: int(manifest.get("rows", manifest["counts"])[t]) for t in ENTITY_TYPES}
    norm_texts, vectors = embed_docs(by_type, embedder, cache)

    delta_dir = out_dir / "delta" / version
    (delta_dir / "vectors").mkdir(parents=True)
    write_docs_parquet(delta_dir / "docs.parquet", by_type, first_rows=rows)
    tombstones: dict[str, dict[str, Any]] = {}
    new_vectors: dict[str, np.ndarray] = {}
    offset = 0
    for entity_type in ENTITY_TYPES:
        group = by_type[entity_type]
        new_vectors[entity_type] = vectors[offset : offset + len(group)]
        offset += len(group)
        dead_ids = sorted({*changes.deleted.get(entity_type, ()), *(d.doc_id for d in group)} & set(prior[entity_type]))
        dead_rows = np.asarray([prior[entity_type][d][0] for d in dead_ids], dtype=np.int64)
        tombstones[entity_type] = _write_tombstones(out_dir, prev_dir, manifest, entity_type, dead_rows)
        if group or dead_ids:
            write_bm25(
                out_dir / "bm25" / entity_type,
                group,
                norm_texts[entity_type],
                first_row=rows[entity_type],
                dead_ids=dead_ids,
            )
    deltas = [*manifest.get("deltas", []), _delta_entry(delta_dir, new_vectors)]
    if len(deltas) > MAX_DELTAS:
        deltas = [_fold_deltas(out_dir, deltas, version)]

    now = datetime.now(timezone.utc)
    live = live_counts(prior, changes)
    manifest.update(
        {
            "format_version": FORMAT_VERSION,
            "version": version,
            "created_at": now.isoformat(),
            "created_at_unix": int(now.timestamp()),
            "counts": live,
            "rows": {t: rows[t] + len(by_type[t]) for t in ENTITY_TYPES},
            "deltas": deltas,
            "tombstones": {t: entry for t, entry in tombstones.items() if entry},
            "base_version": manifest.get("base_version", manifest["version"]),
            "build_seconds": round(time.perf_counter() - started, 3),
            "watermarks": dict(manifest.get("watermarks", {}) if watermarks is None else watermarks),
        }
    )
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def _link_tree(src: Path, dst: Path) -> None:
    """`dst` as a copy of `src` made of hard links, except files a new version rewrites: the manifest, the
    tombstones, tantivy's meta files (tantivy replaces them by rename, but a copy keeps that from mattering) and its
    lock files. Falls back to copying across file systems."""
    for path in sorted(src.rglob("*")):
        relative = path.relative_to(src)
        target = dst / relative
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        if relative.parts[0] in ("manifest.json", "tombstones") or path.name in _TANTIVY_LOCKS:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".json":
            shutil.copy2(path, target)
            continue
        try:
            os.link(path, target)
        except OSError:  # another file system (e.g. a remote index's local cache)
            shutil.copy2(path, target)


def _write_tombstones(
    out_dir: Path, prev_dir: Path, manifest: Mapping[str, Any], entity_type: str, dead_rows: np.ndarray
) -> dict[str, Any]:
    """The previous tombstones plus `dead_rows`, written for the new version; its manifest entry ({} if none)."""
    rows = np.union1d(read_tombstones(prev_dir, manifest, entity_type), dead_rows).astype(np.int64)
    if not len(rows):
        return {}
    path = out_dir / "tombstones" / f"{entity_type}.npy"
    path.parent.mkdir(exist_ok=True)
    np.save(path, rows, allow_pickle=False)
    return {"count": int(len(rows)), "sha256": sha256_file(path)}


def _delta_entry(delta_dir: Path, vectors: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Write a delta's vector files; return its manifest entry."""
    digests = {}
    for entity_type in ENTITY_TYPES:
        path = delta_dir / "vectors" / f"{entity_type}.npy"
        np.save(path, np.ascontiguousarray(vectors[entity_type], dtype=np.float32), allow_pickle=False)
        digests[entity_type] = sha256_file(path)
    return {
        "name": delta_dir.name,
        "rows": {t: int(len(vectors[t])) for t in ENTITY_TYPES},
        "docs_sha256": sha256_file(delta_dir / "docs.parquet"),
        "vector_sha256": digests,
    }


def _fold_deltas(out_dir: Path, deltas: Sequence[Mapping[str, Any]], version: str) -> dict[str, Any]:
    """Concatenate the delta segments into one named `version` (rows keep their numbers); the folded segments'
    directories leave the new version. Returns the folded segment's manifest entry."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    dirs = [out_dir / "delta" / d["name"] for d in deltas]
    table = pa.concat_tables([pq.read_table(d / "docs.parquet") for d in dirs])
    vectors = {
        t: np.concatenate([np.load(d / "vectors" / f"{t}.npy", allow_pickle=False) for d in dirs]) for t in ENTITY_TYPES
    }
    folded = out_dir / "delta" / f".fold-{version}"
    (folded / "vectors").mkdir(parents=True)
    pq.write_table(table, folded / "docs.parquet")
    for d in dirs:
        shutil.rmtree(d)
    folded = folded.rename(out_dir / "delta" / version)
    return _delta_entry(folded, vectors)


@dataclass(frozen=True)
class StagedBuild:
    """What `stage_update` staged: the version and how it was made (run metadata)."""

    version: str
    mode: str  # "full" | "incremental" | "unchanged" (nothing changed: the current version is the result)
    reason: str  # why a full build, or "" for an incremental one
    changes: dict[str, int]  # docs upserted / deleted against the previous version
    deltas: int  # delta segments in the staged version
    counts: dict[str, int]  # live docs per entity type the version holds (what its check expects)

    def metadata(self) -> dict[str, Any]:
        return {
            "build_mode": self.mode,
            "full_build_reason": self.reason or "-",
            "delta_segments": self.deltas,
            **self.changes,
        }


def stage_update(
    index_root: LakePath,
    docs: Sequence[SearchDoc],
    embedder: Embedder,
    *,
    cache: VectorCache | None = None,
    compact: bool = False,
    hnsw_min_rows: int = HNSW_MIN_ROWS,
    hnsw_params: HnswParams = HnswParams(),
    watermarks: Mapping[str, int] | None = None,
    users: frozenset[str] | None = None,
    everything: Callable[[], Sequence[SearchDoc]] | None = None,
) -> StagedBuild:
    """Stage the version that serves `docs`: a delta on the current version when that is cheaper and allowed, a
    full build when `compact` is asked, nothing was published yet, the current version cannot be extended (other
    embedder, format 1, an entity type it predates) or `needs_compaction` says so; no new version at all when
    nothing changed (then the current version's watermarks stay). `watermarks` go into the staged manifest.

    With `users`, `docs` hold the profiles and user playbooks of those users only (the users whose rows changed
    since the current version, lake/changes.py), and the turns of those users and of the users with new turns, so a
    delta costs what changed, not the lake; every other user's docs stay as the current version holds them. A full
    build then takes its docs from `everything()`."""
    if users is not None and everything is None:
        raise ValueError("a build scoped to some users needs `everything` for a full build")
    current = current_version(index_root)
    delta: _Delta | str  # the delta to stage, or why a full build is due
    if compact:
        delta = "compaction requested"
    elif current is None:
        delta = "no version published yet"
    else:
        delta = _plan_delta(index_root, current, docs, embedder, users, hnsw_min_rows)
    if isinstance(delta, str):
        if everything is not None and users is not None:
            docs = everything()
        version = stage_index(
            index_root,
            docs,
            embedder,
            hnsw_min_rows=hnsw_min_rows,
            hnsw_params=hnsw_params,
            cache=cache,
            watermarks=watermarks,
        )
        counts = {t: sum(1 for d in docs if d.entity_type == t) for t in ENTITY_TYPES}
        return StagedBuild(version, "full", delta, {"docs_upserted": len(docs), "docs_deleted": 0}, 0, counts)
    changes, prior = delta.changes, delta.prior
    if changes.empty:
        deltas = len(delta.manifest.get("deltas", []))
        return StagedBuild(delta.version, "unchanged", "", changes.counts(), deltas, live_counts(prior, changes))
    prev_dir = delta.prev_dir
    staged: dict[str, Any] = {}

    def build(out_dir: Path, version: str) -> None:
        staged.update(
            extend_index(
                prev_dir, out_dir, changes, embedder, version=version, cache=cache, prior=prior, watermarks=watermarks
            )
        )

    version = stage_version(index_root, build)
    return StagedBuild(version, "incremental", "", changes.counts(), len(staged["deltas"]), live_counts(prior, changes))


@dataclass(frozen=True)
class _Delta:
    """A delta on the current version: its local copy, manifest and live docs' fingerprints, and what changed."""

    version: str
    prev_dir: Path
    manifest: dict[str, Any]
    prior: Fingerprints
    changes: IndexChanges


def _plan_delta(
    index_root: LakePath,
    current: str,
    docs: Sequence[SearchDoc],
    embedder: Embedder,
    users: frozenset[str] | None,
    hnsw_min_rows: int,
) -> _Delta | str:
    """The delta that brings version `current` up to `docs` (see `stage_update`), or why a full build is due."""
    prev_dir = local_copy(index_root, current)
    manifest = json.loads((prev_dir / "manifest.json").read_text())
    prior = live_fingerprints(prev_dir, manifest)
    if prior is None:
        return f"version {current} has no fingerprints (format {manifest.get('format_version')})"
    if manifest["embedder"] != {"model_id": embedder.model_id, "dim": int(embedder.dim)}:
        return f"the embedder changed from {manifest['embedder']['model_id']}"
    if missing := [t for t in ENTITY_TYPES if t not in manifest["counts"]]:
        return f"version {current} predates entity types {missing}"
    scope = None if users is None else DocScope.of(users, docs, prior_owners(prev_dir, manifest))
    changes = plan_changes(prior, docs, scope)
    return needs_compaction(manifest, changes, hnsw_min_rows=hnsw_min_rows) or _Delta(
        current, prev_dir, manifest, prior, changes
    )
