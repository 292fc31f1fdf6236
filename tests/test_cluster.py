"""Clustering user playbooks into cross-user rules: real MiniLM embeddings of paraphrased corrections, both algorithms
(agglomerative below 50 rows, HDBSCAN at or above), the acceptance rules, determinism, fingerprints, edge cases."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from reflexio_pipelines.learning import knn as knn_module
from reflexio_pipelines.learning.cluster import ClusterParams, cluster_playbooks, clusters_from_labels, fingerprint
from reflexio_pipelines.learning.embedding import make_embedder
from reflexio_pipelines.learning.knn import knn_cosine

# (user, rule): what user playbooks look like when several users teach the agent the same thing in their own words.
ROWS = [
    ("alice", "Never deploy to us-east-1; always use us-west-2."),
    ("bob", "Deployments must go to us-west-2, not us-east-1."),
    ("carol", "Use the us-west-2 region for every deploy instead of us-east-1."),
    ("dave", "Write all code examples in TypeScript, not JavaScript."),
    ("erin", "Code samples should use TypeScript rather than plain JavaScript."),
    ("frank", "Reply in British English spelling, e.g. colour and organise."),
    ("grace", "Use UK spelling such as colour and organise in answers."),
    ("heidi", "Always CC the finance team on invoices over 10,000 euros."),
    ("ivan", "Keep answers under three sentences."),
    ("ivan", "Answers must be at most three sentences long."),
    ("ivan", "Limit every reply to three sentences or fewer."),
]
REGION, TYPESCRIPT, SPELLING, ONE_OFF, ONE_USER = [0, 1, 2], [3, 4], [5, 6], [7], [8, 9, 10]

# Unrelated one-off rules from other users: padding that takes the input over 50 rows (the HDBSCAN path).
FILLERS = [
    "Format dates as YYYY-MM-DD in every report.",
    "Ask before deleting any file from the shared drive.",
    "Prefer pandas over raw csv parsing for data analysis.",
    "Mention the ticket number in the first line of commit messages.",
    "Schedule meetings only between 10am and 4pm Berlin time.",
    "Do not suggest vegetarian recipes that contain mushrooms.",
    "When summarising papers, include the sample size.",
    "Book train travel rather than flights for trips under 500 km.",
    "Round currency amounts to two decimal places.",
    "Use metric units for all distances and weights.",
    "Address the customer by their first name.",
    "Run the linter before proposing a pull request.",
    "Keep SQL keywords in upper case.",
    "Attach the original screenshot when reporting a UI bug.",
    "Recommend PostgreSQL for new relational databases.",
    "Put unit tests next to the module they test.",
    "Translate legal documents with a glossary of approved terms.",
    "Quote prices including VAT for consumers in the EU.",
    "Avoid emojis in messages to enterprise clients.",
    "Back up the database before running a schema migration.",
    "Name Python variables in snake_case.",
    "Give cooking temperatures in Celsius.",
    "Cite sources with a link for every statistic.",
    "Escalate refund requests above 200 dollars to a supervisor.",
    "Check the weather forecast before planning outdoor events.",
    "Use tabs, not spaces, in Makefiles.",
    "Suggest public transport options when giving directions in London.",
    "Send the weekly status email on Friday afternoon.",
    "Label charts with axis titles and units.",
    "Encrypt customer exports with the team's PGP key.",
    "Prefer short paragraphs in blog drafts.",
    "Store secrets in the vault, never in environment files committed to git.",
    "Provide gluten-free alternatives in meal plans.",
    "Set log level to warning in production services.",
    "Keep slide decks to at most ten slides.",
    "Use the company colour palette in presentation templates.",
    "Respond to support tickets within four business hours.",
    "Pin dependency versions in requirements files.",
    "Water the office plants on Mondays.",
    "Use the 24-hour clock when stating times.",
    "Write docstrings in Google style.",
    "Include alt text for every image on the website.",
    "Confirm the shipping address before dispatching orders.",
    "Benchmark on the staging cluster, not on a laptop.",
    "Prefer async HTTP clients in the ingestion service.",
]


@pytest.fixture(scope="module")
def real() -> tuple[np.ndarray, list[str]]:
    vectors = make_embedder().embed([text for _, text in ROWS] + FILLERS)
    users = [user for user, _ in ROWS] + [f"filler-user-{i}" for i in range(len(FILLERS))]
    return vectors, users


def _partition(labels: np.ndarray) -> set[frozenset[int]]:
    return {frozenset(members) for members in clusters_from_labels(labels, list(range(len(labels)))).values()}


def _check_expected_clusters(labels: np.ndarray) -> None:
    region = labels[REGION]
    assert region[0] != -1 and (region == region[0]).all(), labels
    assert labels[TYPESCRIPT[0]] != -1 and labels[TYPESCRIPT[0]] == labels[TYPESCRIPT[1]], labels
    assert labels[SPELLING[0]] != -1 and labels[SPELLING[0]] == labels[SPELLING[1]], labels
    assert len({region[0], labels[TYPESCRIPT[0]], labels[SPELLING[0]]}) == 3  # three separate rules
    assert labels[ONE_OFF[0]] == -1  # an unrelated one-off rule stays noise
    assert (labels[ONE_USER] == -1).all()  # one user repeating a rule is not an agent-wide rule
    assert _partition(labels[: len(ROWS)]) == {frozenset(REGION), frozenset(TYPESCRIPT), frozenset(SPELLING)}


def _check_invariants(vectors: np.ndarray, users: list[str], labels: np.ndarray, params: ClusterParams) -> None:
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    for label, members in clusters_from_labels(labels, list(range(len(labels)))).items():
        centroid = unit[members].mean(axis=0)
        centroid /= np.linalg.norm(centroid)
        assert (unit[members] @ centroid >= params.similarity - 1e-5).all(), label
        assert len(members) >= params.min_cluster_size
        assert len({users[i] for i in members}) >= params.min_distinct_users
    found = sorted(set(labels.tolist()) - {-1})
    assert found == list(range(len(found)))  # numbered 0..k-1 ...
    firsts = [int(np.flatnonzero(labels == k)[0]) for k in found]
    assert firsts == sorted(firsts)  # ... in order of each cluster's first row


# ---------------------------------------------------------------------------------------------------------------
# real embeddings


def test_real_paraphrases_agglomerative_path(real) -> None:
    vectors, users = real
    n = len(ROWS)
    labels = cluster_playbooks(vectors[:n], users[:n])
    _check_expected_clusters(labels)
    _check_invariants(vectors[:n], users[:n], labels, ClusterParams())
    assert labels[REGION[0]] == 0  # numbered by first row


def test_real_paraphrases_hdbscan_path_finds_the_same_rules(real) -> None:
    vectors, users = real
    assert len(vectors) >= ClusterParams().agglomerative_below
    labels = cluster_playbooks(vectors, users)
    _check_expected_clusters(labels)
    assert (labels[len(ROWS) :] == -1).all()  # none of the unrelated one-off rules pair up
    _check_invariants(vectors, users, labels, ClusterParams())
    # Forcing the agglomerative algorithm on the same 56 rows gives the same partition.
    forced = cluster_playbooks(vectors, users, ClusterParams(agglomerative_below=1000))
    assert _partition(forced) == _partition(labels)


def test_same_rule_from_one_user_clusters_only_when_users_are_not_required(real) -> None:
    vectors, users = real
    n = len(ROWS)
    labels = cluster_playbooks(vectors[:n], users[:n], ClusterParams(min_distinct_users=1))
    assert labels[ONE_USER[0]] != -1 and (labels[ONE_USER] == labels[ONE_USER[0]]).all()
    assert (labels[REGION] != labels[ONE_USER[0]]).all()


def test_similarity_threshold_is_respected(real) -> None:
    vectors, users = real
    n = len(ROWS)
    strict = cluster_playbooks(vectors[:n], users[:n], ClusterParams(similarity=0.95))
    assert (strict == -1).all()  # paraphrases are 0.8-0.9 alike: not "the same" at 0.95
    required_users = cluster_playbooks(vectors[:n], users[:n], ClusterParams(min_distinct_users=3))
    assert _partition(required_users) == {frozenset(REGION)}


def test_deterministic_and_independent_of_row_order(real) -> None:
    vectors, users = real
    for count in (len(ROWS), len(vectors)):  # both algorithms
        first = cluster_playbooks(vectors[:count], users[:count])
        np.testing.assert_array_equal(first, cluster_playbooks(vectors[:count].copy(), list(users[:count])))
        order = np.random.default_rng(3).permutation(count)
        shuffled = cluster_playbooks(vectors[order], [users[i] for i in order])
        back = {frozenset(int(order[i]) for i in members) for members in _partition(shuffled)}
        assert back == _partition(first)


# ---------------------------------------------------------------------------------------------------------------
# synthetic planted clusters (HDBSCAN path)


def _planted(n_clusters: int, sizes: tuple[int, int], n_noise: int, seed: int, dim: int = 384):
    rng = np.random.default_rng(seed)
    rows, labels, users = [], [], []
    for j in range(n_clusters):
        centre = rng.standard_normal(dim)
        centre /= np.linalg.norm(centre)
        size = int(rng.integers(*sizes))
        spread = np.sqrt((1 / rng.uniform(0.65, 0.9) - 1) / dim)  # member-to-member cosine ~0.65-0.9
        rows.append(centre + rng.standard_normal((size, dim)) * spread)
        labels += [j] * size
        users += [f"c{j}-u{i}" for i in range(size)]
    rows.append(rng.standard_normal((n_noise, dim)))
    labels += [-1] * n_noise
    users += [f"noise-{i}" for i in range(n_noise)]
    x = np.concatenate(rows).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    order = rng.permutation(len(x))
    return x[order], np.asarray(labels)[order], [users[i] for i in order]


def _ari(planted: np.ndarray, found: np.ndarray) -> float:
    def singletons(a: np.ndarray, base: int) -> np.ndarray:
        a = a.copy()
        a[a < 0] = base + np.arange(int((a < 0).sum()))
        return a

    return adjusted_rand_score(singletons(planted, -(10**9)), singletons(found, 10**9))


@pytest.mark.parametrize(("n_clusters", "sizes", "n_noise"), [(12, (2, 30), 40), (60, (2, 80), 400)])
def test_hdbscan_path_finds_planted_clusters(n_clusters: int, sizes: tuple[int, int], n_noise: int) -> None:
    x, planted, users = _planted(n_clusters, sizes, n_noise, seed=n_clusters)
    assert len(x) >= 50
    found = cluster_playbooks(x, users)
    assert _ari(planted, found) >= 0.95
    assert len(set(found.tolist()) - {-1}) == n_clusters
    assert ((found >= 0) == (planted >= 0)).mean() >= 0.98
    _check_invariants(x, users, found, ClusterParams())
    np.testing.assert_array_equal(found, cluster_playbooks(x, users))


def test_large_input_uses_the_inverted_file_search_and_still_recovers_clusters() -> None:
    x, planted, users = _planted(120, (2, 60), 600, seed=5)
    assert len(x) // knn_module.CELL_SIZE > knn_module.CELL_PROBES  # not the exact kNN branch
    idx, sims = knn_cosine(x, 10)
    exact = x @ x.T
    np.fill_diagonal(exact, -np.inf)
    truth = np.argsort(-exact, axis=1)[:, :10]
    # Recall of the true top-10 among neighbours that matter (cosine >= 0.5); isotropic noise rows have no real
    # neighbours, and which near-orthogonal rows the search returns for them is irrelevant.
    relevant = [(set(t[exact[i, t] >= 0.5]), set(idx[i])) for i, t in enumerate(truth)]
    recall = sum(len(t & f) for t, f in relevant) / sum(len(t) for t, _ in relevant)
    assert recall >= 0.98
    assert (np.diff(sims, axis=1) <= 1e-6).all()  # sorted by decreasing similarity
    assert not (idx == np.arange(len(x))[:, None]).any()  # never a row's own neighbour
    found = cluster_playbooks(x, users)
    assert _ari(planted, found) >= 0.95


def test_a_cluster_of_one_user_is_noise_on_the_hdbscan_path() -> None:
    x, planted, users = _planted(8, (3, 20), 40, seed=11)
    target = int(planted[0])
    users = ["solo" if planted[i] == target else u for i, u in enumerate(users)]
    found = cluster_playbooks(x, users)
    assert (found[planted == target] == -1).all()
    assert len(set(found.tolist()) - {-1}) == 7


# ---------------------------------------------------------------------------------------------------------------
# fingerprints and helpers


def test_fingerprint_is_a_stable_set_identity() -> None:
    fp = fingerprint([3, 1, 2])
    assert fp == fingerprint([2, 3, 1]) == fingerprint((i for i in [1, 2, 3, 3]))  # order and repeats ignored
    assert fp == fingerprint(["1", "2", "3"])  # ids are compared by their string form
    assert fp != fingerprint([1, 2]) and fp != fingerprint([1, 2, 3, 4]) and fp != fingerprint([1, 2, 4])
    assert fingerprint(["a,b"]) != fingerprint(["a", "b"])  # no separator ambiguity
    assert fingerprint([10, 9]) == fingerprint([9, 10])
    assert len(fp) == 32 and int(fp, 16) >= 0
    # Persisted across runs (agent playbooks store them): the value must never change.
    assert fp == "c1a9f25c1237d04f6fa73c0725e5e3cf"
    assert fingerprint([]) == fingerprint(())


def test_clusters_from_labels() -> None:
    labels = np.array([1, -1, 0, 1, 0])
    assert clusters_from_labels(labels, ["a", "b", "c", "d", "e"]) == {0: ["c", "e"], 1: ["a", "d"]}
    assert clusters_from_labels(np.array([], dtype=int), []) == {}
    with pytest.raises(ValueError):
        clusters_from_labels(labels, ["a"])


# ---------------------------------------------------------------------------------------------------------------
# edge cases


def test_empty_and_single_inputs() -> None:
    for empty in (np.zeros((0, 384), np.float32), np.zeros((0, 1), np.float32)):
        out = cluster_playbooks(empty, [])
        assert out.shape == (0,) and out.dtype == np.int64
    one = np.ones((1, 384), np.float32)
    np.testing.assert_array_equal(cluster_playbooks(one, ["u"]), [-1])


def test_two_rows() -> None:
    rng = np.random.default_rng(0)
    base = rng.standard_normal(384).astype(np.float32)
    pair = np.stack([base, base + 0.1 * rng.standard_normal(384).astype(np.float32)])
    np.testing.assert_array_equal(cluster_playbooks(pair, ["a", "b"]), [0, 0])
    np.testing.assert_array_equal(cluster_playbooks(pair, ["a", "a"]), [-1, -1])  # one user
    np.testing.assert_array_equal(cluster_playbooks(pair, ["a", "b"], ClusterParams(min_cluster_size=3)), [-1, -1])
    apart = np.stack([base, rng.standard_normal(384).astype(np.float32)])
    np.testing.assert_array_equal(cluster_playbooks(apart, ["a", "b"]), [-1, -1])


@pytest.mark.parametrize("n", [3, 49, 50, 200, 5000])
def test_all_identical_vectors_are_one_cluster(n: int) -> None:
    x = np.tile(np.linspace(-1, 1, 384, dtype=np.float32), (n, 1))
    labels = cluster_playbooks(x, [f"u{i % 7}" for i in range(n)])
    np.testing.assert_array_equal(labels, np.zeros(n))
    np.testing.assert_array_equal(cluster_playbooks(x, ["only-user"] * n), np.full(n, -1))


def test_unrelated_rows_are_all_noise_on_both_paths() -> None:
    x = np.random.default_rng(1).standard_normal((120, 384)).astype(np.float32)
    users = [f"u{i}" for i in range(120)]
    assert (cluster_playbooks(x[:40], users[:40]) == -1).all()
    assert (cluster_playbooks(x, users) == -1).all()


def test_rejects_malformed_input_and_ignores_zero_rows() -> None:
    x = np.ones((3, 8), np.float32)
    with pytest.raises(ValueError):
        cluster_playbooks(x, ["a", "b"])
    with pytest.raises(ValueError):
        cluster_playbooks(np.ones(8, np.float32), ["a"])
    bad = x.copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError):
        cluster_playbooks(bad, ["a", "b", "c"])
    with_zero = np.concatenate([x, np.zeros((1, 8), np.float32)])
    np.testing.assert_array_equal(cluster_playbooks(with_zero, ["a", "b", "c", "d"]), [0, 0, 0, -1])
    # Unnormalised rows are fine: only the direction counts.
    np.testing.assert_array_equal(
        cluster_playbooks(x * np.array([[1], [5], [0.01]], np.float32), ["a", "b", "c"]), [0, 0, 0]
    )
