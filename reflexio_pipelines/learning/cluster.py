"""Clustering user playbooks into candidate agent playbooks: which rules recur across users.

Pure: numpy, scipy, scikit-learn and hdbscan only; no Dagster, no IO. Input rows are embeddings (any dimension;
rows are L2-normalised here, so only their direction matters) and the id of the user each row came from.

Geometry is cosine throughout. Two algorithms, as in the original:

- **below `agglomerative_below` rows** (default 50): scikit-learn average-linkage agglomerative clustering with
  cosine distance, cut at `1 - similarity` (two groups merge while their mean pairwise cosine is >= `similarity`).
- **at or above**: HDBSCAN (the `hdbscan` package) on a sparse k-nearest-neighbour graph. The original handed
  HDBSCAN a dense n x n cosine distance matrix (80 GB at 100k rows) with `min_samples=1` and
  `cluster_selection_epsilon = 1 - similarity`, which amounts to cutting a single-linkage tree at cosine distance
  0.5: unrelated rules chain together once there are more than a few hundred (benchmark at 10k: ARI 0.03).
  Here instead:
  1. `KNN_NEIGHBOURS` nearest neighbours of every row by cosine (`learning/knn.py`): exact below ~1,700 rows, else
     an inverted-file search (spherical k-means cells of ~`CELL_SIZE` rows, each searched against its `CELL_PROBES`
     nearest cells; recall@10 ~0.99 at 100k; no dimensionality reduction needed — the cost is matrix products in
     384-d).
  2. Edges between rows less than `similarity` alike are dropped (as in the agglomerative path, where such a pair
     never merges). Weights: HDBSCAN's mutual-reachability distance on Euclidean distance between unit vectors
     (monotone in cosine: d = sqrt(2 - 2 cos)), core distance = distance to the nearest other row (the original's
     min_samples=1), distances below the "same statement" level `SAME_TEXT_COSINE` floored there (so a handful of
     verbatim duplicates does not out-weigh its paraphrases in HDBSCAN's stability score).
  3. Minimum spanning tree of that graph (scipy); its disconnected parts are joined above the threshold in a way
     that cannot invent clusters (`_bridge`).
  4. `hdbscan.HDBSCAN(metric="precomputed", min_samples=1)` on the spanning tree: condensed tree and excess-of-mass
     selection with `min_cluster_size`. (Given a tree, HDBSCAN's own mutual-reachability step with min_samples=1
     leaves every edge unchanged, so this is HDBSCAN on the kNN mutual-reachability graph, in ~O(n k) memory.)
  5. Noise rows that restate a clustered row (cosine >= `SAME_TEXT_COSINE`) join its cluster; if HDBSCAN found
     nothing but the whole input is one tight group (mean pairwise cosine >= `similarity`), that is the cluster.
  6. HDBSCAN's clusters are merged by average linkage at the same threshold (`_merge_fragments`): with
     min_cluster_size 2 it cuts one rule's paraphrases into fragments (at 100k: 277 planted clusters split without
     this step, 54 with it), and this makes the threshold mean the same thing below and above 50 rows.

Then, for both algorithms, the same acceptance rules (the original had none):

- a member whose cosine similarity to its cluster's centroid is below `similarity` becomes noise (repeated until
  stable, so every member of a returned cluster is at least `similarity` from the centroid of exactly that cluster);
- a cluster with fewer than `min_cluster_size` members, or fewer than `min_distinct_users` distinct user ids,
  becomes noise: one user repeating themselves is not an agent-wide rule.

Labels are -1 for noise and 0..k-1 otherwise, numbered by each cluster's smallest row index. The result is a
function of the input (the only random step, the k-means sample, is seeded). `benchmarks/clustering.py` measures
speed and quality at 10k and 100k rows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from reflexio_pipelines.learning.knn import knn_cosine

NOISE = -1

#: Neighbours per row in the kNN graph the HDBSCAN path builds its spanning tree from.
KNN_NEIGHBOURS = 10
#: HDBSCAN `min_samples` (the hdbscan package counts neighbours excluding the row itself): core distance =
#: distance to the nearest other row, as in the original (min_samples=1). A rule stated by exactly two users must
#: be able to form a cluster; with 2 a pair's core distance is the distance to some third, unrelated row and many
#: pairs dissolve into noise (benchmark at 100k: 158 of ~1,300 planted 2-5 row clusters lost, against 6).
CORE_NEIGHBOURS = 1
#: Cosine similarity at which two texts are treated as the same statement (distances are floored here).
SAME_TEXT_COSINE = 0.95
#: Merge HDBSCAN clusters by average linkage (see `_merge_fragments`); candidates = this many nearest centroids.
MERGE_FRAGMENTS = True
MERGE_CANDIDATES = 10
#: Disconnected parts of the kNN graph are joined at this factor times max(threshold distance, longest tree edge)
#: (parts smaller than min_cluster_size one factor higher again; see `_bridge`).
BRIDGE_FACTOR = 1.0001
_MAX_REFINEMENTS = 50
_TOLERANCE = 1e-6  # float32 slack on the similarity threshold


@dataclass(frozen=True)
class ClusterParams:
    """Clustering parameters (the original's defaults: min_cluster_size 2, clustering_similarity 0.5).

    `min_cluster_size` below 2 is treated as 2 (a cluster of one is not a recurring rule) and `min_distinct_users`
    below 1 as 1. These are the algorithm's defaults; aggregation runs always pass the extraction config's
    (`aggregate.cluster_params`), whose `min_distinct_users` defaults to 3.
    """

    min_cluster_size: int = 2
    similarity: float = 0.5
    min_distinct_users: int = 2
    agglomerative_below: int = 50


def cluster_playbooks(
    vectors: np.ndarray, user_ids: Sequence[str], params: ClusterParams = ClusterParams()
) -> np.ndarray:
    """Cluster label per row of `vectors` (an (n, dim) array of embeddings); -1 = noise, clusters 0..k-1.

    `user_ids[i]` is the user row i came from. Rows that are all zero have no direction and are noise.
    Raises ValueError on a wrong shape, a user_ids length that differs from the row count, or non-finite values.
    """
    x = np.asarray(vectors, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"expected a 2-d array of embeddings, got shape {x.shape}")
    n = x.shape[0]
    if len(user_ids) != n:
        raise ValueError(f"{n} vectors but {len(user_ids)} user ids")
    if not -1.0 <= params.similarity <= 1.0:
        raise ValueError(f"similarity must be within [-1, 1], got {params.similarity}")
    labels = np.full(n, NOISE, dtype=np.int64)
    if n == 0:
        return labels
    if not np.all(np.isfinite(x)):
        raise ValueError("embeddings contain NaN or infinite values")
    norms = np.linalg.norm(x, axis=1)
    usable = np.flatnonzero(norms > 0)
    if len(usable) < 2:
        return labels
    unit = np.ascontiguousarray(x[usable] / norms[usable, None], dtype=np.float32)
    users = _user_codes([user_ids[int(i)] for i in usable])

    if len(unit) < params.agglomerative_below:
        raw = _agglomerative(unit, params.similarity)
    else:
        raw = _hdbscan(unit, params)
    labels[usable] = _accept(unit, raw, users, params)
    return _renumber(labels)


def clusters_from_labels(labels: np.ndarray | Sequence[int], ids: Sequence[Any]) -> dict[int, list]:
    """{label: [ids of its rows, in row order]} for every non-noise label, in label order."""
    labels = np.asarray(labels)
    if len(labels) != len(ids):
        raise ValueError(f"{len(labels)} labels but {len(ids)} ids")
    out: dict[int, list] = {}
    for label, item in zip(labels.tolist(), ids):
        if label != NOISE:
            out.setdefault(int(label), []).append(item)
    return dict(sorted(out.items()))


def fingerprint(member_ids: Iterable[str | int]) -> str:
    """A cluster's identity: a stable hash of its member-id *set* (order and repeats do not matter).

    Ids are compared by their string form (the int 7 and the string "7" are the same member). 32 hex characters of
    sha256 over the JSON list of sorted ids, so no separator inside an id can make two sets collide.
    """
    members = sorted({str(m) for m in member_ids})
    payload = json.dumps(members, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def _agglomerative(unit: np.ndarray, similarity: float) -> np.ndarray:
    from sklearn.cluster import AgglomerativeClustering

    model = AgglomerativeClustering(
        n_clusters=None,
        distance_threshold=max(1.0 - similarity, 1e-9),  # sklearn merges strictly below the threshold
        metric="cosine",
        linkage="average",
    )
    return model.fit_predict(unit).astype(np.int64)


def _hdbscan(unit: np.ndarray, params: ClusterParams) -> np.ndarray:
    import hdbscan
    from scipy.sparse import coo_matrix, csr_matrix
    from scipy.sparse.csgraph import connected_components, minimum_spanning_tree

    n = len(unit)
    k = min(KNN_NEIGHBOURS, n - 1)
    neighbours, sims = knn_cosine(unit, k)
    floor = float(np.sqrt(2.0 - 2.0 * SAME_TEXT_COSINE))
    dist = np.sqrt(np.clip(2.0 - 2.0 * sims.astype(np.float64), 0.0, None))
    dist = np.maximum(dist, floor)
    core = dist[:, min(CORE_NEIGHBOURS, k) - 1].copy()
    if CORE_NEIGHBOURS == 1:  # the nearest neighbour may be known only from the other side (approximate search)
        found = neighbours >= 0
        np.minimum.at(core, neighbours[found], dist[found])
    core[~np.isfinite(core)] = 2.0  # no neighbour found at all: as far as two unit vectors can be
    rows = np.repeat(np.arange(n), k)
    cols = neighbours.ravel()
    # Only rows at least `similarity` alike are linked (as in the agglomerative path, where a pair below it never
    # merges): unrelated one-off rules stay apart however few there are.
    keep = (cols >= 0) & (sims.ravel() >= params.similarity - _TOLERANCE)
    rows, cols = rows[keep], cols[keep]
    weight = np.maximum(dist.ravel()[keep], np.maximum(core[rows], core[cols]))
    graph = csr_matrix((weight, (rows, cols)), shape=(n, n))
    graph = graph.maximum(graph.T)  # symmetric (mutual reachability is); absent entries are 0
    tree = minimum_spanning_tree(graph).tocoo()
    t_rows, t_cols, t_w = tree.row, tree.col, tree.data
    parts, part_of = connected_components(tree, directed=False)
    if parts > 1:
        t_rows, t_cols, t_w = _bridge(part_of, parts, t_rows, t_cols, t_w, params, floor)
    spanning = coo_matrix((t_w, (t_rows, t_cols)), shape=(n, n)).tocsr()
    spanning = spanning.maximum(spanning.T)
    model = hdbscan.HDBSCAN(
        metric="precomputed",
        min_samples=1,  # mutual reachability is already in the tree's weights
        min_cluster_size=max(2, params.min_cluster_size),
        cluster_selection_method="eom",
        allow_single_cluster=False,
    )
    labels = model.fit_predict(spanning).astype(np.int64)
    if labels.max(initial=NOISE) == NOISE and _mean_pairwise_cosine(unit) >= params.similarity - _TOLERANCE:
        labels[:] = 0  # one tight group: HDBSCAN never selects the root of its tree
    labels = _attach_duplicates(labels, neighbours, sims)
    return _merge_fragments(unit, labels, params.similarity) if MERGE_FRAGMENTS else labels


def _bridge(
    part_of: np.ndarray,
    parts: int,
    rows: np.ndarray,
    cols: np.ndarray,
    weights: np.ndarray,
    params: ClusterParams,
    floor: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Join the spanning forest's parts into one tree without inventing clusters.

    Every part hangs off the largest part (a star, so no two other parts ever merge with each other first), above
    every real distance; parts too small to be a cluster hang higher still, so in HDBSCAN's condensed tree they fall
    out of the root (noise) instead of being swallowed by whichever cluster the tie order happened to put them in.
    Each part big enough becomes a cluster candidate born at the threshold, which HDBSCAN may keep or split.
    """
    sizes = np.bincount(part_of, minlength=parts)
    firsts = np.full(parts, len(part_of), dtype=np.int64)
    np.minimum.at(firsts, part_of, np.arange(len(part_of)))
    hub = int(np.lexsort((firsts, -sizes))[0])  # largest part, ties by first row
    others = np.array([p for p in range(parts) if p != hub], dtype=np.int64)
    base = max(float(np.sqrt(2.0 - 2.0 * params.similarity)), float(weights.max(initial=0.0)), floor) * BRIDGE_FACTOR
    bridge = np.where(sizes[others] >= max(2, params.min_cluster_size), base, base * BRIDGE_FACTOR)
    return (
        np.concatenate([rows, np.full(len(others), firsts[hub])]),
        np.concatenate([cols, firsts[others]]),
        np.concatenate([weights, bridge]),
    )


def _attach_duplicates(labels: np.ndarray, neighbours: np.ndarray, sims: np.ndarray) -> np.ndarray:
    """Noise rows that restate a clustered row (cosine >= SAME_TEXT_COSINE) join that row's cluster.

    Distances below that level are floored, so a mass of near-identical rows is a plateau of equal distances on
    which HDBSCAN's selection is arbitrary and can leave some of them out; the same text is the same rule.
    """
    labels = labels.copy()
    close = (sims >= SAME_TEXT_COSINE) & (neighbours >= 0)
    for _ in range(_MAX_REFINEMENTS):
        noise = np.flatnonzero((labels == NOISE) & close.any(axis=1))
        if len(noise) == 0:
            break
        theirs = np.where(close[noise], labels[np.where(neighbours[noise] >= 0, neighbours[noise], 0)], NOISE)
        has = theirs >= 0
        first = np.argmax(has, axis=1)  # the most similar clustered near-duplicate
        found = has[np.arange(len(noise)), first]
        if not found.any():
            break
        labels[noise[found]] = theirs[np.arange(len(noise)), first][found]
    return labels


def _merge_fragments(unit: np.ndarray, labels: np.ndarray, similarity: float) -> np.ndarray:
    """Average-linkage agglomeration over HDBSCAN's clusters: merge two clusters while the mean cosine similarity
    over all pairs of their members is >= `similarity` (exact, from the clusters' sum vectors), best pair first.

    HDBSCAN with min_cluster_size 2 can cut one rule's members into a few dense fragments; this is the same merge
    rule the agglomerative path applies, so a threshold means the same thing below and above 50 rows.
    """
    import heapq

    from scipy.sparse import csr_matrix

    labels = _renumber(labels)
    k = int(labels.max(initial=NOISE)) + 1
    if k < 2:
        return labels
    clustered = np.flatnonzero(labels >= 0)
    onehot = csr_matrix((np.ones(len(clustered), np.float32), (labels[clustered], clustered)), shape=(k, len(unit)))
    sums = np.asarray(onehot @ unit, dtype=np.float64)
    sizes = np.bincount(labels[clustered], minlength=k).astype(np.float64)
    centres = (sums / np.linalg.norm(sums, axis=1, keepdims=True)).astype(np.float32)
    near, near_sims = knn_cosine(centres, min(MERGE_CANDIDATES, k - 1))
    neighbours: list[set[int]] = [set() for _ in range(k)]
    for a, b in zip(np.repeat(np.arange(k), near.shape[1]).tolist(), near.ravel().tolist()):
        if b >= 0:
            neighbours[a].add(b)
            neighbours[b].add(a)
    version = [0] * k
    alive = [True] * k

    def mean_similarity(a: int, b: int) -> float:
        return float(sums[a] @ sums[b]) / (sizes[a] * sizes[b])

    heap: list[tuple[float, int, int, int, int]] = []

    def push(a: int, b: int) -> None:
        a, b = min(a, b), max(a, b)
        value = mean_similarity(a, b)
        if value >= similarity - _TOLERANCE:
            heapq.heappush(heap, (-value, a, b, version[a], version[b]))

    for a in range(k):
        for b in neighbours[a]:
            if a < b:
                push(a, b)
    into = np.arange(k)
    while heap:
        _, a, b, va, vb = heapq.heappop(heap)
        if not (alive[a] and alive[b]) or version[a] != va or version[b] != vb:
            continue
        sums[a] += sums[b]
        sizes[a] += sizes[b]
        alive[b] = False
        into[b] = a
        version[a] += 1
        neighbours[a] = {c for c in neighbours[a] | neighbours[b] if alive[c] and c != a}
        for c in neighbours[a]:
            neighbours[c].discard(b)
            neighbours[c].add(a)
            push(a, c)
    for c in range(k):  # follow merge chains (a cluster that absorbed others may be absorbed itself later)
        root = c
        while into[root] != root:
            root = into[root]
        into[c] = root
    out = labels.copy()
    out[clustered] = into[labels[clustered]]
    return _renumber(out)


def _mean_pairwise_cosine(unit: np.ndarray) -> float:
    """Mean cosine similarity over all pairs of distinct rows, from the sum vector in O(n·dim)."""
    n = len(unit)
    total = unit.sum(axis=0, dtype=np.float64)
    return float((total @ total - n) / (n * (n - 1)))


def _accept(unit: np.ndarray, labels: np.ndarray, users: np.ndarray, params: ClusterParams) -> np.ndarray:
    """Apply the centroid-similarity, size and distinct-user rules to raw cluster labels."""
    from scipy.sparse import csr_matrix

    labels = _renumber(labels.copy())
    n = len(unit)
    for _ in range(_MAX_REFINEMENTS):
        clustered = np.flatnonzero(labels >= 0)
        if len(clustered) == 0:
            break
        k = int(labels.max()) + 1
        onehot = csr_matrix((np.ones(len(clustered), np.float32), (labels[clustered], clustered)), shape=(k, n))
        sums = np.asarray(onehot @ unit, dtype=np.float64)
        centroids = (sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)).astype(np.float32)
        sims = np.einsum("ij,ij->i", unit[clustered], centroids[labels[clustered]])
        outliers = clustered[sims < params.similarity - _TOLERANCE]
        if len(outliers) == 0:
            break
        labels[outliers] = NOISE
    clustered = np.flatnonzero(labels >= 0)
    if len(clustered) == 0:
        return labels
    k = int(labels.max()) + 1
    sizes = np.bincount(labels[clustered], minlength=k)
    pairs = np.unique(np.stack([labels[clustered], users[clustered]], axis=1), axis=0)
    distinct = np.bincount(pairs[:, 0], minlength=k)
    ok = (sizes >= max(2, params.min_cluster_size)) & (distinct >= max(1, params.min_distinct_users))
    labels[clustered[~ok[labels[clustered]]]] = NOISE
    return labels


def _renumber(labels: np.ndarray) -> np.ndarray:
    """Labels renumbered 0..k-1 in order of each cluster's smallest row index; noise stays -1."""
    out = np.full(len(labels), NOISE, dtype=np.int64)
    clustered = np.flatnonzero(labels >= 0)
    if len(clustered) == 0:
        return out
    _, first = np.unique(labels[clustered], return_index=True)  # first row of each label (rows are in order)
    old = labels[clustered][np.sort(first)]
    lookup = np.full(int(labels.max()) + 1, NOISE, dtype=np.int64)
    lookup[old] = np.arange(len(old))
    out[clustered] = lookup[labels[clustered]]
    return out


def _user_codes(user_ids: Sequence[Any]) -> np.ndarray:
    codes: dict[str, int] = {}
    return np.fromiter((codes.setdefault(str(u), len(codes)) for u in user_ids), dtype=np.int64, count=len(user_ids))
