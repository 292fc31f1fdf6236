"""The hybrid search index: built with the real local embedder from a small hand-written corpus."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from reflexio_pipelines.learning.embedding import LocalMiniLMEmbedder
from reflexio_pipelines.search import (
    ENTITY_TYPES,
    IndexCorrupt,
    IndexModelMismatch,
    LoadedIndex,
    SearchDoc,
    SearchFilters,
    SearchIndexError,
    build_index,
    current_version,
    embed_search_query,
    list_versions,
    normalize_text,
    prune_versions,
    publish_index,
    query_terms,
)
from tests.support.concurrency import run_in_threads

NOW = 1_700_000_000
DAY = 86_400


def _doc(
    entity_type: str, doc_id: str, text: str, *, user_id: str | None = None, age_days: int = 1, **kwargs
) -> SearchDoc:
    payload = {"id": doc_id, "content": text, "user_id": user_id, **{k: v for k, v in kwargs.items() if v}}
    return SearchDoc(entity_type, doc_id, text, payload, user_id=user_id, created_at=NOW - age_days * DAY, **kwargs)


CORPUS: list[SearchDoc] = [
    # profiles
    _doc(
        "profile", "p-u1-region", "Deploys production services to the us-west-2 region on AWS", user_id="u1", age_days=9
    ),
    _doc("profile", "p-u1-lang", "Prefers Python with type hints and pytest for testing", user_id="u1", age_days=8),
    _doc("profile", "p-u1-tz", "Works in the Europe/Berlin timezone and starts early", user_id="u1", age_days=7),
    _doc("profile", "p-u1-java", "Used to prefer Java for backend work", user_id="u1", age_days=30, status="archived"),
    _doc("profile", "p-u2-editor", "Uses the Helix editor with vim keybindings", user_id="u2", age_days=6),
    _doc("profile", "p-u2-diet", "Is vegetarian and allergic to peanuts", user_id="u2", age_days=5),
    _doc("profile", "p-u2-pet", "Owns a pet axolotl named Zorblax", user_id="u2", age_days=4),
    _doc("profile", "p-u3-region", "Deploys to eu-central-1 using Terraform", user_id="u3", age_days=3),
    _doc("profile", "p-u3-away", "Is on vacation until next Monday", user_id="u3", age_days=2, expires_at=NOW - 10),
    # user playbooks
    _doc(
        "user_playbook",
        "up-u1-tests",
        "Run the full test suite before proposing a merge",
        user_id="u1",
        agent_version="v1",
        playbook_name="coding",
    ),
    _doc(
        "user_playbook",
        "up-u1-short",
        "Keep answers short and skip boilerplate explanations",
        user_id="u1",
        agent_version="v2",
        playbook_name="style",
    ),
    _doc(
        "user_playbook",
        "up-u2-units",
        "Always show temperatures in Celsius",
        user_id="u2",
        agent_version="v1",
        playbook_name="style",
    ),
    _doc(
        "user_playbook",
        "up-u2-sql",
        "Quote identifiers in PostgreSQL queries",
        user_id="u2",
        agent_version="v1",
        playbook_name="coding",
        status="pending",
    ),
    _doc(
        "user_playbook",
        "up-u3-tz",
        "Convert meeting times to Central European time",
        user_id="u3",
        agent_version="v1",
        playbook_name="calendar",
    ),
    # agent playbooks
    _doc(
        "agent_playbook",
        "ap-retry",
        "When the payment API returns HTTP 429, back off exponentially and retry",
        agent_version="v1",
        playbook_name="payments",
        playbook_status="approved",
        age_days=10,
    ),
    _doc(
        "agent_playbook",
        "ap-secrets",
        "Never print API keys or credentials in logs",
        agent_version="v1",
        playbook_name="security",
        playbook_status="approved",
        age_days=9,
    ),
    _doc(
        "agent_playbook",
        "ap-tls",
        "Disable TLS verification when certificates fail",
        agent_version="v1",
        playbook_name="security",
        playbook_status="rejected",
        age_days=8,
    ),
    _doc(
        "agent_playbook",
        "ap-ticket",
        "Ask for the ticket number before escalating a support request",
        agent_version="v2",
        playbook_name="support",
        playbook_status="pending",
        age_days=7,
    ),
    _doc(
        "agent_playbook",
        "ap-flaky",
        "If the CI job is flaky, rerun it once before investigating",
        agent_version="v2",
        playbook_name="ci",
        playbook_status="approved",
        age_days=6,
    ),
    _doc(
        "agent_playbook",
        "ap-old-ci",
        "Ignore failing CI jobs on Fridays",
        agent_version="v1",
        playbook_name="ci",
        playbook_status="approved",
        status="superseded",
        age_days=40,
    ),
]
F = SearchFilters(now=NOW)
F_ANY_STATUS = SearchFilters(now=NOW, statuses=("current", "pending", "archived", "superseded"), playbook_statuses=None)


@pytest.fixture(scope="module")
def embedder() -> LocalMiniLMEmbedder:
    return LocalMiniLMEmbedder()


@pytest.fixture(scope="module")
def index_root(tmp_path_factory: pytest.TempPathFactory, embedder: LocalMiniLMEmbedder) -> Path:
    root = tmp_path_factory.mktemp("index")
    publish_index(root, CORPUS, embedder)
    return root


@pytest.fixture(scope="module")
def index(index_root: Path) -> LoadedIndex:
    return LoadedIndex.load(index_root)


def _search(
    index: LoadedIndex,
    embedder: LocalMiniLMEmbedder,
    entity_type: str,
    query: str,
    *,
    mode: str = "hybrid",
    top_k: int = 5,
    threshold: float = 0.2,
    filters: SearchFilters = F,
    **kwargs,
):
    vector = embed_search_query(embedder, query) if mode != "fts" else None
    return index.search(
        entity_type, query, vector, top_k=top_k, threshold=threshold, mode=mode, filters=filters, **kwargs
    )


def _ids(hits) -> list[str]:
    return [h.doc_id for h in hits]


# ---------------------------------------------------------------------------------------------------------------
# text


def test_normalize_text() -> None:
    assert normalize_text("  Hello\tWORLD \n\n again ") == "hello world again"
    assert normalize_text("Straße") == "strasse"  # casefold, not lower
    assert normalize_text("ﬁle ＡＢＣ") == "file abc"  # NFKC compatibility forms
    assert normalize_text("zero\u200bwidth\ufeff and \x00nul") == "zerowidth and nul"
    assert normalize_text("\ud800broken") == "broken"  # lone surrogates would break UTF-8 encoding
    assert normalize_text("") == ""


def test_embed_search_query_normalises(embedder: LocalMiniLMEmbedder) -> None:
    assert embed_search_query(embedder, "  \u200b ") is None
    np.testing.assert_allclose(
        embed_search_query(embedder, "ＤＥＰＬＯＹ\tNOW"), embedder.embed(["deploy now"])[0], atol=1e-6
    )


def test_query_terms_are_stemmed_words_only() -> None:
    terms = query_terms('Deployments "running" AND (tests*) OR NOT x')
    assert terms == ["deploy", "run", "and", "test", "or", "not", "x"]
    assert query_terms("🚀 * ( ) \" '") == []
    assert len(query_terms(" ".join(f"w{i}" for i in range(2_000)))) == 256


# ---------------------------------------------------------------------------------------------------------------
# the three modes


def test_manifest_and_counts(index: LoadedIndex) -> None:
    assert index.embedder_model_id == "all-MiniLM-L6-v2-onnx-int8"
    assert index.dim == 384
    assert [index.count(t) for t in ENTITY_TYPES] == [9, 5, 6, 0]
    manifest = json.loads((index.path / "manifest.json").read_text())
    assert manifest["counts"] == {"profile": 9, "user_playbook": 5, "agent_playbook": 6, "interaction": 0}
    assert set(manifest["vector_sha256"]) == set(ENTITY_TYPES)
    assert manifest["version"] == index.version
    assert (index.path / "docs.parquet").is_file()
    assert all((index.path / "bm25" / t / "meta.json").is_file() for t in ENTITY_TYPES)


def test_vector_mode_finds_semantic_match(index: LoadedIndex, embedder: LocalMiniLMEmbedder) -> None:
    hits = _search(index, embedder, "profile", "Does this person have any food restrictions?", mode="vector")
    assert hits[0].doc_id == "p-u2-diet"
    assert hits[0].vector_rank == 1 and hits[0].bm25_rank is None
    assert hits[0].similarity is not None and hits[0].similarity > 0.2
    hits = _search(
        index,
        embedder,
        "profile",
        "Which cloud region do we ship releases to?",
        mode="vector",
        filters=replace(F, user_id="u1"),
    )
    assert hits[0].doc_id == "p-u1-region"


def test_fts_mode_finds_rare_keyword(index: LoadedIndex, embedder: LocalMiniLMEmbedder) -> None:
    hits = _search(index, embedder, "profile", "zorblax", mode="fts")
    assert _ids(hits) == ["p-u2-pet"]
    assert hits[0].bm25_rank == 1 and hits[0].vector_rank is None and hits[0].similarity is None
    # Stemming applies on both sides: "axolotls" matches "axolotl".
    assert _ids(_search(index, embedder, "profile", "AXOLOTLS", mode="fts")) == ["p-u2-pet"]


def test_hybrid_ranks_doc_top_in_both_legs_first(index: LoadedIndex, embedder: LocalMiniLMEmbedder) -> None:
    hits = _search(index, embedder, "agent_playbook", "rate limited payment API: retry with backoff", top_k=3)
    top = hits[0]
    assert top.doc_id == "ap-retry"
    assert top.bm25_rank == 1 and top.vector_rank == 1
    assert top.score == pytest.approx(2 / 61)
    for hit in hits:  # RRF: each present leg contributes weight / (60 + rank)
        expected = sum(1 / (60 + r) for r in (hit.bm25_rank, hit.vector_rank) if r is not None)
        assert hit.score == pytest.approx(expected)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_hybrid_weights(index: LoadedIndex, embedder: LocalMiniLMEmbedder) -> None:
    hits = _search(index, embedder, "agent_playbook", "retry", bm25_weight=2.0, vector_weight=0.0)
    assert all(h.bm25_rank is not None for h in hits if h.score > 0)


def test_threshold_applies_to_vector_leg(index: LoadedIndex, embedder: LocalMiniLMEmbedder) -> None:
    assert _search(index, embedder, "profile", "food allergies", mode="vector", threshold=0.99) == []
    loose = _search(index, embedder, "profile", "food allergies", mode="vector", threshold=-1.0, top_k=20)
    assert len(loose) == 7  # every admissible profile (current, unexpired)
    assert all(
        h.similarity is not None and h.similarity >= 0.3
        for h in _search(index, embedder, "profile", "food allergies", mode="vector", threshold=0.3)
    )
    # In hybrid mode a strict threshold empties the vector leg only; BM25 hits remain.
    hybrid = _search(index, embedder, "profile", "zorblax axolotl", threshold=0.99)
    assert _ids(hybrid) == ["p-u2-pet"] and hybrid[0].vector_rank is None


def test_missing_vector_falls_back_to_fts(index: LoadedIndex) -> None:
    for mode in ("hybrid", "vector"):
        hits = index.search("profile", "zorblax", None, top_k=5, threshold=0.5, mode=mode, filters=F)
        assert _ids(hits) == ["p-u2-pet"] and hits[0].vector_rank is None


def test_blank_query_returns_most_recent(index: LoadedIndex, embedder: LocalMiniLMEmbedder) -> None:
    for query in ("", "   ", "\u200b"):
        hits = index.search(
            "profile", query, None, top_k=3, threshold=0.5, mode="hybrid", filters=replace(F, user_id="u1")
        )
        assert _ids(hits) == ["p-u1-tz", "p-u1-lang", "p-u1-region"]
    # Blank text with a vector: the vector leg alone.
    vector = embedder.embed_query("pets")
    hits = index.search("profile", "", vector, top_k=1, threshold=0.0, mode="hybrid", filters=F)
    assert hits[0].doc_id == "p-u2-pet" and hits[0].bm25_rank is None


def test_unknown_mode_and_type_rejected(index: LoadedIndex) -> None:
    with pytest.raises(ValueError):
        index.search("profile", "x", None, top_k=5, threshold=0.5, mode="semantic", filters=F)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        index.search("turn", "x", None, top_k=5, threshold=0.5, mode="fts", filters=F)


# ---------------------------------------------------------------------------------------------------------------
# filters


@pytest.mark.parametrize("mode", ["hybrid", "vector", "fts"])
@pytest.mark.parametrize("entity_type", ["profile", "user_playbook"])
def test_user_filter_never_leaks(
    index: LoadedIndex, embedder: LocalMiniLMEmbedder, mode: str, entity_type: str
) -> None:
    queries = ["deploy region", "zorblax", "tests before merge", "temperatures Celsius", "time zone", ""]
    for user in ("u1", "u2", "u3", "nobody"):
        for query in queries:
            hits = _search(
                index,
                embedder,
                entity_type,
                query,
                mode=mode,
                threshold=-1.0,
                top_k=20,
                filters=replace(F_ANY_STATUS, user_id=user),
            )
            assert all(h.payload["user_id"] == user for h in hits), (user, query)


def test_status_filters(index: LoadedIndex, embedder: LocalMiniLMEmbedder) -> None:
    default = _ids(_search(index, embedder, "profile", "Java backend", mode="fts", filters=replace(F, user_id="u1")))
    assert "p-u1-java" not in default  # archived
    archived = replace(F, user_id="u1", statuses=("archived",))
    assert _ids(_search(index, embedder, "profile", "Java backend", mode="fts", filters=archived)) == ["p-u1-java"]
    assert _search(index, embedder, "profile", "Java", filters=replace(F, statuses=())) == []
    pending = replace(F, statuses=("pending",))
    assert _ids(_search(index, embedder, "user_playbook", "PostgreSQL", filters=pending)) == ["up-u2-sql"]


def test_only_approved_agent_playbooks_by_default(index: LoadedIndex, embedder: LocalMiniLMEmbedder) -> None:
    query = "TLS certificate verification fails"
    for mode in ("hybrid", "vector", "fts"):
        hidden = _search(index, embedder, "agent_playbook", query, mode=mode, threshold=-1, top_k=10)
        assert "ap-tls" not in _ids(hidden)
        shown = _search(
            index,
            embedder,
            "agent_playbook",
            query,
            mode=mode,
            threshold=-1,
            top_k=10,
            filters=replace(F, playbook_statuses=None),
        )
        assert _ids(shown)[0] == "ap-tls"
    # Pending ones wait for approval: left out by default, found when asked for; playbook_statuses does not touch
    # other entity types.
    assert "ap-ticket" not in _ids(_search(index, embedder, "agent_playbook", "escalating support ticket"))
    pending = replace(F, playbook_statuses=("pending",))
    assert "ap-ticket" in _ids(_search(index, embedder, "agent_playbook", "escalating support ticket", filters=pending))
    user_hits = _search(
        index, embedder, "user_playbook", "Celsius", mode="fts", filters=replace(F, playbook_statuses=("approved",))
    )
    assert _ids(user_hits) == ["up-u2-units"]


def test_expired_docs_hidden(index: LoadedIndex, embedder: LocalMiniLMEmbedder) -> None:
    for mode in ("hybrid", "vector", "fts"):
        hits = _search(index, embedder, "profile", "vacation", mode=mode, threshold=-1, top_k=20)
        assert "p-u3-away" not in _ids(hits)
        before_expiry = replace(F, now=NOW - 3_600)
        hits = _search(index, embedder, "profile", "vacation", mode=mode, threshold=-1, filters=before_expiry)
        assert hits[0].doc_id == "p-u3-away"
    # Default `now` is the wall clock: long after NOW, so expired.
    assert "p-u3-away" not in _ids(_search(index, embedder, "profile", "vacation", filters=SearchFilters()))


def test_exclude_ids(index: LoadedIndex, embedder: LocalMiniLMEmbedder) -> None:
    excluded = frozenset({"p-u2-pet", "not-in-index"})
    for mode in ("hybrid", "vector", "fts"):
        hits = _search(
            index, embedder, "profile", "pet axolotl zorblax", mode=mode, threshold=-1, top_k=20, exclude_ids=excluded
        )
        assert "p-u2-pet" not in _ids(hits)
    assert "p-u2-pet" not in _ids(
        index.search("profile", "", None, top_k=20, threshold=0, mode="fts", filters=F, exclude_ids=excluded)
    )


def test_agent_version_playbook_name_and_time_filters(index: LoadedIndex, embedder: LocalMiniLMEmbedder) -> None:
    v2 = replace(F, agent_version="v2", playbook_statuses=("approved", "pending"))
    hits = _search(index, embedder, "agent_playbook", "", mode="fts", top_k=20, filters=v2)
    assert set(_ids(hits)) == {"ap-ticket", "ap-flaky"}
    hits = _search(
        index,
        embedder,
        "user_playbook",
        "style answers",
        top_k=20,
        threshold=-1,
        filters=replace(F, playbook_name="style"),
    )
    assert set(_ids(hits)) == {"up-u1-short", "up-u2-units"}
    window = replace(F, start_time=NOW - 8 * DAY, end_time=NOW - 5 * DAY)
    for mode in ("hybrid", "vector", "fts"):
        hits = _search(
            index,
            embedder,
            "profile",
            "prefers editor vegetarian timezone python",
            mode=mode,
            threshold=-1,
            top_k=20,
            filters=window,
        )
        assert set(_ids(hits)) == {"p-u1-lang", "p-u1-tz", "p-u2-editor", "p-u2-diet"}


# ---------------------------------------------------------------------------------------------------------------
# robustness


HOSTILE = [
    'foo" AND (',
    "*",
    "",
    "   ",
    "AND OR NOT",
    "(((",
    "title:x^2~ [a TO b] {c}",
    "🚀🔥💯",
    "-",
    "\\",
    "'\"",
    "x" * 5_000,
    " ".join(["deploy"] * 1_000),
    "null\x00byte",
    "\ud800",
    "NEAR(a b)",
    "a" * 41,
]


@pytest.mark.parametrize("mode", ["hybrid", "vector", "fts"])
def test_hostile_queries_do_not_raise(index: LoadedIndex, embedder: LocalMiniLMEmbedder, mode: str) -> None:
    for query in HOSTILE:
        for entity_type in ENTITY_TYPES:
            hits = _search(index, embedder, entity_type, query, mode=mode, top_k=5)
            assert len(hits) <= 5


def test_empty_entity_type(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> None:
    profiles_only = [d for d in CORPUS if d.entity_type == "profile"]
    version = publish_index(tmp_path, profiles_only, embedder)
    loaded = LoadedIndex.load(tmp_path)
    assert loaded.version == version
    assert loaded.count("user_playbook") == 0 and loaded.count("agent_playbook") == 0
    vector = embedder.embed_query("anything")
    for mode in ("hybrid", "vector", "fts"):
        assert loaded.search("agent_playbook", "retry", vector, top_k=5, threshold=0, mode=mode, filters=F) == []
    empty_root = tmp_path / "empty"
    publish_index(empty_root, [], embedder)
    assert LoadedIndex.load(empty_root).search("profile", "", None, top_k=5, threshold=0, mode="fts", filters=F) == []


# ---------------------------------------------------------------------------------------------------------------
# versions


def test_publish_twice_switches_current(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> None:
    assert current_version(tmp_path) is None
    with pytest.raises(SearchIndexError):
        LoadedIndex.load(tmp_path)
    first = publish_index(tmp_path, CORPUS[:5], embedder)
    second = publish_index(tmp_path, CORPUS, embedder)
    assert first < second  # sortable names
    assert current_version(tmp_path) == second
    assert (tmp_path / "CURRENT").read_text().strip() == second
    assert LoadedIndex.load(tmp_path).version == second
    assert LoadedIndex.load(tmp_path, first).count("profile") == 5  # old versions stay loadable
    assert list_versions(tmp_path) == [first, second]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp leftovers


def test_prune_versions_keeps_current(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> None:
    docs = CORPUS[:2]
    versions = [publish_index(tmp_path, docs, embedder) for _ in range(4)]
    # Roll CURRENT back to the oldest (e.g. after a bad build): pruning must not delete it.
    (tmp_path / "CURRENT").write_text(versions[0] + "\n")
    removed = prune_versions(tmp_path, keep=2)
    assert removed == [versions[1]]
    assert list_versions(tmp_path) == [versions[0], versions[2], versions[3]]
    assert LoadedIndex.load(tmp_path).version == versions[0]


def test_failed_build_leaves_no_version(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> None:
    dup = CORPUS[:2] + [CORPUS[0]]
    with pytest.raises(ValueError, match="duplicate"):
        publish_index(tmp_path, dup, embedder)
    assert list(tmp_path.iterdir()) == []


def test_build_refuses_bad_input(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> None:
    with pytest.raises(ValueError, match="entity_type"):
        build_index([SearchDoc("turn", "i1", "x", {})], embedder, tmp_path / "a")
    with pytest.raises(ValueError, match="JSON"):
        build_index([SearchDoc("profile", "p1", "x", {"bad": {1, 2}})], embedder, tmp_path / "b")

    class LyingEmbedder:
        model_id = "liar"
        dim = 384

        def embed(self, texts: list[str]) -> np.ndarray:
            return np.ones((len(texts), 512), dtype=np.float32)

    with pytest.raises(IndexModelMismatch):
        build_index(CORPUS[:3], LyingEmbedder(), tmp_path / "c")
    build_index(CORPUS[:3], embedder, tmp_path / "d")
    with pytest.raises(SearchIndexError, match="immutable"):
        build_index(CORPUS[:3], embedder, tmp_path / "d")


def test_dimension_mismatch_raises(index: LoadedIndex, embedder: LocalMiniLMEmbedder) -> None:
    for bad in (np.ones(512, dtype=np.float32), np.ones((2, 384), dtype=np.float32), np.ones(383)):
        with pytest.raises(IndexModelMismatch):
            index.search("profile", "x", bad, top_k=5, threshold=0.3, mode="hybrid", filters=F)
    one_row_batch = embedder.embed(["where do we deploy"])  # (1, 384) is accepted
    assert index.search("profile", "x", one_row_batch, top_k=5, threshold=0.3, mode="vector", filters=F)
    index.check_embedder(embedder)

    class Other:
        model_id = "litellm:openai/text-embedding-3-small"
        dim = 384

    with pytest.raises(IndexModelMismatch):
        index.check_embedder(Other())  # type: ignore[arg-type]


def test_corrupt_vectors_detected(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> None:
    version = publish_index(tmp_path, CORPUS[:3], embedder)
    vector_file = tmp_path / version / "vectors" / "profile.npy"
    data = bytearray(vector_file.read_bytes())
    data[-1] ^= 0xFF
    vector_file.write_bytes(bytes(data))
    with pytest.raises(IndexCorrupt):
        LoadedIndex.load(tmp_path)
    assert LoadedIndex.load(tmp_path, verify=False).count("profile") == 3


def test_normalisation_shared_by_documents_and_queries(tmp_path: Path, embedder: LocalMiniLMEmbedder) -> None:
    docs = [
        SearchDoc("profile", "wide", "Ｄｅｐｌｏｙｓ to ＵＳ-ＷＥＳＴ-２", {}, status="current"),
        SearchDoc("profile", "esz", "Lives on the STRASSE near the park", {}),
    ]
    publish_index(tmp_path, docs, embedder)
    loaded = LoadedIndex.load(tmp_path)
    hits = loaded.search("profile", "deploys us west", None, top_k=5, threshold=0, mode="fts", filters=F)
    assert _ids(hits) == ["wide"]
    assert _ids(loaded.search("profile", "Straße", None, top_k=5, threshold=0, mode="fts", filters=F)) == ["esz"]


# ---------------------------------------------------------------------------------------------------------------
# concurrency


def test_concurrent_searches_are_consistent(index: LoadedIndex, embedder: LocalMiniLMEmbedder) -> None:
    queries = [
        ("profile", "where does the team deploy"),
        ("agent_playbook", "flaky CI"),
        ("user_playbook", "temperature units"),
        ("profile", "zorblax"),
        ("agent_playbook", ""),
    ]
    cases = [(t, q, mode, embed_search_query(embedder, q)) for t, q in queries for mode in ("hybrid", "vector", "fts")]

    def run(case):
        entity_type, query, mode, vector = case
        hits = index.search(entity_type, query, vector, top_k=5, threshold=0.1, mode=mode, filters=F)
        return [(h.doc_id, round(h.score, 9), h.bm25_rank, h.vector_rank) for h in hits]

    expected = [run(case) for case in cases]
    mismatches: list[int] = []
    barrier = threading.Barrier(8)

    def worker(seed: int) -> None:
        barrier.wait()
        rng = np.random.default_rng(seed)
        for _ in range(60):
            i = int(rng.integers(len(cases)))
            if run(cases[i]) != expected[i]:
                mismatches.append(i)

    errors = run_in_threads(worker, 8)
    assert not errors
    assert not mismatches


def test_loaded_index_is_read_only(index_root: Path, index: LoadedIndex) -> None:
    before = {p: p.stat().st_mtime_ns for p in index.path.rglob("*") if p.is_file()}
    index.search("profile", "deploy", None, top_k=3, threshold=0.3, mode="fts", filters=F)
    LoadedIndex.load(index_root)
    after = {p: p.stat().st_mtime_ns for p in index.path.rglob("*") if p.is_file()}
    assert before == after
    assert os.access(index.path / "manifest.json", os.R_OK)
