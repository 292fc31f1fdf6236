"""Read-your-writes for turns: the turns published since the served index version took in turns.

An index version holds the live turns ingested up to its watermark (`turns_ingested_through_us` in its manifest);
turns are taken in by index builds with `index_turns` on (assets/search_index.py), which run shortly after turns
land, not on every publish. The turns after the watermark live in landing files (immutable, named
`<ingested_at_us>-<random>.parquet`), so this overlay reads exactly those files: the ones this process wrote at
once (the publish route names them), the ones other replicas wrote on the watcher's tick. A file is read once; a
file whose size or mtime changed (an erasure rewrote it) is read again. Files at or below the watermark are dropped.

The fallback ranks these turns as the index does (serving/interaction_search.py): BM25 and vectors fused, so the
embeddings of their lines are kept here, each line embedded once, and dropped when a new watermark drops the files.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.quarantine import read_landing
from reflexio_pipelines.lake.schemas import LANDING_TURNS
from reflexio_pipelines.learning.embedding import Embedder
from reflexio_pipelines.pending import landing_files_after, landing_ingested_us
from reflexio_pipelines.search.text import normalize_text
from reflexio_pipelines.storage import vanished


@dataclass(frozen=True)
class _File:
    """One landing file's rows, per user, and the stat they were read at."""

    stamp: tuple[int, int]  # (size, mtime_ns)
    by_user: dict[str, list[dict[str, Any]]]


class RecentTurns:
    """The landing-file turns newer than a watermark, per user, in memory. Thread-safe."""

    def __init__(self, lake: Lake) -> None:
        self._lake = lake
        self._lock = threading.Lock()
        self._files: dict[str, _File] = {}  # path relative to the lake -> rows
        self._landed: list[str] = []  # written by this process, not read yet
        self._watermark = 0
        self._vectors: dict[tuple[str, str], np.ndarray] = {}  # (model id, normalised line) -> unit vector

    def landed(self, relative: str | None) -> None:
        """A landing file this process just wrote (read on the next search)."""
        if relative is not None:
            with self._lock:
                self._landed.append(relative)

    def refresh(self, watermark: int) -> None:
        """List the landing hours from the watermark's hour on and read files not read yet (or rewritten): turns
        other replicas published. Called by the index watcher's tick."""
        paths = landing_files_after(self._lake, watermark)
        with self._lock:
            self._read(self._lake.relative(p) for p in paths)
            self._drop_through(watermark)

    def rows(self, user_id: str, watermark: int) -> list[dict[str, Any]]:
        """The user's turns ingested after `watermark` (the served version's), as landing rows."""
        with self._lock:
            landed, self._landed = self._landed, []
            self._read(landed)
            self._drop_through(watermark)
            return [
                row
                for f in self._files.values()
                for row in f.by_user.get(user_id, ())
                if row["ingested_at_us"] > watermark
            ]

    def vectors(self, embedder: Embedder, lines: Sequence[str]) -> dict[str, np.ndarray]:
        """Normalised line -> its embedding, for `lines` normalised as the index normalises them; lines not seen
        before are embedded in one batch (outside the lock: a model call can take a while)."""
        wanted = {normalize_text(line) for line in lines} - {""}
        with self._lock:
            missing = sorted(t for t in wanted if (embedder.model_id, t) not in self._vectors)
        embedded = embedder.embed(missing) if missing else []
        with self._lock:
            self._vectors.update(((embedder.model_id, t), v) for t, v in zip(missing, embedded, strict=True))
            return {t: self._vectors[(embedder.model_id, t)] for t in wanted if (embedder.model_id, t) in self._vectors}

    def forget_user(self, user_id: str) -> None:
        """Drop the user's rows (an erasure rewrote their landing files)."""
        with self._lock:
            for f in self._files.values():
                f.by_user.pop(user_id, None)

    def _read(self, relatives: Iterable[str]) -> None:
        for relative in relatives:
            path = self._lake.root / relative
            try:
                stat = path.stat()
            except FileNotFoundError:  # erased meanwhile
                self._files.pop(relative, None)
                continue
            stamp = (stat.st_size, stat.st_mtime_ns)
            known = self._files.get(relative)
            if known is not None and known.stamp == stamp:
                continue
            try:
                table = read_landing(self._lake, path, schema=LANDING_TURNS)
            except Exception as exc:
                if not vanished(exc):
                    raise
                table = None  # erased between the stat and the read
            if table is None:  # gone, or unreadable and quarantined
                self._files.pop(relative, None)
                continue
            rows = table.to_pylist()
            by_user: dict[str, list[dict[str, Any]]] = {}
            for row in rows:
                by_user.setdefault(row["user_id"], []).append(row)
            self._files[relative] = _File(stamp, by_user)

    def _drop_through(self, watermark: int) -> None:
        if watermark != self._watermark:
            self._files = {
                k: f for k, f in self._files.items() if landing_ingested_us(k.rsplit("/", 1)[-1]) > watermark
            }
            self._watermark = watermark
            self._vectors = {}  # the turns they embedded are in the index now
