"""The clause classifier: a LEARNED HEURISTIC (a small neural head over sentence embeddings, trained on labelled
clauses by `clauses/train.py`), not an understanding of the text. Its measured precision and recall per kind, on a
development split never used for tuning, are in the head file's metadata and in docs/extractor.md.

It labels each clause with one of `kinds.KINDS`. A clause changes what is stored (a profile, a playbook, a
revocation: `kinds.OUTCOMES`) only when the summed probability of that outcome's kinds clears the outcome's bar,
chosen on the training split for precision, because a wrongly learned item is served to the user again and again
while a missed one costs one more mention.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from reflexio_pipelines.learning.clauses.features import ClauseInput, featurise, turn_features
from reflexio_pipelines.learning.clauses.head import CHANGE_HEAD_FILE, HEAD_FILE, ClauseHead
from reflexio_pipelines.learning.clauses.kinds import OUTCOMES
from reflexio_pipelines.learning.embedding import Embedder, make_embedder

STORING = frozenset(k for kinds in OUTCOMES.values() for k in kinds)
#: Clause vectors remembered per process. Chat repeats itself ("Thanks!", "Sounds good", stock sign-offs): in the
#: synthetic stream of `benchmarks/learning_throughput.py` 118 distinct texts make 2,000 clauses, in real chat far
#: fewer repeat. 8,192 vectors are 12.6 MB.
CLAUSE_CACHE_SIZE = 8192


@dataclass(frozen=True)
class Prediction:
    """The kind chosen for one clause, its probability, and the probability of every kind."""

    kind: str
    probability: float
    probabilities: dict[str, float]
    #: Whether the change head (a learned heuristic like the kind: clauses/train_change.py) reads the clause's whole
    #: turn as telling that something said before no longer holds; set by the extractor (`change_probabilities`).
    change: bool = False
    #: The change head's probability for the clause's turn (how sure it is: a sure change reaches further, dedup.py).
    change_probability: float = 0.0


def decide(head: ClauseHead, probabilities: np.ndarray) -> list[Prediction]:
    """Per row: of the outcomes whose probability mass clears its bar (`head.min_probability`, keyed by outcome,
    each chosen on its own), the one with the most mass, and its most probable kind; else the most probable kind that
    stores nothing. An outcome that clears its bar is kept even when another, below its own bar, has more mass: "no
    pork anything pls, i keep halal" is revocation 0.51 (bar 0.70) and preference 0.47 (bar 0.30)."""
    out: list[Prediction] = []
    for row in probabilities:
        by_kind = dict(zip(head.kinds, (float(p) for p in row)))
        mass = {o: sum(by_kind.get(k, 0.0) for k in kinds) for o, kinds in OUTCOMES.items()}
        idle = max((p for k, p in by_kind.items() if k not in STORING), default=0.0)
        cleared = [o for o in mass if mass[o] >= head.min_probability.get(o, 1.0) and mass[o] >= idle]
        if cleared:
            outcome = max(cleared, key=lambda o: mass[o])
            kind = max(OUTCOMES[outcome], key=lambda k: by_kind.get(k, 0.0))
            out.append(Prediction(kind, mass[outcome], by_kind))
            continue
        kind = max((k for k in by_kind if k not in STORING), key=lambda k: by_kind[k])
        out.append(Prediction(kind, by_kind[kind], by_kind))
    return out


class _ClauseVectors:
    """The embedder behind a bounded LRU keyed by the SHA-256 of each clause (the words themselves are not kept):
    a text already embedded in this process, or twice in one call, is embedded once. `clear()` forgets every vector
    (erasure: a vector is derived from what a user said)."""

    def __init__(self, embedder: Embedder, capacity: int = CLAUSE_CACHE_SIZE) -> None:
        self._embedder = embedder
        self._capacity = capacity
        self._vectors: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        keys = [hashlib.sha256(t.encode("utf-8", "replace")).digest() for t in texts]
        with self._lock:
            known = {k: self._vectors[k] for k in keys if k in self._vectors}
            for key in known:
                self._vectors.move_to_end(key)
        missing = list(dict.fromkeys(k for k in keys if k not in known))
        if missing:
            first = {k: t for k, t in zip(keys, texts) if k in set(missing)}
            vectors = np.asarray(self._embedder.embed([first[k] for k in missing]), dtype=np.float32)
            fresh = dict(zip(missing, vectors))
            known.update(fresh)
            with self._lock:
                self._vectors.update(fresh)
                while len(self._vectors) > self._capacity:
                    self._vectors.popitem(last=False)
        return np.stack([known[k] for k in keys])

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()


class ClauseClassifier:
    """Classifies clauses with the shipped head over the bundled local embedder (both loaded once, lazily)."""

    def __init__(
        self, head_path: Path = HEAD_FILE, embedder: Embedder | None = None, change_path: Path = CHANGE_HEAD_FILE
    ) -> None:
        self._head_path = head_path
        self._change_path = change_path
        self._embedder = embedder
        self._heads: dict[Path, ClauseHead] = {}
        self._vectors: _ClauseVectors | None = None
        self._lock = threading.Lock()

    def _loaded(self, path: Path) -> ClauseHead:
        """The head in `path`, read once per classifier."""
        with self._lock:
            if path not in self._heads:
                self._heads[path] = ClauseHead.load(path)
            return self._heads[path]

    @property
    def head(self) -> ClauseHead:
        return self._loaded(self._head_path)

    @property
    def change_head(self) -> ClauseHead:
        return self._loaded(self._change_path)

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = make_embedder("local")
        return self._embedder

    def classify(self, clauses: list[ClauseInput]) -> list[Prediction]:
        """One prediction per clause, in order (one batched embedding call for the texts not seen before)."""
        if not clauses:
            return []
        if self._vectors is None:
            self._vectors = _ClauseVectors(self.embedder)
        return decide(self.head, self.head.probabilities(featurise(clauses, self._vectors)))

    def change_probabilities(self, turns: list[list[str]]) -> list[float]:
        """Per turn (its clauses as the classifier read them, `change_clauses`), the change head's probability that
        it tells that something said before no longer holds. Clause vectors come from the cache the classification
        just filled, so a classified turn costs no embedding."""
        if not turns:
            return []
        if self._vectors is None:
            self._vectors = _ClauseVectors(self.embedder)
        head = self.change_head
        probabilities = head.probabilities(turn_features(turns, self._vectors))
        return [float(p) for p in probabilities[:, head.kinds.index("change")]]

    @property
    def change_bar(self) -> float:
        """The probability from which the change head reads a turn as a change."""
        return float(self.change_head.min_probability["change"])

    def forget_vectors(self) -> None:
        """Drop every remembered clause vector (called on erasure)."""
        if self._vectors is not None:
            self._vectors.clear()


_shared: ClauseClassifier | None = None
_shared_lock = threading.Lock()


def shared_classifier() -> ClauseClassifier:
    """The process-wide classifier (the head and the embedder are loaded once per process)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = ClauseClassifier()
        return _shared
