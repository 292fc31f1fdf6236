"""The HNSW vector leg: chosen at build time by size, recorded and verified like the other index files, close to
exact search in recall, and never returning a row the filters reject."""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path

import numpy as np
import pytest

from reflexio_pipelines.files import sha256_file
from reflexio_pipelines.search import (
    IndexCorrupt,
    LoadedIndex,
    SearchDoc,
    SearchFilters,
    build_index,
    current_version,
    publish_index,
)
from reflexio_pipelines.search.ann import HNSW_MIN_ROWS, HnswParams, HnswVectors, build_hnsw, write_hnsw

NOW = 1_700_000_000
DIM = 64
CLUSTERS = 60
ROWS = 3_000
USERS = ("u0", "u1", "u2", "u3")
RARE_USER = "u-rare"  # 30 rows: selective enough that the vector leg scans them exactly
LOW_THRESHOLD = 1_000  # hnsw_min_rows for the HNSW builds: user playbooks (3,000) get a graph, profiles (20) do not
# Graph walks for every filter admitting more than 100 rows (the defaults would scan a 3,000-row type exactly).
PARAMS = HnswParams(exact_max_rows=100, exact_max_fraction=0.02)


class ClusteredEmbedder:
    """Text-like synthetic vectors: documents and queries named "c<k> ..." lie around cluster centre k (cosine to
    the centre ~0.8, like paraphrases in a sentence-embedding space), deterministically per text."""

    model_id = "test:clustered-64"
    dim = DIM

    def __init__(self) -> None:
        centres = np.random.default_rng(7).normal(size=(CLUSTERS, DIM))
        self.centres = (centres / np.linalg.norm(centres, axis=1, keepdims=True)).astype(np.float32)

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            cluster = int(text.split()[0].lstrip("c"))
            noise = np.random.default_rng(zlib.crc32(text.encode())).normal(0.0, 0.094, DIM)
            v = self.centres[cluster] + noise.astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out


def _corpus() -> list[SearchDoc]:
    rng = np.random.default_rng(11)
    docs = []
    for i in range(ROWS):
        cluster = int(rng.integers(CLUSTERS))
        user = RARE_USER if i % 100 == 0 else USERS[int(rng.integers(len(USERS)))]
        status = "archived" if rng.random() < 0.1 else "current"
        expires = NOW - 1 if rng.random() < 0.05 else None
        text = f"c{cluster} note {i} about topic{cluster} and item{i % 37}"
        docs.append(
            SearchDoc(
                "user_playbook",
                f"up-{i:05d}",
                text,
                {"id": i},
                user_id=user,
                status=status,
                created_at=NOW - i,
                expires_at=expires,
            )
        )
    docs += [SearchDoc("profile", f"p-{i}", f"c{i % CLUSTERS} profile {i}", {}, user_id="u0") for i in range(20)]
    return docs


@pytest.fixture(scope="module")
def embedder() -> ClusteredEmbedder:
    return ClusteredEmbedder()


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory, embedder: ClusteredEmbedder) -> dict[str, Path]:
    """Index roots holding the same corpus published exactly (default threshold) and with HNSW (lowered)."""
    base = tmp_path_factory.mktemp("ann")
    docs = _corpus()
    publish_index(base / "exact", docs, embedder)
    publish_index(base / "hnsw", docs, embedder, hnsw_min_rows=LOW_THRESHOLD, hnsw_params=PARAMS)
    return {"exact": base / "exact", "hnsw": base / "hnsw"}


@pytest.fixture(scope="module")
def built(roots: dict[str, Path]) -> dict[str, Path]:
    """The published version directories."""
    return {name: root / str(current_version(root)) for name, root in roots.items()}


@pytest.fixture(scope="module")
def exact(roots: dict[str, Path]) -> LoadedIndex:
    return LoadedIndex.load(roots["exact"])


@pytest.fixture(scope="module")
def hnsw(roots: dict[str, Path]) -> LoadedIndex:
    return LoadedIndex.load(roots["hnsw"])


def _queries(embedder: ClusteredEmbedder, n: int = 30) -> list[np.ndarray]:
    return [embedder.embed([f"c{(k * 7) % CLUSTERS} query {k}"])[0] for k in range(n)]


def _vector_ids(
    index: LoadedIndex, q: np.ndarray, filters: SearchFilters, top_k: int = 10, threshold: float = -1.0, **kwargs
) -> list[str]:
    hits = index.search(
        "user_playbook", "", q, top_k=top_k, threshold=threshold, mode="vector", filters=filters, **kwargs
    )
    return [h.doc_id for h in hits]


def _recall(exact: LoadedIndex, hnsw: LoadedIndex, queries: list[np.ndarray], filters: SearchFilters) -> float:
    scores = []
    for q in queries:
        truth = set(_vector_ids(exact, q, filters))
        scores.append(len(truth & set(_vector_ids(hnsw, q, filters))) / len(truth))
    return float(np.mean(scores))


@pytest.fixture
def graph_walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts real HNSW searches (the call still runs), to tell which strategy the vector leg chose."""
    calls: list[int] = []
    real = HnswVectors.walk

    def counting(self: HnswVectors, query: np.ndarray, k: int, mask: np.ndarray | None, admitted: int):
        calls.append(k)
        return real(self, query, k, mask, admitted)

    monkeypatch.setattr(HnswVectors, "walk", counting)
    return calls


# ---------------------------------------------------------------------------------------------------------------
# build-time choice and manifest


def test_small_types_stay_exact(built: dict[str, Path]) -> None:
    manifest = json.loads((built["exact"] / "manifest.json").read_text())
    assert HNSW_MIN_ROWS == 50_000 and manifest["ann_min_rows"] == HNSW_MIN_ROWS
    assert manifest["ann"] == {}
    assert not (built["exact"] / "ann").exists()


def test_large_types_get_an_hnsw_file_in_the_manifest(built: dict[str, Path], hnsw: LoadedIndex) -> None:
    manifest = json.loads((built["hnsw"] / "manifest.json").read_text())
    assert manifest["ann_min_rows"] == LOW_THRESHOLD
    assert set(manifest["ann"]) == {"user_playbook"}  # profiles (20 rows) and agent playbooks (0) stay exact
    entry = manifest["ann"]["user_playbook"]
    assert entry["path"] == "ann/user_playbook.faiss" and entry["rows"] == ROWS
    assert entry["sha256"] == sha256_file(built["hnsw"] / entry["path"])
    assert entry["params"] == PARAMS.to_manifest()
    assert sorted(p.name for p in (built["hnsw"] / "ann").iterdir()) == ["user_playbook.faiss"]
    # The graph's storage holds exactly the vectors the .npy file holds, row for row.
    stored = np.load(built["hnsw"] / "vectors" / "user_playbook.npy")
    assert np.array_equal(hnsw._table("user_playbook").vectors, stored)
    assert hnsw._table("profile").ann is None


def test_hnsw_build_is_reproducible(tmp_path: Path, embedder: ClusteredEmbedder, built: dict[str, Path]) -> None:
    # build_index (not publish) into a plain directory: the graph file must not depend on the run.
    build_index(_corpus(), embedder, tmp_path / "again", hnsw_min_rows=LOW_THRESHOLD, hnsw_params=PARAMS)
    first = json.loads((built["hnsw"] / "manifest.json").read_text())["ann"]["user_playbook"]["sha256"]
    second = json.loads((tmp_path / "again" / "manifest.json").read_text())["ann"]["user_playbook"]["sha256"]
    assert first == second


# ---------------------------------------------------------------------------------------------------------------
# recall and filters


def test_recall_at_10_against_exact(
    exact: LoadedIndex, hnsw: LoadedIndex, embedder: ClusteredEmbedder, graph_walks: list[int]
) -> None:
    queries = _queries(embedder)
    unfiltered = SearchFilters(now=NOW, statuses=("current", "archived"))
    assert _recall(exact, hnsw, queries, unfiltered) >= 0.95
    assert len(graph_walks) == len(queries)  # every query walked the graph
    assert _recall(exact, hnsw, queries, SearchFilters(now=NOW)) >= 0.95  # default filters: status + expiry


def test_user_filter_respected_by_graph_walk(
    exact: LoadedIndex, hnsw: LoadedIndex, embedder: ClusteredEmbedder, graph_walks: list[int]
) -> None:
    users = {d.doc_id: d.user_id for d in _corpus()}
    for user in USERS:
        filters = SearchFilters(now=NOW, user_id=user)
        for q in _queries(embedder, 10):
            ids = _vector_ids(hnsw, q, filters)
            assert len(ids) == 10 and {users[i] for i in ids} == {user}
        assert _recall(exact, hnsw, _queries(embedder, 10), filters) >= 0.9
    assert len(graph_walks) == 4 * 10 * 2  # ~25% admitted: above the exact cut-off, so the graph was used


def test_selective_filter_scans_exactly(
    exact: LoadedIndex, hnsw: LoadedIndex, embedder: ClusteredEmbedder, graph_walks: list[int]
) -> None:
    filters = SearchFilters(now=NOW, user_id=RARE_USER)
    for q in _queries(embedder, 10):
        assert _vector_ids(hnsw, q, filters) == _vector_ids(exact, q, filters)
    assert graph_walks == []


def test_status_expiry_and_exclusions_respected(
    hnsw: LoadedIndex, embedder: ClusteredEmbedder, graph_walks: list[int]
) -> None:
    docs = {d.doc_id: d for d in _corpus()}
    for q in _queries(embedder, 10):
        ids = _vector_ids(hnsw, q, SearchFilters(now=NOW), top_k=50)
        assert len(ids) == 50
        assert all(docs[i].status == "current" and docs[i].expires_at is None for i in ids)
        archived = _vector_ids(hnsw, q, SearchFilters(now=NOW, statuses=("archived",)), top_k=20)
        assert archived and all(docs[i].status == "archived" for i in archived)
        excluded = frozenset(ids[:5])
        again = _vector_ids(hnsw, q, SearchFilters(now=NOW), top_k=50, exclude_ids=excluded)
        assert not excluded & set(again) and ids[5:15] == again[:10]
    assert graph_walks  # the default filters admit ~85% of the rows: graph walks


def test_threshold_respected_by_graph_walk(exact: LoadedIndex, hnsw: LoadedIndex, embedder: ClusteredEmbedder) -> None:
    for q in _queries(embedder, 10):
        hits = hnsw.search(
            "user_playbook", "", q, top_k=50, threshold=0.6, mode="vector", filters=SearchFilters(now=NOW)
        )
        assert hits and all(h.similarity >= 0.6 for h in hits)
        truth = _vector_ids(exact, q, SearchFilters(now=NOW), top_k=50, threshold=0.6)
        assert len(hits) >= 0.9 * len(truth)


def test_hybrid_with_graph_reports_cosines(hnsw: LoadedIndex, embedder: ClusteredEmbedder) -> None:
    q = embedder.embed(["c3 query"])[0]
    hits = hnsw.search(
        "user_playbook",
        "topic3 item5",
        q,
        top_k=10,
        threshold=0.3,
        mode="hybrid",
        filters=SearchFilters(now=NOW, user_id="u1"),
    )
    assert len(hits) == 10
    vectors = hnsw._table("user_playbook").vectors
    rows = hnsw._table("user_playbook").row_of
    for h in hits:  # every returned hit carries its cosine, whichever leg found it
        assert h.similarity == pytest.approx(float(vectors[rows[h.doc_id]] @ q), abs=1e-5)
    assert any(h.bm25_rank for h in hits) and any(h.vector_rank for h in hits)


# ---------------------------------------------------------------------------------------------------------------
# load verification


def _copy(root: Path, dst: Path) -> Path:
    """A copy of an index root (to damage); returns the copied version directory."""
    shutil.copytree(root, dst)
    return dst / str(current_version(dst))


def test_corrupted_ann_file_detected(tmp_path: Path, roots: dict[str, Path]) -> None:
    version = _copy(roots["hnsw"], tmp_path / "corrupt")
    ann_file = version / "ann" / "user_playbook.faiss"
    data = bytearray(ann_file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    ann_file.write_bytes(bytes(data))
    with pytest.raises(IndexCorrupt, match="sha256"):
        LoadedIndex.load(tmp_path / "corrupt")


def test_truncated_or_missing_ann_file_detected_without_digest_check(tmp_path: Path, roots: dict[str, Path]) -> None:
    version = _copy(roots["hnsw"], tmp_path / "truncated")
    ann_file = version / "ann" / "user_playbook.faiss"
    ann_file.write_bytes(ann_file.read_bytes()[:1000])
    with pytest.raises(IndexCorrupt):
        LoadedIndex.load(tmp_path / "truncated", verify=False)
    ann_file.unlink()
    with pytest.raises(IndexCorrupt):
        LoadedIndex.load(tmp_path / "truncated")


def test_ann_file_over_other_rows_rejected(tmp_path: Path, roots: dict[str, Path]) -> None:
    # A graph over different rows (here: the first 100) fails the shape check even when its digest is updated.
    version = _copy(roots["hnsw"], tmp_path / "mismatch")

    vectors = np.load(version / "vectors" / "user_playbook.npy")[:100]
    write_hnsw(build_hnsw(vectors, PARAMS), version / "ann" / "user_playbook.faiss")
    manifest = json.loads((version / "manifest.json").read_text())
    manifest["ann"]["user_playbook"]["sha256"] = sha256_file(version / "ann" / "user_playbook.faiss")
    (version / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexCorrupt, match="100 x 64"):
        LoadedIndex.load(tmp_path / "mismatch")


def test_exact_scans_match_numpy(hnsw: LoadedIndex, embedder: ClusteredEmbedder) -> None:
    # Both exact strategies for filters admitting few rows: a numpy gather (a handful of rows) and faiss's flat
    # scan through the selector (thousands), each against a plain numpy ranking of the admitted rows.
    ann = hnsw._table("user_playbook").ann
    vectors = hnsw._table("user_playbook").vectors
    rng = np.random.default_rng(3)
    for admitted in (30, 2_500):
        mask = np.zeros(ROWS, dtype=bool)
        mask[rng.choice(ROWS, admitted, replace=False)] = True
        for q in _queries(embedder, 5):
            rows, sims = ann.flat.scan(q, 20, mask, admitted)
            truth = np.flatnonzero(mask)[np.argsort(-(vectors[mask] @ q), kind="stable")[:20]]
            assert rows.tolist() == truth.tolist()
            assert np.allclose(sims, vectors[rows] @ q, atol=1e-5)
            assert mask[rows].all()


def test_bm25_pushdown_matches_post_filtering(hnsw: LoadedIndex) -> None:
    # Thousands of rejected rows: the filters (and, past 256 ids, the exclusions) go into tantivy. The result must
    # equal the unfiltered BM25 ranking with the inadmissible rows removed afterwards.
    docs = {d.doc_id: d for d in _corpus()}
    everything = SearchFilters(now=NOW, statuses=("current", "archived"))
    query = "note topic3 topic7 item5 item11"  # "note" is in every row: all of them match
    ranking = [
        h.doc_id
        for h in hnsw.search("user_playbook", query, None, top_k=ROWS, threshold=0.0, mode="fts", filters=everything)
    ]
    assert len(ranking) > 300
    excluded = frozenset(ranking[::3][:300])  # more exclusions than the leg post-filters itself
    for filters, exclude in (
        (SearchFilters(now=NOW, user_id="u1"), frozenset()),
        (SearchFilters(now=NOW), excluded),
        (SearchFilters(now=NOW, user_id="u2"), excluded),
    ):

        def admissible(doc_id: str, exclude=exclude, filters=filters) -> bool:
            d = docs[doc_id]
            return (
                d.status == "current"
                and d.expires_at is None
                and doc_id not in exclude
                and filters.user_id in (None, d.user_id)
            )

        hits = hnsw.search(
            "user_playbook", query, None, top_k=20, threshold=0.0, mode="fts", filters=filters, exclude_ids=exclude
        )
        assert [h.doc_id for h in hits] == [i for i in ranking if admissible(i)][:20]
