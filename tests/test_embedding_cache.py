"""The embedding cache in the lake (`lake/embedding_cache.py`), with the real local embedder behind a counting wrapper.

Index builds embed only texts the cache does not hold and store the new ones in one Delta commit; vectors are
bit-for-bit those of a build without the cache; another model id never gets this model's vectors; two racing builds
store each text once; a build that read its documents before an erasure stores nothing; and erasing a user leaves
no cache row, hash or vector byte of the user's texts in the table's directory (real Dagster runs build that lake).
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import dagster as dg
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reflexio_pipelines.lake.embedding_cache import CACHE_TABLE, EmbeddingCache, bucket_of, erase_owner, text_key
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.windows import key_of_moment
from reflexio_pipelines.learning.embedding import Embedder, make_embedder
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.privacy import erasure
from reflexio_pipelines.privacy.export import export_user
from reflexio_pipelines.runs import launch, rebuild_index, run_aggregation
from reflexio_pipelines.search.query import LoadedIndex
from reflexio_pipelines.search.text import normalize_text
from reflexio_pipelines.search.types import SearchDoc
from reflexio_pipelines.search.versions import stage_index
from reflexio_pipelines.settings import Settings
from reflexio_pipelines.storage import open_delta
from tests.support.concurrency import run_in_threads
from tests.support.dagster_home import dagster_home_env
from tests.support.landing import land
from tests.test_privacy import CONVERSATIONS, T0, ZED
from tests.test_search_index import CORPUS

DISTINCT_TEXTS = len({normalize_text(d.text) for d in CORPUS})


class CountingEmbedder:
    """The real embedder, counting the texts it is asked to embed. `model_id` and `transform` make it stand for a
    different model (same texts, other vectors); `rendezvous` makes racing builds meet inside `embed`."""

    def __init__(
        self, inner: Embedder, model_id: str | None = None, transform=None, rendezvous: threading.Barrier | None = None
    ) -> None:
        self.inner, self.model_id, self.dim = inner, model_id or inner.model_id, inner.dim
        self.transform, self.rendezvous = transform, rendezvous
        self.texts = self.calls = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        self.texts += len(texts)
        if self.rendezvous is not None:
            self.rendezvous.wait()  # both builds have looked the cache up and found nothing
        vectors = self.inner.embed(texts)
        return np.ascontiguousarray(self.transform(vectors)) if self.transform else vectors


@pytest.fixture(scope="module")
def local() -> Embedder:
    return make_embedder("local")


def _build(lake: Lake, docs: list[SearchDoc], embedder) -> tuple[str, EmbeddingCache]:
    """One index build as the `search_index` asset does it: cache opened first, then the version staged."""
    cache = EmbeddingCache(lake)
    return stage_index(lake.index_root, docs, embedder, cache=cache), cache


def _vector_bytes(index_root: Path, version: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((index_root / version / "vectors").glob("*.npy"))}


def _cache_version(lake: Lake) -> int:
    return open_delta(lake.table_path(CACHE_TABLE)).version()


def _doc(doc_id: str, text: str, user_id: str = "u9") -> SearchDoc:
    return SearchDoc("profile", doc_id, text, {"id": doc_id}, user_id=user_id)


def test_second_build_embeds_nothing_and_vectors_match_an_uncached_build(tmp_path: Path, local: Embedder):
    lake = Lake.at(tmp_path / "lake")
    counting = CountingEmbedder(local)
    first, cache = _build(lake, CORPUS, counting)
    assert counting.texts == DISTINCT_TEXTS and cache.stats.stored == DISTINCT_TEXTS and cache.stats.cached == 0
    assert _cache_version(lake) == 0  # every new vector in one commit

    counting.texts = counting.calls = 0
    second, cache = _build(lake, CORPUS, counting)
    assert counting.calls == 0 and counting.texts == 0
    assert cache.stats.cached == DISTINCT_TEXTS and cache.stats.embedded == 0 and cache.stats.stored == 0
    assert _cache_version(lake) == 0  # nothing new: no commit

    uncached = stage_index(tmp_path / "uncached", CORPUS, local)
    assert _vector_bytes(lake.index_root, first) == _vector_bytes(lake.index_root, second)
    assert _vector_bytes(lake.index_root, second) == _vector_bytes(tmp_path / "uncached", uncached)


def test_adding_items_embeds_only_them_in_one_commit(tmp_path: Path, local: Embedder):
    lake = Lake.at(tmp_path / "lake")
    _build(lake, CORPUS, local)
    counting = CountingEmbedder(local)
    one_more = [*CORPUS, _doc("p-new", "Keeps bees on a rooftop in Lisbon")]
    version, cache = _build(lake, one_more, counting)
    assert counting.texts == 1 and cache.stats.cached == DISTINCT_TEXTS and cache.stats.stored == 1
    assert _cache_version(lake) == 1

    three_more = [
        *one_more,
        *(_doc(f"p-{i}", f"Collects {kind} stamps") for i, kind in enumerate(["red", "old", "odd"])),
    ]
    later, cache = _build(lake, three_more, counting)
    assert counting.texts == 4 and cache.stats.stored == 3 and _cache_version(lake) == 2  # three texts, one commit
    assert lake.read_table(CACHE_TABLE).num_rows == DISTINCT_TEXTS + 4

    uncached = stage_index(tmp_path / "uncached", three_more, local)
    assert _vector_bytes(lake.index_root, later) == _vector_bytes(tmp_path / "uncached", uncached)


def test_another_model_id_never_gets_these_vectors(tmp_path: Path, local: Embedder):
    lake = Lake.at(tmp_path / "lake")
    mine, _ = _build(lake, CORPUS, local)
    # Same texts, other vectors: were the cache keyed by text alone, this model would be served the local ones.
    other = CountingEmbedder(local, model_id="reversed-minilm", transform=lambda v: v[:, ::-1])
    theirs, cache = _build(lake, CORPUS, other)
    assert other.texts == DISTINCT_TEXTS and cache.stats.cached == 0 and cache.stats.stored == DISTINCT_TEXTS
    uncached = stage_index(
        tmp_path / "uncached", CORPUS, CountingEmbedder(local, "reversed-minilm", lambda v: v[:, ::-1])
    )
    assert _vector_bytes(lake.index_root, theirs) == _vector_bytes(tmp_path / "uncached", uncached)
    assert _vector_bytes(lake.index_root, theirs) != _vector_bytes(lake.index_root, mine)

    rows = lake.read_table(CACHE_TABLE)
    assert sorted(set(rows.column("model_id").to_pylist())) == ["all-MiniLM-L6-v2-onnx-int8", "reversed-minilm"]
    assert rows.num_rows == 2 * DISTINCT_TEXTS
    again, cache = _build(lake, CORPUS, CountingEmbedder(local))
    assert cache.stats.embedded == 0 and _vector_bytes(lake.index_root, again) == _vector_bytes(lake.index_root, mine)


def test_a_lookup_reads_only_the_files_of_its_buckets(tmp_path: Path, local: Embedder):
    lake = Lake.at(tmp_path / "lake")
    version, _ = _build(lake, CORPUS, local)
    text = normalize_text(CORPUS[0].text)
    cache = EmbeddingCache(lake)
    found = cache.lookup(local.model_id, local.dim, [text])
    files = pa.table(open_delta(lake.table_path(CACHE_TABLE)).get_add_actions(flatten=True))
    in_bucket = files.column("partition.bucket").to_pylist().count(bucket_of(text_key(text)))
    assert cache.stats.files_read == in_bucket and cache.stats.files_total == files.num_rows > in_bucket
    stored = LoadedIndex.load(lake.index_root, version).vector(CORPUS[0].entity_type, CORPUS[0].doc_id)
    assert found[text].tobytes() == stored.tobytes()


def test_racing_builds_store_each_text_once(tmp_path: Path, local: Embedder):
    lake = Lake.at(tmp_path / "lake")
    meet = threading.Barrier(2, timeout=120)
    results: dict[int, tuple[str, EmbeddingCache]] = {}

    def build(n: int) -> None:
        results[n] = _build(lake, CORPUS, CountingEmbedder(local, rendezvous=meet))

    errors = run_in_threads(build, 2)
    assert not errors, errors
    # Both embedded everything (they met inside embed, after their lookups), one stored it, the other found it there.
    assert sorted(cache.stats.stored for _, cache in results.values()) == [0, DISTINCT_TEXTS]
    assert all(cache.stats.embedded == DISTINCT_TEXTS for _, cache in results.values())
    rows = lake.read_table(CACHE_TABLE)
    keys = list(zip(rows.column("model_id").to_pylist(), rows.column("text_sha256").to_pylist()))
    assert len(keys) == len(set(keys)) == DISTINCT_TEXTS
    (a, _), (b, _) = results.values()
    assert _vector_bytes(lake.index_root, a) == _vector_bytes(lake.index_root, b)
    _, third = _build(lake, CORPUS, CountingEmbedder(local))
    assert third.stats.embedded == 0


def test_a_build_that_read_documents_before_an_erasure_stores_nothing(tmp_path: Path, local: Embedder):
    lake = Lake.at(tmp_path / "lake")
    stale = EmbeddingCache(lake)  # a build opened its cache and read documents naming u2 ...
    erase_owner(lake, "u2")  # ... then u2 was erased, before the build stored its vectors
    stage_index(lake.index_root, CORPUS, local, cache=stale)
    assert stale.stats.not_stored_after_erasure == DISTINCT_TEXTS and stale.stats.stored == 0
    assert lake.read_table(CACHE_TABLE).num_rows == 0
    _, fresh = _build(lake, CORPUS, local)  # the next build reads the documents after the erasure: it stores
    assert fresh.stats.stored == DISTINCT_TEXTS


def test_erase_owner_rewrites_only_the_buckets_holding_the_user(tmp_path: Path, local: Embedder):
    lake = Lake.at(tmp_path / "lake")
    _build(lake, CORPUS, local)
    before = lake.read_table(CACHE_TABLE)
    owned = {
        k
        for k, o in zip(before.column("text_sha256").to_pylist(), before.column("owner_user_ids").to_pylist())
        if "u3" in o
    }
    files_before = set(open_delta(lake.table_path(CACHE_TABLE)).file_uris())
    deleted, _ = erase_owner(lake, "u3")
    after = lake.read_table(CACHE_TABLE)
    assert deleted == len(owned) > 0 and after.num_rows == before.num_rows - deleted
    assert not owned & set(after.column("text_sha256").to_pylist())
    touched = {bucket_of(k) for k in owned}
    kept = {f for f in files_before if not any(f"bucket={b}/" in f for b in touched)}
    assert kept and kept <= set(open_delta(lake.table_path(CACHE_TABLE)).file_uris())  # other buckets untouched


def test_a_text_another_user_writes_later_lists_both_owners(tmp_path: Path, local: Embedder):
    lake = Lake.at(tmp_path / "lake")
    _build(lake, CORPUS, local)
    twin = _doc("p-twin", CORPUS[4].text.upper(), user_id="u7")  # u2's text, normalised alike, now also u7's
    counting = CountingEmbedder(local)
    _, cache = _build(lake, [*CORPUS, twin], counting)
    assert counting.texts == 0 and cache.stats.owners_added == 1 and _cache_version(lake) == 1  # one commit
    key = text_key(normalize_text(twin.text))
    rows = [r for r in lake.read_table(CACHE_TABLE).to_pylist() if r["text_sha256"] == key]
    assert sorted({u for r in rows for u in r["owner_user_ids"]}) == ["u2", "u7"]
    # the vector row stays as it was (no bucket rewrite); u7 is named by an owner row without a vector
    assert sorted((r["owner_user_ids"], len(r["vector"])) for r in rows) == [(["u2"], local.dim), (["u7"], 0)]
    _, cache = _build(lake, [*CORPUS, twin], local)
    assert cache.stats.owners_added == 0 and _cache_version(lake) == 1  # nothing new the second time
    erase_owner(lake, "u7")  # the later owner's erasure removes the vector too
    assert key not in set(lake.read_table(CACHE_TABLE).column("text_sha256").to_pylist())


def test_small_files_of_a_bucket_are_compacted(tmp_path: Path, local: Embedder):
    from reflexio_pipelines.lake.embedding_cache import MAX_SMALL_FILES

    lake = Lake.at(tmp_path / "lake")
    candidates = (normalize_text(f"Collects postcards from town number {i}") for i in range(10_000))
    bucket = bucket_of(text_key(normalize_text("Collects postcards from town number 0")))
    texts = [t for t in candidates if bucket_of(text_key(t)) == bucket][: MAX_SMALL_FILES + 1]
    vectors = local.embed(texts)
    for i, text in enumerate(texts):  # one build per text: one small file each in the same bucket
        cache = EmbeddingCache(lake)
        assert cache.lookup(local.model_id, local.dim, [text]) == {}
        cache.store(local.model_id, local.dim, [text], vectors[i : i + 1], {text: frozenset({"u1"})})
    files = open_delta(lake.table_path(CACHE_TABLE)).file_uris()
    assert len(files) < MAX_SMALL_FILES  # compacted once the bucket held MAX_SMALL_FILES of them
    found = EmbeddingCache(lake).lookup(local.model_id, local.dim, texts)
    assert [found[t].tobytes() for t in texts] == [v.tobytes() for v in vectors]


# ---------------------------------------------------------------------------------------------------------------
# a lake learned by real Dagster runs


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> tuple[Path, list[dict]]:
    """A learned lake (ZED's facts, a correction ZED shares with ann and bob, aggregated) and the metadata of its
    three `search_index` builds: the window's, the aggregation's and a rebuild of the same lake, oldest first."""
    tmp = tmp_path_factory.mktemp("cache-world")
    lake = Lake.at(tmp / "lake")
    settings = Settings(lake=str(lake.root))
    with dagster_home_env(tmp / "dagster_home"):
        with dg.DagsterInstance.ephemeral() as instance:
            land(lake, CONVERSATIONS, at=T0)
            launch([key_of_moment(T0, GRANULARITY)], settings=settings, instance=instance)
            # Rules two users share too (the default needs 3): the builds this module measures were made with them.
            run_aggregation({"agent_version": "ops-1", "min_distinct_users": 2}, settings=settings, instance=instance)
            rebuild_index(settings=settings, instance=instance, compact=True)
            records = instance.fetch_materializations(dg.AssetKey("search_index"), limit=10).records
            builds = [{k: v.value for k, v in r.asset_materialization.metadata.items()} for r in reversed(records)]
    return tmp, builds


@pytest.mark.e2e
def test_the_daily_compaction_merges_the_embedding_caches_small_files(world):
    tmp, _ = world
    table = open_delta(Lake.at(tmp / "lake").table_path(CACHE_TABLE))
    assert any(entry.get("operation") == "OPTIMIZE" for entry in table.history())  # the compact rebuild merged
    buckets = pa.table(table.get_add_actions(flatten=True)).column("partition.bucket").to_pylist()
    assert len(buckets) == len(set(buckets))  # one file per bucket left


@pytest.mark.e2e
def test_pipeline_rebuild_of_the_same_lake_embeds_nothing(world):
    _, (window, aggregation, rebuild) = world
    texts = rebuild["embedding_cache/texts"]
    assert window["build_mode"] == "full"  # the first version
    assert window["embedding_cache/embedded"] == window["embedding_cache/texts"] > 0
    # The aggregation's build is a delta: it embedded only the texts of the documents it changed (agent playbooks
    # worded unlike any user's playbook, and the members' playbooks whose status changed, already cached).
    assert aggregation["build_mode"] == "incremental" and aggregation["docs_upserted"] > 0
    assert aggregation["embedding_cache/texts"] < texts
    assert (
        aggregation["embedding_cache/embedded"]
        == aggregation["embedding_cache/texts"] - aggregation["embedding_cache/cached"]
        > 0
    )
    # The compaction rebuilds every document and embeds nothing at all.
    assert rebuild["build_mode"] == "full" and rebuild["full_build_reason"] == "compaction requested"
    assert rebuild["embedding_cache/embedded"] == 0 and rebuild["embedding_cache/cached"] == texts
    assert rebuild["embedding_cache/files_read"] == rebuild["embedding_cache/files_total"] > 0  # a full build


def _cache_files_holding(lake: Lake, strings: tuple[str, ...], vector: np.ndarray) -> list[str]:
    """Files under the cache's directory (data files, commit files, checkpoints) holding one of `strings` or the
    vector: as raw bytes, as a decoded Parquet value or footer statistic, or as a decoded vector row."""
    root = lake.table_path(CACHE_TABLE)
    hits = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        texts = [data.decode("utf-8", "replace")]
        found = vector.tobytes() in data
        if data[:4] == b"PAR1":
            parquet = pq.ParquetFile(path)
            table = parquet.read()
            texts.append(str([parquet.metadata.row_group(i).to_dict() for i in range(parquet.num_row_groups)]))
            if "vector" in table.column_names:
                found |= any(
                    np.asarray(v, dtype=np.float32).tobytes() == vector.tobytes()
                    for v in table.column("vector").to_pylist()
                )
                table = table.drop_columns(["vector"])
            texts.append(json.dumps(table.to_pylist(), default=str))
        if found or any(needle in text for needle in strings for text in texts):
            hits.append(str(path.relative_to(root)))
    return hits


@pytest.mark.e2e
def test_erasure_removes_the_users_cached_vectors(world, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    shutil.copytree(world[0], tmp_path / "w")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "w" / "dagster_home"))
    lake = Lake.at(tmp_path / "w" / "lake")
    index = LoadedIndex.load(lake.index_root)
    ((doc_id, text),) = [(d, t) for d, t in index.sample("profile", 1000) if "quixotica" in t.lower()]
    key, vector = text_key(normalize_text(text)), index.vector("profile", doc_id)
    rows = {r["text_sha256"]: r for r in lake.read_table(CACHE_TABLE).to_pylist()}
    assert rows[key]["owner_user_ids"] == [ZED]
    assert np.asarray(rows[key]["vector"], dtype=np.float32).tobytes() == vector.tobytes()
    assert _cache_files_holding(lake, (key, ZED), vector), "the scan must find the user before erasure"
    shared = {k for k, r in rows.items() if ZED in r["owner_user_ids"] and len(r["owner_user_ids"]) > 1}
    assert shared, "the world must hold a text ZED shares with other users (the region agent playbook)"
    exported = export_user(lake, ZED)[CACHE_TABLE].to_pylist()  # the user's export: their rows, only their id
    assert key in {r["text_sha256"] for r in exported} and all(r["owner_user_ids"] == [ZED] for r in exported)

    result = erasure.erase_user(lake, ZED, make_embedder("local"))

    assert result.erased[CACHE_TABLE] >= 1 + len(shared)
    after = {r["text_sha256"]: r for r in lake.read_table(CACHE_TABLE).to_pylist()}
    assert key not in after and not [r for r in after.values() if ZED in r["owner_user_ids"]]
    assert _cache_files_holding(lake, (key, ZED), vector) == []
    # The shared texts went with ZED's words. The agent playbooks others still support are in the new index
    # version, whose build embedded their texts again, owned by the remaining members only.
    members = {
        str(r["agent_playbook_id"]): r["member_user_ids"] for r in lake.read_table("agent_playbooks").to_pylist()
    }
    recached = 0
    for agent_id, agent_text in LoadedIndex.load(lake.index_root).sample("agent_playbook", 1000):
        agent_key = text_key(normalize_text(agent_text))
        if agent_key in shared:
            assert after[agent_key]["owner_user_ids"] == sorted(members[agent_id]) and members[agent_id]
            recached += 1
    assert recached, "an agent playbook ZED contributed to and others support must still be served and cached"


@pytest.mark.e2e
def test_benchmark_runs_at_a_tiny_size(tmp_path: Path):
    import subprocess
    import sys

    out = tmp_path / "embedding_cache.json"
    root = Path(__file__).resolve().parents[1]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.embedding_cache",
            "--docs",
            "30",
            "--new",
            "2",
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
        timeout=300,
        cwd=root,
    )
    report = json.loads(out.read_text())
    runs = report["runs"]
    assert report["vectors_identical"] and runs["second_build_same_lake"]["embedded"] == 0
    assert runs["build_with_2_new_docs"]["embedded"] == 2 and runs["build_with_2_new_docs"]["from_cache"] == 30
