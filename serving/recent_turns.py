"""Read-your-writes for turns: the turns published since the served index version took in turns.

An index version holds the live turns ingested up to its watermark (`turns_ingested_through_us` in its manifest);
turns are taken in by index builds with `index_turns` on (assets/search_index.py), which run shortly after turns
land, not on every publish. The turns after the watermark live in landing files (immutable, named
`<ingested_at_us>-<random>.parquet`), so this overlay reads exactly those files: the ones this process wrote at
once (the publish route names them), the ones other replicas wrote on the watcher's tick. A file is read once; a
file whose size or mtime changed (an erasure rewrote it) is read again. Files at or below the watermark are dropped.

The fallback ranks these turns as the index does (serving/interaction_search.py): BM25 and vectors fused, so the
embeddings of their lines are kept here, each line embedded once, and dropped when a new watermark drops every file
that holds the line (a build that took in only part of the backlog leaves the rest's vectors in place).

The bound (issue #41): a search ranks the user's newest `per_user` unindexed turns (`Settings.
recent_turns_per_user`) by words and meaning, the `WORDS_ONLY_FACTOR - 1` times as many before them by their words
only (BM25; their lines are not embedded), and the ranking of a set of turns (documents, BM25 index, vectors:
serving/recent_ranking.py) is kept for the next search over the same turns. So a search parses at most the files
this replica wrote since the last one (the tick reads the others; each file once), embeds at most the lines of
`per_user` turns the first time, and after that pays the query only, whatever the backlog: at 10x the backlog issue
#41 measured, warm p50 1.0 s before, 9 ms with this (benchmarks/interaction_fallback_cost.py). The user's oldest
unindexed turns are the ones the next builds take in first (a build takes the oldest, `jobs.MAX_NEW_TURNS_PER_BUILD`
at a time) and are found from the index then.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.quarantine import read_landing
from reflexio_pipelines.lake.schemas import LANDING_TURNS
from reflexio_pipelines.learning.embedding import Embedder
from reflexio_pipelines.pending import landing_files_after, landing_ingested_us
from reflexio_pipelines.search.conversation import turn_line
from reflexio_pipelines.search.text import normalize_text
from reflexio_pipelines.storage import vanished
from serving.recent_ranking import RecentCorpus

#: Rankings (serving/recent_ranking.py) kept, the most recently searched first: one per user searching while their
#: turns wait for a build. At the default bound one is at most ~3,000 documents and a 4.6 MB vector matrix (zero rows
#: for the turns ranked by words only).
CORPORA = 64
#: Unindexed turns a search ranks per user, as a multiple of `per_user`; those beyond `per_user` by their words only.
#: With only the newest 1,000 searched, real chats of 1,044-1,511 turns published at once lost their older answers
#: until a build took them in: benchmarks/interaction_ranking.py --corpus realtalk, held-out draw, recall@10 from
#: landing files 0.486 vs 0.546 from the index (0.545 unbounded; 0.538 with the older ones by words). Words cost no
#: embedding, only documents and a BM25 index per set of turns: at 10x issue #41's backlog (7,047 unindexed turns a
#: user; benchmarks/interaction_fallback_cost.py, 2026-12-07) a search right after a publish took 0.31 s -> 0.66 s
#: p50 (unbounded 1.8 s), a warm one 9 -> 16 ms, and the lines embedded stayed 1,208.
WORDS_ONLY_FACTOR = 3


@dataclass(frozen=True)
class Waiting:
    """A user's unindexed turns a search ranks, in landing order; the first `words_only` by their words alone."""

    rows: list[dict[str, Any]]
    words_only: int
    left_out: int  # older unindexed turns not ranked at all


@dataclass(frozen=True)
class _File:
    """One landing file's rows, per user, and the stat they were read at."""

    stamp: tuple[int, int]  # (size, mtime_ns)
    by_user: dict[str, list[dict[str, Any]]]


class RecentTurns:
    """The landing-file turns newer than a watermark, per user, in memory. Thread-safe."""

    def __init__(self, lake: Lake, per_user: int = 0) -> None:
        self._lake = lake
        self._per_user = per_user  # newest unindexed turns a search ranks by meaning too, per user; 0 = all
        self._lock = threading.Lock()
        self._files: dict[str, _File] = {}  # path relative to the lake -> rows
        self._users: dict[str, dict[str, list[dict[str, Any]]]] = {}  # user -> path -> their rows in it
        self._landed: list[str] = []  # written by this process, not read yet
        self._watermark = 0
        self._vectors: dict[tuple[str, str], np.ndarray] = {}  # (model id, normalised line) -> unit vector
        self._corpora: OrderedDict[tuple[str, tuple[str, ...]], RecentCorpus] = OrderedDict()
        self.files_parsed = 0  # landing files read (again, if rewritten) so far
        self.lines_embedded = 0  # turn lines embedded so far
        self.corpora_built = 0  # rankings built so far

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
        """The user's turns ingested after `watermark` (the served version's) that a search ranks, as landing rows:
        the newest `per_user * WORDS_ONLY_FACTOR` of them (all with 0), in landing order."""
        return self.newest(user_id, watermark).rows

    def newest(self, user_id: str, watermark: int) -> Waiting:
        """The user's unindexed turns a search ranks (`rows`), how many of the oldest of them it ranks by words only,
        and how many older ones it leaves out. Walks the user's files from the newest back until it has enough rows:
        the other users' files and the user's older ones are not read."""
        with self._lock:
            landed, self._landed = self._landed, []
            self._read(landed)
            self._drop_through(watermark)  # every file left holds turns ingested after the watermark (its name's)
            files = self._users.get(user_id, {})
            room = self._per_user * WORDS_ONLY_FACTOR or sum(len(rows) for rows in files.values())
            taken: list[list[dict[str, Any]]] = []
            for relative in sorted(files, key=_ingest_order, reverse=True):
                if room <= 0:
                    break
                rows = files[relative]
                taken.append(rows[-room:])  # the newest turns of the file that ends the bound
                room -= len(taken[-1])
            total = sum(len(rows) for rows in files.values())
        out = [row for rows in reversed(taken) for row in rows]
        words_only = max(0, len(out) - self._per_user) if self._per_user else 0
        return Waiting(out, words_only, total - len(out))

    def corpus(self, user_id: str, rows: list[dict[str, Any]], words_only: int = 0) -> RecentCorpus:
        """The ranking of the user's `rows` (serving/recent_ranking.py), the first `words_only` of them without
        vectors: the one a search over the same turns built, else a new one."""
        key = (user_id, words_only, tuple(r["turn_id"] for r in rows))
        with self._lock:
            found = self._corpora.get(key)
            if found is not None:
                self._corpora.move_to_end(key)
                return found
        built = RecentCorpus.of_rows(rows, words_only)  # outside the lock: documents of the turns waiting
        with self._lock:
            self.corpora_built += 1
            self._corpora[key] = built
            while len(self._corpora) > CORPORA:
                self._corpora.popitem(last=False)
        return built

    def vectors(self, embedder: Embedder, lines: Sequence[str]) -> dict[str, np.ndarray]:
        """Normalised line -> its embedding, for `lines` normalised as the index normalises them; lines not seen
        before are embedded in one batch (outside the lock: a model call can take a while)."""
        wanted = {normalize_text(line) for line in lines} - {""}
        with self._lock:
            missing = sorted(t for t in wanted if (embedder.model_id, t) not in self._vectors)
        embedded = embedder.embed(missing) if missing else []
        with self._lock:
            self.lines_embedded += len(missing)
            self._vectors.update(((embedder.model_id, t), v) for t, v in zip(missing, embedded, strict=True))
            return {t: self._vectors[(embedder.model_id, t)] for t in wanted if (embedder.model_id, t) in self._vectors}

    def forget_user(self, user_id: str) -> None:
        """Drop the user's rows, the vectors of their lines and their rankings (an erasure rewrote their landing
        files)."""
        with self._lock:
            lines = {normalize_text(turn_line(r)) for rows in self._users.pop(user_id, {}).values() for r in rows}
            for f in self._files.values():
                f.by_user.pop(user_id, None)
            self._vectors = {k: v for k, v in self._vectors.items() if k[1] not in lines}
            self._corpora = OrderedDict((k, c) for k, c in self._corpora.items() if k[0] != user_id)

    def _read(self, relatives: Iterable[str]) -> None:
        for relative in relatives:
            path = self._lake.root / relative
            try:
                stat = path.stat()
            except FileNotFoundError:  # erased meanwhile
                self._pop(relative)
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
                self._pop(relative)
                continue
            self.files_parsed += 1
            rows = table.to_pylist()
            by_user: dict[str, list[dict[str, Any]]] = {}
            for row in rows:
                by_user.setdefault(row["user_id"], []).append(row)
            self._pop(relative)
            self._files[relative] = _File(stamp, by_user)
            for user, mine in by_user.items():
                self._users.setdefault(user, {})[relative] = mine

    def _pop(self, relative: str) -> None:
        gone = self._files.pop(relative, None)
        for user in gone.by_user if gone is not None else ():
            files = self._users.get(user, {})
            files.pop(relative, None)
            if not files:
                self._users.pop(user, None)

    def _drop_through(self, watermark: int) -> None:
        if watermark != self._watermark:
            for relative in [k for k in self._files if _ingest_order(k)[0] <= watermark]:
                self._pop(relative)
            self._watermark = watermark
            # Keep the lines of turns still waiting: a build takes in at most MAX_NEW_TURNS_PER_BUILD turns, and
            # re-embedding the rest after every build made each build's next search pay the backlog's lines again.
            waiting = {
                normalize_text(turn_line(r)) for f in self._files.values() for rs in f.by_user.values() for r in rs
            }
            self._vectors = {k: v for k, v in self._vectors.items() if k[1] in waiting}


def _ingest_order(relative: str) -> tuple[int, str]:
    """A landing file's place in ingest order: the instant its name starts with, then the name."""
    name = relative.rsplit("/", 1)[-1]
    return landing_ingested_us(name), name
