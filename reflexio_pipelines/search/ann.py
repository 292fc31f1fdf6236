"""Approximate nearest neighbours for large entity types: a faiss HNSW graph over the L2-normalised vectors.

Below `HNSW_MIN_ROWS` rows an exact numpy scan is both faster and exact, so no graph is built. Above it the index
version holds `ann/<type>.faiss` (an `IndexHNSWFlat` with inner product, which on unit vectors is the cosine), and
the vector leg walks the graph, restricted to the rows the filters admit by a faiss ID selector. When the filters
admit few rows a graph walk would have to visit many rejected nodes to find enough admitted ones, so
`HnswVectors.search` scans the admitted rows exactly instead (`HnswVectors.prefers_exact`).

Builds are single-threaded so that one set of vectors always yields the same graph (faiss assigns levels from a
fixed seed and inserts in row order; a multi-threaded build races on the links and is not reproducible).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

HNSW_MIN_ROWS = 50_000  # at and above this many rows per entity type the vector leg uses an HNSW graph
ANN_KIND = "faiss.IndexHNSWFlat/inner_product"
_GATHER_MAX_ROWS = 2_048  # exact scans of at most this many admitted rows gather them with numpy


@dataclass(frozen=True)
class HnswParams:
    """Graph and search parameters; recorded in the manifest so a served version is searched as it was built."""

    m: int = 32  # links per node (level 0 has 2*m): recall vs memory (~8*m bytes per row)
    # Candidate lists while linking and while searching. Measured on 100k clustered, text-like vectors with real
    # query embeddings (tie-aware recall@10): efConstruction 80 -> 0.72-0.89 at efSearch 64-256; 200 -> 0.84 at
    # efSearch 128 and 1.0 at 512 (~1.5 ms per query on a loaded 2-core machine).
    ef_construction: int = 200
    ef_search: int = 512  # raised to the number of results asked for when that is larger
    # Filtered searches: at most this many admitted rows (or this share) are scanned exactly, more are walked.
    # An exact scan costs a selector test per row plus a dot product per admitted row: at 10% of 333k rows it
    # took 10-13 ms against 2.7 ms (recall@10 0.925) for a filtered walk; at 10% of 100k, 2.7 ms against 2.9 ms.
    exact_max_fraction: float = 0.02
    exact_max_rows: int = 10_000
    # A filtered walk sees about one admitted row per 1/s visited ones (s = admitted share): its candidate list
    # grows to this many per result asked for, divided by s, within [ef_search, 4 * ef_search].
    filtered_ef_per_result: float = 2.0

    def to_manifest(self) -> dict[str, Any]:
        """The parameters as JSON-serialisable manifest fields."""
        return asdict(self)

    @classmethod
    def from_manifest(cls, fields: dict[str, Any]) -> HnswParams:
        """Parameters from a manifest entry (unknown keys ignored, so newer manifests still load)."""
        known = {name: fields[name] for name in cls.__dataclass_fields__ if name in fields}
        return cls(**known)


def build_hnsw(vectors: np.ndarray, params: HnswParams) -> Any:
    """An `IndexHNSWFlat` (inner product) over `vectors` (rows, dim), float32, unit rows; row i gets id i."""
    import faiss

    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    index = faiss.IndexHNSWFlat(int(vectors.shape[1]), params.m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = params.ef_construction
    index.hnsw.efSearch = params.ef_search
    # omp_set_num_threads sets this thread's OpenMP team size only: other threads' faiss calls are unaffected.
    previous = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        index.add(vectors)
    finally:
        faiss.omp_set_num_threads(previous)
    return index


def write_hnsw(index: Any, path: Path) -> None:
    """Serialise an HNSW index to `path` (faiss's own format)."""
    import faiss

    faiss.write_index(index, str(path))


class FlatVectors:
    """Row-aligned unit vectors held by a faiss flat inner-product index, also viewed as a read-only numpy matrix.

    Exact scans over a subset of rows go through faiss with an ID selector, which reads the admitted rows in place;
    numpy would first copy them out (`vectors[rows]`), which costs more than the dot products themselves."""

    def __init__(self, flat: Any, owner: Any) -> None:
        import faiss

        self._flat = flat
        n, dim = int(flat.ntotal), int(flat.d)
        if n == 0:  # an empty index has no buffer to view
            self.vectors = np.zeros((0, dim), dtype=np.float32)
            return
        # `owner` frees the memory (the flat index itself, or the HNSW index holding it as storage).
        self.vectors = np.asarray(_Pinned(owner, faiss.rev_swig_ptr(flat.get_xb(), n * dim), (n, dim)))

    @classmethod
    def from_array(cls, vectors: np.ndarray) -> FlatVectors:
        """Move `vectors` (rows, dim) into a flat index (the caller drops its copy)."""
        import faiss

        flat = faiss.IndexFlatIP(int(vectors.shape[1]))
        flat.add(np.ascontiguousarray(vectors, dtype=np.float32))
        return cls(flat, flat)

    def scan(self, query: np.ndarray, k: int, mask: np.ndarray, admitted: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact: the `k` best of the `admitted` rows where `mask` is True, best first (ties in row order)."""
        import faiss

        q = np.asarray(query, dtype=np.float32)
        if admitted <= _GATHER_MAX_ROWS:
            # A handful of rows (e.g. one user's): gathering them beats a pass over the whole selector.
            rows = np.flatnonzero(mask)
            sims = self.vectors[rows] @ q
            order = np.argsort(-sims, kind="stable")[:k]
            return rows[order], sims[order]
        # faiss keeps raw pointers to the bitmap and the selector: both locals must outlive the search call.
        bitmap = np.packbits(mask, bitorder="little")  # IDSelectorBitmap reads bit (i % 8) of byte i // 8
        selector = faiss.IDSelectorBitmap(len(mask), faiss.swig_ptr(bitmap))
        params = faiss.SearchParameters()
        params.sel = selector
        sims, rows = self._flat.search(q.reshape(1, -1), k, params=params)
        return _found(rows[0], sims[0])


class HnswVectors:
    """A loaded HNSW graph plus its flat storage, which doubles as the row-aligned vector matrix in RAM."""

    def __init__(self, index: Any, params: HnswParams) -> None:
        import faiss

        self._index = index
        self.params = params
        # The graph's own copy of the vectors serves exact scans too: one copy of the vectors per version.
        self.flat = FlatVectors(faiss.downcast_index(index.storage), index)
        self.vectors = self.flat.vectors

    @classmethod
    def read(cls, path: Path, n: int, dim: int, params: HnswParams) -> HnswVectors:
        """Load `path` and check it is an inner-product HNSW index over exactly `n` rows of `dim` dimensions."""
        import faiss

        index = faiss.read_index(str(path))
        if not isinstance(index, faiss.IndexHNSWFlat) or index.metric_type != faiss.METRIC_INNER_PRODUCT:
            raise ValueError(f"{path} is a {type(index).__name__}, not an inner-product IndexHNSWFlat")
        if int(index.ntotal) != n or int(index.d) != dim:
            raise ValueError(f"{path} holds {index.ntotal} x {index.d}, expected {n} x {dim}")
        return cls(index, params)

    @property
    def size(self) -> int:
        """Number of rows in the graph."""
        return int(self._index.ntotal)

    def prefers_exact(self, admitted: int) -> bool:
        """True when scanning `admitted` rows exactly beats (and is more reliable than) a filtered graph walk."""
        return admitted <= self.params.exact_max_rows or admitted <= self.params.exact_max_fraction * self.size

    def search(self, query: np.ndarray, k: int, mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Up to `k` nearest rows of the unit `query` among the rows where `mask` is True (all rows for None):
        (rows, cosines), best first. A graph walk, or an exact scan when the mask admits few rows. Thread-safe."""
        admitted = self.size if mask is None else int(np.count_nonzero(mask))
        k = min(k, admitted)
        if k <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        if mask is not None and self.prefers_exact(admitted):
            return self.flat.scan(query, k, mask, admitted)
        return self.walk(query, k, None if admitted == self.size else mask, admitted)

    def walk(self, query: np.ndarray, k: int, mask: np.ndarray | None, admitted: int) -> tuple[np.ndarray, np.ndarray]:
        """Approximate: walk the graph, admitting only rows where `mask` is True (`admitted` of them)."""
        import faiss

        ef = max(self.params.ef_search, k)
        # faiss's stubs (1.15) leave this class out; it is in the module (swigfaiss)
        params = faiss.SearchParametersHNSW()  # type: ignore[attr-defined]
        params.efSearch = ef
        if mask is not None:
            # Widen the candidate list so the walk does not stop before it has seen k admitted rows.
            wanted = self.params.filtered_ef_per_result * k * self.size / admitted
            params.efSearch = int(min(max(ef, wanted), 4 * ef))
            # faiss keeps raw pointers to the bitmap and the selector: both locals must outlive the search call.
            bitmap = np.packbits(mask, bitorder="little")  # IDSelectorBitmap reads bit (i % 8) of byte i // 8
            selector = faiss.IDSelectorBitmap(len(mask), faiss.swig_ptr(bitmap))
            params.sel = selector
        # One query: faiss walks the graph on this thread (it only forks OpenMP workers for batches of queries).
        sims, rows = self._index.search(np.asarray(query, dtype=np.float32).reshape(1, -1), k, params=params)
        return _found(rows[0], sims[0])


class _Pinned:
    """faiss-owned float32 memory as a read-only numpy array that keeps its owner alive: numpy makes the object
    providing `__array_interface__` the array's base, so the index cannot be freed under a live view."""

    def __init__(self, owner: Any, view: np.ndarray, shape: tuple[int, int]) -> None:
        self.owner = owner
        self.__array_interface__ = {
            "shape": shape,
            "typestr": "<f4",
            "version": 3,
            "data": (view.__array_interface__["data"][0], True),
        }


def _found(rows: np.ndarray, sims: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keep = rows >= 0  # faiss pads with -1 when fewer than k rows were reachable
    return rows[keep].astype(np.int64), sims[keep].astype(np.float32)
