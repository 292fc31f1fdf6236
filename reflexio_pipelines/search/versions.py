"""Index versions under an index root: naming, staging, activating (CURRENT), watermarks, listing, pruning, local
copies of remote versions, and a version's segments. Layout of one version::

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
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Unpack

from reflexio_pipelines.files import TMP_PREFIX, fsync_path, fsync_tree
from reflexio_pipelines.learning.embedding import Embedder
from reflexio_pipelines.search.build import BuildOptions, build_index
from reflexio_pipelines.search.types import ENTITY_TYPES, IndexCorrupt, SearchDoc, SearchIndexError
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

CURRENT_FILE = "CURRENT"
TURNS_WATERMARK = "turns_ingested_through_us"  # manifest watermark: the version holds live turns ingested up to it
_VERSION_RE = re.compile(r"^\d{8}T\d{12}Z-[0-9a-f]{6}$")


def new_version_id() -> str:
    """A lexicographically sortable version name: UTC timestamp with microseconds plus a random suffix."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ") + "-" + secrets.token_hex(3)


def _as_root(index_root: LakePath | str) -> LakePath:
    return lake_path(index_root) if isinstance(index_root, str) else index_root


def stage_index(
    index_root: LakePath, docs: Sequence[SearchDoc], embedder: Embedder, **options: Unpack[BuildOptions]
) -> str:
    """Build a new version under `index_root` (a full build) and make it durable, without serving it yet.

    The pipeline stages, checks, then activates; `publish_index` does both at once. Returns the new version name.
    The HNSW, cache and watermark options are `build_index`'s. `search.incremental.stage_update` stages a delta
    instead.
    """

    def build(out_dir: Path, version: str) -> None:
        build_index(docs, embedder, out_dir, version=version, **options)

    return stage_version(index_root, build)


def stage_version(index_root: LakePath, build: Callable[[Path, str], Any]) -> str:
    """Run `build(directory, version)` for a new version name and make the result durable under `index_root`.

    Readers never see a half-built version: it is built in a hidden temp dir and renamed into place (on object
    storage: built locally and uploaded, manifest last, and a version without a manifest is not listed)."""
    index_root = _as_root(index_root)
    version = new_version_id()
    if is_remote(index_root):
        with tempfile.TemporaryDirectory(prefix="reflexio-index-") as build_dir:
            local = Path(build_dir) / version
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


def activate_if_newer(index_root: LakePath, version: str) -> bool:
    """Point CURRENT at `version` unless the served version is newer (names sort by when their build read the lake):
    two builds can overlap (a learning run's and the next run's, or an `index_job`'s), and the one that finishes
    last must not take back what the other published; the lake still holds it for the next build. True when
    CURRENT now names `version`."""
    served = current_version(index_root)
    if served is not None and served > version:
        return False
    activate_version(index_root, version)
    return True


def publish_index(
    index_root: LakePath, docs: Sequence[SearchDoc], embedder: Embedder, **options: Unpack[BuildOptions]
) -> str:
    """Stage a new version and point CURRENT at it. Publishes to one root should be serialised (one
    index-building run at a time): the last to finish sets CURRENT. Returns the new version name. The HNSW, cache
    and watermark options are `build_index`'s."""
    version = stage_index(index_root, docs, embedder, **options)
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


def served_watermarks(index_root: LakePath) -> dict[str, int]:
    """The watermarks of the version CURRENT names ({} when nothing was published yet)."""
    version = current_version(index_root)
    if version is None:
        return {}
    manifest = json.loads((_as_root(index_root) / version / "manifest.json").read_text())
    return {name: int(value) for name, value in manifest.get("watermarks", {}).items()}


def turns_watermark(index_root: LakePath) -> int:
    """Up to which ingest instant (unix microseconds) the current version holds turns; 0 if none published."""
    return int(served_watermarks(index_root).get(TURNS_WATERMARK, 0))


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


def resolve_version_dir(index_root: LakePath, version: str | None) -> Path:
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
class Segment:
    """One segment of a version: its docs file and, per entity type, its vector file and that file's sha256."""

    docs: Path
    vectors: dict[str, tuple[Path, str]]


def version_segments(version_dir: Path, manifest: Mapping[str, Any]) -> list[Segment]:
    """The version's segments in row order: the base (the version's top-level files), then its deltas."""

    def segment(directory: Path, digests: Mapping[str, str]) -> Segment:
        # A version built before an entity type existed has no files for it (digests name the types it has).
        return Segment(
            directory / "docs.parquet",
            {t: (directory / "vectors" / f"{t}.npy", digests[t]) for t in ENTITY_TYPES if t in digests},
        )

    deltas = [segment(version_dir / "delta" / d["name"], d["vector_sha256"]) for d in manifest.get("deltas", [])]
    return [segment(version_dir, manifest["vector_sha256"]), *deltas]


def version_doc_files(index_root: LakePath, version: str) -> list[LakePath]:
    """Every docs.parquet of a published version (base and delta segments): where its documents' words are."""
    directory = _as_root(index_root) / version
    manifest = json.loads((directory / "manifest.json").read_text())
    return [
        directory / "docs.parquet",
        *(directory / "delta" / d["name"] / "docs.parquet" for d in manifest.get("deltas", [])),
    ]
