"""Read-your-writes for manual adds: an item added through the API is found by the very next search, before the
background re-index (serving/reindex.py) has published an index version holding it.

The items added since the served version was built form a small second index, built with the same `build_index`
and opened as the same `LoadedIndex` as a published version, so filters, the similarity threshold, search modes,
expiry and the approval overlay treat both alike. It is rebuilt when an add (or an edit or delete of an added item)
is recorded, or when the served version changes; each rebuild covers only the items the served version still lacks,
and texts embedded once are kept in memory, so a rebuild embeds only what is new. It empties itself once the
re-indexed version is served. Search queries both and merges the hits (serving/query_plan.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from reflexio_pipelines.learning.embedding import Embedder
from reflexio_pipelines.search.build import build_index
from reflexio_pipelines.search.documents import agent_playbook_docs, profile_docs, user_playbook_docs
from reflexio_pipelines.search.query import LoadedIndex
from reflexio_pipelines.search.types import SearchDoc
from reflexio_pipelines.search.versions import new_version_id
from serving.curation import CurationOverlay

log = logging.getLogger(__name__)

#: entity -> its rows as search documents (approval statuses as added; the control overlay applies at query time)
_DOCS: dict[str, Callable[[list[dict[str, Any]]], list[SearchDoc]]] = {
    "profile": profile_docs,
    "user_playbook": user_playbook_docs,
    "agent_playbook": lambda rows: agent_playbook_docs(rows, {}),
}


class _Vectors:
    """An in-memory `VectorCache` (search/build.py): vectors of the texts the last rebuild used, so the next one
    embeds only texts it has not seen. Holds no more than the overlay's own texts."""

    def __init__(self) -> None:
        self._vectors: dict[tuple[str, int, str], np.ndarray] = {}
        self._used: set[tuple[str, int, str]] = set()

    def lookup(self, model_id: str, dim: int, texts: Sequence[str]) -> dict[str, np.ndarray]:
        self._used = {(model_id, dim, t) for t in texts}
        return {t: self._vectors[(model_id, dim, t)] for t in texts if (model_id, dim, t) in self._vectors}

    def store(
        self, model_id: str, dim: int, texts: Sequence[str], vectors: np.ndarray, owners: Mapping[str, frozenset[str]]
    ) -> None:
        self._vectors.update({(model_id, dim, t): np.array(v) for t, v in zip(texts, vectors)})
        self._vectors = {k: v for k, v in self._vectors.items() if k in self._used}


class FreshAdds:
    """The index of manual adds the served version does not hold yet; `index()` is called on every search."""

    def __init__(self, curation: CurationOverlay, embedder: Callable[[], Embedder]) -> None:
        self._curation = curation
        self._embedder = embedder
        self._lock = threading.Lock()
        self._vectors = _Vectors()
        self._key: tuple[str | None, int] | None = None
        self._signature: str | None = None  # of the docs the current overlay holds
        self._index: LoadedIndex | None = None
        self._dir: Path | None = None

    def index(self, served: LoadedIndex | None) -> LoadedIndex | None:
        """The overlay index for the `served` version and the current curation log (None when it holds nothing)."""
        key = (served.version if served is not None else None, self._curation.generation)
        if key == self._key:  # the common case: nothing was added since the last search
            return self._index
        with self._lock:
            if key != self._key:
                self._rebuild(served, key)
            return self._index

    def _rebuild(self, served: LoadedIndex | None, key: tuple[str | None, int]) -> None:
        docs = [
            doc
            for entity in _DOCS
            for doc in _DOCS[entity](self._curation.added_rows(entity))
            if served is None or served.payload(entity, doc.doc_id) is None
        ]
        signature = _signature(docs)
        if signature == self._signature:  # e.g. a delete of a learned item, or the log re-read by the watcher
            self._key = key
            return
        index, directory = None, None
        try:
            if docs:
                directory = Path(tempfile.mkdtemp(prefix="reflexio-fresh-"))
                version = new_version_id()
                build_index(docs, self._embedder(), directory / version, version=version, cache=self._vectors)
                index = LoadedIndex.load(directory, version)
        except Exception:  # serving must go on: the items become searchable with the re-indexed version
            log.exception("could not index %d manual add(s) for immediate search", len(docs))
        previous, self._dir = self._dir, directory
        # The index before the key: a reader that sees the new key without the lock must get the new index.
        self._index = index
        self._key, self._signature = key, signature
        if previous is not None:
            # Readers still holding the old overlay keep working: its vectors and docs are in memory and
            # tantivy's files stay readable while open.
            shutil.rmtree(previous, ignore_errors=True)

    def close(self) -> None:
        with self._lock:
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)
            self._index, self._dir, self._key, self._signature = None, None, None, None


def _signature(docs: list[SearchDoc]) -> str:
    """What an overlay built over `docs` would hold (ids, texts, payloads, filter fields)."""
    digest = hashlib.sha256()
    for doc in docs:
        digest.update(
            json.dumps(
                [doc.entity_type, doc.doc_id, doc.text, doc.payload, doc.status, doc.playbook_status, doc.expires_at],
                sort_keys=True,
                default=str,
            ).encode()
        )
    return digest.hexdigest()
