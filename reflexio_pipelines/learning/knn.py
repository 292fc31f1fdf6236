"""The k nearest neighbours of every row by cosine, for the clustering's kNN graph: exact for small inputs, else an
inverted-file search over seeded spherical k-means cells.
"""

from __future__ import annotations

import numpy as np

#: Inverted-file kNN: target rows per spherical k-means cell, and how many nearest cells each cell searches.
CELL_SIZE = 128
CELL_PROBES = 12
KMEANS_ITERATIONS = 8
KMEANS_SAMPLE_PER_CELL = 32
#: Queries per matrix product in the kNN search, and the most rows taken from one cell (bounds time and memory).
QUERY_BLOCK = 1024
MAX_CELL = 4096
#: Seed of the only random step (the k-means sample and initial centres).
SEED = 0


def knn_cosine(unit: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(indices, cosine similarities) of up to `k` nearest other rows of each row of `unit` (unit-norm float32).

    Rows are sorted by decreasing similarity; missing neighbours (fewer candidates than k) are index -1 with
    similarity -inf. Exact when the input fits in `CELL_PROBES` cells, else an inverted-file approximation whose
    cost is bounded even when thousands of rows are identical (oversized cells are searched in windows).
    """
    n = len(unit)
    k = max(0, min(k, n - 1))
    out_idx = np.full((n, k), -1, dtype=np.int64)
    out_sim = np.full((n, k), -np.inf, dtype=np.float32)
    if k == 0:
        return out_idx, out_sim
    n_cells = max(1, n // CELL_SIZE)
    if n_cells <= CELL_PROBES and n <= MAX_CELL:
        everything = np.arange(n)
        _search(unit, everything, everything, k, out_idx, out_sim)
        return out_idx, out_sim
    if n_cells == 1:
        members = [np.arange(n)]
        probes = np.zeros((1, 1), dtype=np.int64)
    else:
        centres = _spherical_kmeans(unit, n_cells)
        cell_of = _nearest_centre(unit, centres)
        order = np.argsort(cell_of, kind="stable")
        bounds = np.searchsorted(cell_of[order], np.arange(n_cells + 1))
        members = [order[bounds[c] : bounds[c + 1]] for c in range(n_cells)]
        centre_sims = centres @ centres.T
        np.fill_diagonal(centre_sims, np.inf)  # a cell always searches itself, first
        probes = np.argsort(-centre_sims, axis=1, kind="stable")[:, : min(CELL_PROBES, n_cells)]
    for c in range(len(members)):
        own = members[c]
        if len(own) == 0:
            continue
        others = [members[p][:MAX_CELL] for p in probes[c][1:]]
        if len(own) <= MAX_CELL:
            _search(unit, own, np.concatenate([own, *others]), k, out_idx, out_sim)
            continue
        # An oversized cell (typically many near-identical rows): order it along its main direction of variation
        # and let each window of rows search itself, the windows either side and the probed cells.
        own = own[np.argsort(unit[own] @ _main_direction(unit[own]), kind="stable")]
        half = MAX_CELL // 2
        for lo in range(0, len(own), half):
            window = own[lo : lo + half]
            around = [own[max(0, lo - half) : lo], own[lo + half : lo + 2 * half]]
            _search(unit, window, np.concatenate([window, *around, *others]), k, out_idx, out_sim)
    return out_idx, out_sim


def _search(
    unit: np.ndarray, queries: np.ndarray, candidates: np.ndarray, k: int, out_idx: np.ndarray, out_sim: np.ndarray
) -> None:
    """Top-k of each query among `candidates`, which start with the queries themselves (each excludes itself)."""
    cand_vectors = unit[candidates]
    kk = min(k, len(candidates) - 1)
    if kk <= 0:
        return
    for start in range(0, len(queries), QUERY_BLOCK):
        block = queries[start : start + QUERY_BLOCK]
        sims = unit[block] @ cand_vectors.T
        local = np.arange(len(block))
        sims[local, start + local] = -np.inf
        width = sims.shape[1]
        if kk < width:
            top = np.argpartition(sims, width - kk, axis=1)[:, width - kk :]  # the kk largest, unordered
        else:
            top = np.broadcast_to(np.arange(width), (len(block), width))
        top_sims = np.take_along_axis(sims, top, axis=1)
        # Sort by similarity, ties by candidate position: deterministic whatever argpartition returned.
        rank = _rank(top_sims, top)
        top = np.take_along_axis(top, rank, axis=1)
        out_idx[block, :kk] = candidates[top]
        out_sim[block, :kk] = np.take_along_axis(top_sims, rank, axis=1)


def _main_direction(rows: np.ndarray) -> np.ndarray:
    """Approximate first principal direction of `rows` (a few seeded power iterations)."""
    centred = rows - rows.mean(axis=0)
    v = np.random.default_rng(SEED).standard_normal(int(rows.shape[1])).astype(np.float32)
    for _ in range(8):
        v = centred.T @ (centred @ v)
        norm = float(np.linalg.norm(v))
        if norm == 0.0:  # all rows identical: any order is as good as any other
            return np.zeros(rows.shape[1], dtype=np.float32)
        v /= norm
    return v


def _rank(sims: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Per-row order by decreasing similarity, ties broken by increasing position."""
    order = np.argsort(positions, axis=1, kind="stable")
    by_sim = np.argsort(-np.take_along_axis(sims, order, axis=1), axis=1, kind="stable")
    return np.take_along_axis(order, by_sim, axis=1)


def _spherical_kmeans(unit: np.ndarray, n_cells: int) -> np.ndarray:
    """Unit-norm cell centres from a few Lloyd iterations on a seeded sample (cosine assignment)."""
    from scipy.sparse import csr_matrix

    rng = np.random.default_rng(SEED)
    n = len(unit)
    size = min(n, max(n_cells, n_cells * KMEANS_SAMPLE_PER_CELL))
    sample = unit[np.sort(rng.choice(n, size=size, replace=False))]
    centres = sample[rng.choice(size, size=n_cells, replace=False)].copy()
    for _ in range(KMEANS_ITERATIONS):
        assign = _nearest_centre(sample, centres)
        onehot = csr_matrix((np.ones(size, dtype=np.float32), (assign, np.arange(size))), shape=(n_cells, size))
        sums = np.asarray(onehot @ sample)
        norms = np.linalg.norm(sums, axis=1)
        filled = norms > 0
        centres[filled] = sums[filled] / norms[filled, None]  # empty cells keep their previous centre
    return centres


def _nearest_centre(unit: np.ndarray, centres: np.ndarray) -> np.ndarray:
    out = np.empty(len(unit), dtype=np.int64)
    for start in range(0, len(unit), 8192):
        out[start : start + 8192] = np.argmax(unit[start : start + 8192] @ centres.T, axis=1)
    return out
