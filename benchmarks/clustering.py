"""Clustering user playbooks at scale: `cluster_playbooks` against the original's algorithms, on synthetic
384-d embeddings with PLANTED clusters.

The data imitates all-MiniLM-L6-v2 embeddings of short behavioural rules (see `make_dataset`): an anisotropic
background with a shared mean direction (unrelated rules have cosine ~0.0-0.35, as real MiniLM sentence pairs do),
topics, rule clusters whose members are paraphrases (mean within-cluster cosine 0.6-0.9, anisotropic per-cluster
spread), many small clusters of 2-5 users, one-off rules (noise) and single users repeating one rule (which must NOT
become clusters: planted as noise). Dataset statistics are measured and reported next to the results.

Per size it reports: wall time of `cluster_playbooks` (p50/p95 over `--repeats` runs; `--repeats-large` for sizes
above 20,000), peak memory, adjusted Rand index against the planted labels, and the clusters found vs planted.

- Peak memory = peak RSS during the call minus RSS before it, in a FRESH child process that has already imported
  the libraries, loaded the input and made a 200-row warm-up call (so it covers numpy, BLAS, scipy and hdbscan
  allocations of the clustering call itself, not the input). Peak RSS is the kernel's VmHWM reset just before the
  call, the same counter as getrusage's ru_maxrss but resettable (ru_maxrss is inherited from this large parent
  process over fork/exec, so its delta reads 0). The same child then repeats the call under tracemalloc and reports
  that peak too (numpy and Python allocations only).
- ARI ("ari_all") is over ALL rows, planted noise and predicted noise each a singleton label (a noise row is a
  cluster of its own); "ari_planted" is over rows of planted clusters only (predicted noise still singletons).
  Diagnostics: planted clusters split over several found clusters ("split"), found clusters mixing several planted
  clusters ("mixed"), planted clusters lost entirely ("lost"; "lost_below_threshold": of those, the ones whose
  members' mean pair cosine is below 0.5, which no algorithm at this threshold should return), found clusters made
  only of planted noise rows ("found_only_noise": one-off rules at least 0.5 alike pairing up), single-user groups
  with a row in some found cluster (absorbed into a neighbouring cluster), and found clusters with a single user
  (must be 0 for ours).

Baselines, run only up to `--baseline-max` rows (both need an n x n matrix: 0.8 GB at 10k, 80 GB at 100k):
- `original_agglomerative`: the original's small-input algorithm on the whole set (sklearn average linkage, cosine,
  distance_threshold 0.5; clusters below min_cluster_size dropped) — the quality reference;
- `original_hdbscan`: the original's large-input algorithm: dense cosine distance matrix,
  hdbscan(min_cluster_size=2, min_samples=1, metric="precomputed", cluster_selection_epsilon=0.5).
Neither has the original's 100-newest input limit: this measures the algorithms, not that cap.

    .venv/bin/python -m benchmarks.clustering [--sizes 10000,100000] [--repeats 5] [--repeats-large 3] [--seed 7]
                                             [--baseline-max 20000] [--out benchmarks/results/clustering.json]

The default run takes about 3 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import ROOT, percentile, status_kib, write_result
from reflexio_pipelines.learning import cluster as cluster_module
from reflexio_pipelines.learning import knn as knn_module
from reflexio_pipelines.learning.cluster import ClusterParams, cluster_playbooks

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "clustering.json"
DIM = 384
TARGET_SECONDS_100K = 60.0
TARGET_ARI = 0.9
LARGE = 20_000  # sizes above this use --repeats-large


# ---------------------------------------------------------------------------------------------------------------
# synthetic data
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class Dataset:
    vectors: np.ndarray  # (n, DIM) float32, unit rows
    labels: np.ndarray  # planted cluster per row, -1 = noise (one-off rules and single-user repeats)
    user_ids: list[str]
    cluster_sizes: list[int]
    single_user_group: np.ndarray  # id of the single-user repeat group per row, -1 if none


def make_dataset(
    n: int, seed: int, *, noise_frac: float = 0.15, single_user_frac: float = 0.01, rows_per_user: int = 10
) -> Dataset:
    """`n` unit vectors with planted clusters shaped like MiniLM embeddings of paraphrased rules.

    - Background ("any rule"): a Gaussian with a power-law spectrum (variance ~ rank^-0.7, effective dimension ~95)
      in a random basis, normalised, plus a shared mean direction of weight 0.3 (MiniLM embeddings share one: the
      mean cosine of unrelated sentences is ~0.13). 3,000 real MiniLM embeddings of this repo's docs: pair cosine
      median 0.13, p95 0.37, effective dimension 65; this background: median ~0.13, p95 ~0.29.
    - Topics (one per ~15 clusters); a cluster centre = sqrt(0.3) * topic + sqrt(0.7) * background, normalised, so
      centres of one topic have cosine ~0.3-0.45 and of different topics ~0.1.
    - Cluster sizes: 40% small (2-5 rows), the rest log-normal (median 25, sigma 1, capped at 1,000).
    - Members = centre + noise, normalised; the noise is background-shaped plus 3 cluster-specific directions at
      twice the amplitude (anisotropic), scaled to a per-cluster target mean pair cosine drawn from U(0.6, 0.9).
    - Users: n / rows_per_user users; a cluster's members come from distinct users, except that 10% of members
      after the first two repeat a user already in the cluster (someone restating their rule).
    - `single_user_frac` of rows: groups of 2-4 paraphrases (cosine ~0.75-0.9) all from ONE user: planted noise.
    - `noise_frac` of rows: one-off rules, each a fresh cluster centre (so they share topics with real clusters).
    """
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((DIM, DIM)))
    spectrum = np.arange(1, DIM + 1) ** -0.35
    spectrum /= np.sqrt((spectrum**2).sum())
    mean_direction = rng.standard_normal(DIM)
    mean_direction /= np.linalg.norm(mean_direction)

    def shaped(count: int) -> np.ndarray:  # zero-mean anisotropic noise, E|x|^2 = 1
        return (rng.standard_normal((count, DIM)) * spectrum) @ basis.T

    def unit(rows: np.ndarray) -> np.ndarray:
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    def background(count: int) -> np.ndarray:
        return unit(0.3 * mean_direction + np.sqrt(1 - 0.09) * unit(shaped(count)))

    n_noise = int(round(noise_frac * n))
    n_single = int(round(single_user_frac * n))
    n_clustered = n - n_noise - n_single
    sizes: list[int] = []
    while sum(sizes) < n_clustered:
        size = int(rng.integers(2, 6)) if rng.random() < 0.4 else int(min(1000, max(6, rng.lognormal(np.log(25), 1.0))))
        size = min(size, n_clustered - sum(sizes))
        if size < 2:  # a remainder of 1 joins the previous cluster
            sizes[-1] += size
            break
        sizes.append(size)
    topics = background(max(1, len(sizes) // 15))

    def centres(count: int) -> np.ndarray:
        picked = topics[rng.integers(0, len(topics), count)]
        return unit(np.sqrt(0.3) * picked + np.sqrt(0.7) * background(count))

    n_users = max(10, n // rows_per_user)
    vectors = np.empty((n, DIM), dtype=np.float32)
    labels = np.full(n, -1, dtype=np.int64)
    single = np.full(n, -1, dtype=np.int64)
    users = np.empty(n, dtype=np.int64)
    pos = 0
    for j, (size, centre) in enumerate(zip(sizes, centres(len(sizes)))):
        within = rng.uniform(0.6, 0.9)  # target mean cosine between two members
        directions = unit(rng.standard_normal((3, DIM)))
        noise = shaped(size) + 2.0 * rng.standard_normal((size, 3)) @ directions
        noise *= np.sqrt((1.0 / within - 1.0) / np.mean((noise**2).sum(axis=1)))
        vectors[pos : pos + size] = unit(centre + noise)
        labels[pos : pos + size] = j
        members = rng.choice(n_users, size=size, replace=size > n_users)
        for i in range(2, size):  # the first two are always distinct users: every planted rule is cross-user
            if rng.random() < 0.1:
                members[i] = members[rng.integers(0, i)]
        users[pos : pos + size] = members
        pos += size
    group = 0
    while pos < n - n_noise:
        size = min(int(rng.integers(2, 5)), n - n_noise - pos)
        within = rng.uniform(0.75, 0.9)
        noise = shaped(size) * np.sqrt(1.0 / within - 1.0)
        vectors[pos : pos + size] = unit(centres(1)[0] + noise)
        users[pos : pos + size] = rng.integers(n_users)
        single[pos : pos + size] = group
        group += 1
        pos += size
    vectors[pos:] = centres(n - pos)
    users[pos:] = rng.integers(0, n_users, n - pos)
    order = rng.permutation(n)
    return Dataset(vectors[order], labels[order], [f"user-{u}" for u in users[order]], sizes, single[order])


def dataset_stats(data: Dataset, seed: int) -> dict[str, Any]:
    """Measured cosine statistics of the synthetic data (sampled), to compare with real text embeddings."""
    rng = np.random.default_rng(seed + 1)
    x, y = data.vectors, data.labels
    n = len(x)
    k = int(y.max()) + 1
    order = np.argsort(y, kind="stable")
    bounds = np.searchsorted(y[order], np.arange(-1, k + 1))
    within = []
    for j in rng.choice(k, size=min(k, 400), replace=False):
        idx = order[bounds[j + 1] : bounds[j + 2]]
        if len(idx) >= 2:
            sims = x[idx] @ x[idx].T
            within.append(float(sims[np.triu_indices(len(idx), 1)].mean()))
    sums = np.zeros((k, DIM))
    np.add.at(sums, y[y >= 0], x[y >= 0])
    centres = sums / np.linalg.norm(sums, axis=1, keepdims=True)
    a, b = rng.integers(0, k, 200_000), rng.integers(0, k, 200_000)
    between = np.einsum("ij,ij->i", centres[a[a != b]], centres[b[a != b]])
    i, j = rng.integers(0, n, 200_000), rng.integers(0, n, 200_000)
    different = (i != j) & ((y[i] != y[j]) | (y[i] < 0))
    random_pairs = np.einsum("ij,ij->i", x[i[different]], x[j[different]])
    noise_rows = rng.choice(np.flatnonzero(y < 0), size=min(1000, int((y < 0).sum())), replace=False)
    nearest = []
    for start in range(0, len(noise_rows), 250):
        block = noise_rows[start : start + 250]
        sims = x[block] @ x.T
        sims[np.arange(len(block)), block] = -np.inf
        nearest.append(sims.max(axis=1))
    pct = (5, 50, 95, 99)

    def percentiles(values: np.ndarray) -> dict[str, float]:
        return {f"p{p}": round(float(v), 3) for p, v in zip(pct, np.percentile(values, pct))}

    sizes = np.asarray(data.cluster_sizes)
    return {
        "planted_clusters": k,
        "planted_small_clusters_2_to_5": int((sizes <= 5).sum()),
        "largest_cluster": int(sizes.max()),
        "noise_rows": int((y < 0).sum()),
        "single_user_groups": int(data.single_user_group.max() + 1),
        "users": len(set(data.user_ids)),
        "within_cluster_mean_cosine": percentiles(np.asarray(within)),
        "between_cluster_centroid_cosine": percentiles(between),
        "unrelated_pair_cosine": percentiles(random_pairs),
        "noise_row_nearest_neighbour_cosine": percentiles(np.concatenate(nearest)),
    }


# ---------------------------------------------------------------------------------------------------------------
# metrics
# ---------------------------------------------------------------------------------------------------------------


def _singletons(labels: np.ndarray, base: int) -> np.ndarray:
    out = labels.copy()
    noise = out < 0
    out[noise] = base + np.arange(int(noise.sum()))
    return out


def _mean_pair_cosine(rows: np.ndarray) -> float:
    sims = rows @ rows.T
    return float(sims[np.triu_indices(len(rows), 1)].mean())


def quality(data: Dataset, found: np.ndarray) -> dict[str, Any]:
    from sklearn.metrics import adjusted_rand_score

    planted = data.labels
    in_planted = planted >= 0
    both = in_planted & (found >= 0)
    pairs = set(zip(planted[both].tolist(), found[both].tolist()))
    found_per_planted = Counter(p for p, _ in pairs)
    planted_per_found = Counter(f for _, f in pairs)
    found_ids = set(found[found >= 0].tolist())
    lost = [j for j in range(int(planted.max()) + 1) if j not in found_per_planted]
    only_noise = {f for f in found_ids if f not in planted_per_found}
    singles = data.single_user_group >= 0
    accepted_single = {int(g) for g in data.single_user_group[singles & (found >= 0)]}
    users_of: dict[int, set[str]] = {}
    for f, user in zip(found.tolist(), data.user_ids):
        if f >= 0:
            users_of.setdefault(f, set()).add(user)
    return {
        "ari_all": round(float(adjusted_rand_score(_singletons(planted, -(10**9)), _singletons(found, 10**9))), 4),
        "ari_planted": round(float(adjusted_rand_score(planted[in_planted], _singletons(found[in_planted], 10**9))), 4),
        "clusters_found": len(found_ids),
        "clusters_planted": int(planted.max()) + 1,
        "planted_recovered": len(found_per_planted),
        "planted_split": sum(1 for v in found_per_planted.values() if v > 1),
        "found_mixing_planted": sum(1 for v in planted_per_found.values() if v > 1),
        "planted_lost": len(lost),
        "planted_lost_below_threshold": sum(1 for j in lost if _mean_pair_cosine(data.vectors[planted == j]) < 0.5),
        "found_only_noise": len(only_noise),
        "planted_rows_as_noise": round(float(((found < 0) & in_planted).sum() / in_planted.sum()), 4),
        "noise_rows_clustered": round(float(((found >= 0) & ~in_planted).sum() / max(1, (~in_planted).sum())), 4),
        "single_user_groups_in_some_cluster": len(accepted_single),
        "found_single_user": sum(1 for f in found_ids if len(users_of.get(f, ())) < 2),
    }


# ---------------------------------------------------------------------------------------------------------------
# algorithms
# ---------------------------------------------------------------------------------------------------------------


def ours(vectors: np.ndarray, user_ids: list[str]) -> np.ndarray:
    return cluster_playbooks(vectors, user_ids, ClusterParams())


def original_agglomerative(vectors: np.ndarray, user_ids: list[str]) -> np.ndarray:
    from sklearn.cluster import AgglomerativeClustering

    raw = AgglomerativeClustering(
        n_clusters=None, distance_threshold=0.5, metric="cosine", linkage="average"
    ).fit_predict(vectors)
    counts = np.bincount(raw)
    return np.where(counts[raw] >= 2, raw, -1)


def original_hdbscan(vectors: np.ndarray, user_ids: list[str]) -> np.ndarray:
    import hdbscan

    x = vectors.astype(np.float64)
    distances = np.clip(1.0 - x @ x.T, 0.0, None)
    np.fill_diagonal(distances, 0.0)
    model = hdbscan.HDBSCAN(min_cluster_size=2, min_samples=1, metric="precomputed", cluster_selection_epsilon=0.5)
    raw = model.fit_predict(distances)
    counts = np.bincount(raw[raw >= 0], minlength=int(raw.max()) + 1)
    return np.where((raw >= 0) & (counts[np.maximum(raw, 0)] >= 2), raw, -1)


ALGORITHMS: dict[str, Callable[[np.ndarray, list[str]], np.ndarray]] = {
    "ours": ours,
    "original_agglomerative": original_agglomerative,
    "original_hdbscan": original_hdbscan,
}


# ---------------------------------------------------------------------------------------------------------------
# measurement
# ---------------------------------------------------------------------------------------------------------------


def _child_main(algorithm: str, path: str) -> None:
    """Child process: load the input, import everything, warm up, then report the clustering call's peak memory.

    Peak RSS is the kernel's VmHWM, reset to the current RSS just before the call (writing 5 to
    /proc/self/clear_refs). Not ru_maxrss: Linux carries a process's ru_maxrss over fork and exec, so a child
    started by this (large) benchmark process would report the parent's high-water mark.
    """
    import tracemalloc
    import warnings

    warnings.filterwarnings("ignore")
    import hdbscan  # noqa: F401
    import scipy.sparse.csgraph  # noqa: F401
    import sklearn.cluster  # noqa: F401

    with np.load(path, allow_pickle=False) as archive:
        vectors, users = archive["vectors"], [str(u) for u in archive["users"]]
    ALGORITHMS[algorithm](vectors[:200], users[:200])  # warm-up: lazy imports, first-call costs
    before = status_kib("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # reset VmHWM to the current RSS
        reset = True
    except OSError:
        reset = False
    started = time.perf_counter()
    ALGORITHMS[algorithm](vectors, users)
    seconds = time.perf_counter() - started
    peak = status_kib("VmHWM")
    tracemalloc.start()  # a second run, traced: what numpy/Python allocate at peak (no BLAS or C-internal buffers)
    ALGORITHMS[algorithm](vectors, users)
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        json.dumps(
            {
                "peak_rss_delta_mib": round((peak - before) / 1024, 1),
                "rss_before_mib": round(before / 1024, 1),
                "hwm_reset": reset,
                "tracemalloc_peak_mib": round(traced_peak / 2**20, 1),
                "seconds": round(seconds, 3),
            }
        )
    )


def peak_memory(algorithm: str, data: Dataset, workdir: Path) -> dict[str, Any]:
    path = workdir / f"input-{len(data.vectors)}.npz"
    if not path.exists():
        np.savez(path, vectors=data.vectors, users=np.asarray(data.user_ids))
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.clustering", "--_child", algorithm, str(path)],
        cwd=ROOT,  # `-m` finds the package from the working directory
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(algorithm: str, data: Dataset, repeats: int, workdir: Path) -> dict[str, Any]:
    import warnings

    fn = ALGORITHMS[algorithm]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn(data.vectors[:200], data.user_ids[:200])  # warm-up: lazy imports, first-call costs
    times, labels = [], None
    for _ in range(repeats):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            started = time.perf_counter()
            result = fn(data.vectors, data.user_ids)
            times.append(time.perf_counter() - started)
        if labels is None:
            labels = result
        elif algorithm == "ours" and not np.array_equal(labels, result):
            raise AssertionError("cluster_playbooks returned different labels for the same input")
    assert labels is not None
    out: dict[str, Any] = {
        "runs": repeats,
        "seconds": [round(t, 3) for t in times],
        "p50_s": percentile(times, 0.50),
        "p95_s": percentile(times, 0.95),
    }
    out.update(peak_memory(algorithm, data, workdir))
    out["child_seconds"] = out.pop("seconds")
    out.update(quality(data, labels))
    return out


# ---------------------------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--repeats", type=int, default=5, help="runs per size up to 20,000 rows")
    parser.add_argument("--repeats-large", type=int, default=3, help="runs per size above 20,000 rows")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--baseline-max", type=int, default=20_000, help="largest size the n x n baselines run at")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="clustering-bench-") as tmp:
        for n in sizes:
            started = time.perf_counter()
            data = make_dataset(n, args.seed)
            entry: dict[str, Any] = {
                "generate_s": round(time.perf_counter() - started, 2),
                "dataset": dataset_stats(data, args.seed),
            }
            repeats = args.repeats if n <= LARGE else args.repeats_large
            print(
                f"n={n:,}: dataset {entry['dataset']['planted_clusters']} planted clusters, "
                f"{entry['dataset']['noise_rows']} noise rows; running ours x{repeats} ...",
                flush=True,
            )
            entry["ours"] = measure("ours", data, repeats, Path(tmp))
            for name in ("original_agglomerative", "original_hdbscan"):
                if n > args.baseline_max:
                    what = "a condensed" if name == "original_agglomerative" else "an"
                    gib = n * n * 8 / 2**30 / (2 if name == "original_agglomerative" else 1)
                    entry[name] = {"skipped": f"needs {what} n x n float64 distance matrix ({gib:,.0f} GiB) at n={n:,}"}
                    continue
                print(f"n={n:,}: running baseline {name} ...", flush=True)
                entry[name] = measure(name, data, 1, Path(tmp))
                entry[name]["time_ratio_vs_ours"] = round(entry[name]["p50_s"] / entry["ours"]["p50_s"], 1)
            results[str(n)] = entry

    checks = {}
    for n, entry in results.items():
        checks[n] = {"ari_all>=0.9": entry["ours"]["ari_all"] >= TARGET_ARI}
        if int(n) >= 100_000:
            checks[n]["p50<60s"] = entry["ours"]["p50_s"] < TARGET_SECONDS_100K
    tuning = vars(cluster_module) | vars(knn_module)
    out = {
        "benchmark": "clustering",
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__},
        "params": {
            "sizes": sizes,
            "repeats": args.repeats,
            "repeats_large": args.repeats_large,
            "seed": args.seed,
            "baseline_max": args.baseline_max,
            "cluster_params": asdict(ClusterParams()),
            "tuning": {
                name: tuning[name]
                for name in (
                    "KNN_NEIGHBOURS",
                    "CORE_NEIGHBOURS",
                    "SAME_TEXT_COSINE",
                    "CELL_SIZE",
                    "CELL_PROBES",
                    "MAX_CELL",
                    "MERGE_FRAGMENTS",
                    "MERGE_CANDIDATES",
                )
            },
        },
        "memory_method": "peak_rss_delta_mib: VmHWM (peak RSS, reset just before the call) minus VmRSS before the "
        "call, in a fresh child process (input loaded, libraries imported, warmed up); "
        "tracemalloc_peak_mib: the same call traced, numpy/Python allocations only",
        "ari_method": "ari_all: all rows, noise rows (planted or found) as singletons; ari_planted: rows of planted "
        "clusters only, found noise as singletons",
        "results": results,
        "targets": {"seconds_at_100k": TARGET_SECONDS_100K, "ari": TARGET_ARI, "met": checks},
    }
    write_result(args.out, out)
    print_table(results)
    print(f"\nwrote {args.out}")


def print_table(results: dict[str, Any]) -> None:
    header = (
        f"{'n':>8} {'algorithm':<23} {'runs':>4} {'p50 s':>8} {'p95 s':>8} {'RSS MiB':>8} {'traced':>7} "
        f"{'ARI all':>8} {'ARI pl.':>8} {'found':>6} {'planted':>7} {'split':>6} {'mixed':>6} {'lost':>5} "
        f"{'x ours':>7}"
    )
    print("\n" + header)
    print("-" * len(header))
    for n, entry in results.items():
        for name in ("ours", "original_agglomerative", "original_hdbscan"):
            r = entry[name]
            if "skipped" in r:
                print(f"{int(n):>8,} {name:<23} skipped: {r['skipped']}")
                continue
            print(
                f"{int(n):>8,} {name:<23} {r['runs']:>4} {r['p50_s']:>8.2f} {r['p95_s']:>8.2f} "
                f"{r['peak_rss_delta_mib']:>8.0f} {r['tracemalloc_peak_mib']:>7.0f} "
                f"{r['ari_all']:>8.4f} {r['ari_planted']:>8.4f} "
                f"{r['clusters_found']:>6} {r['clusters_planted']:>7} {r['planted_split']:>6} "
                f"{r['found_mixing_planted']:>6} {r['planted_lost']:>5} "
                f"{r.get('time_ratio_vs_ours', 1.0):>7.1f}"
            )


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--_child":
        _child_main(sys.argv[2], sys.argv[3])
    else:
        main()
