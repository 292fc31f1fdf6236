"""Incremental index versions (search.incremental): a delta on the previous version answers exactly like a full
rebuild of the same documents, never touches the previous version's files, and folds/compacts as documented.
Real local embedder, real tantivy and faiss."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from reflexio_pipelines.learning.embedding import LocalMiniLMEmbedder
from reflexio_pipelines.search import LoadedIndex, SearchDoc, SearchFilters, embed_search_query
from reflexio_pipelines.search.build import build_index
from reflexio_pipelines.search.incremental import MAX_DELTAS, needs_compaction, plan_changes, stage_update
from reflexio_pipelines.search.types import ENTITY_TYPES
from reflexio_pipelines.search.versions import activate_version, current_version, publish_index

NOW = 1_700_000_000
TOPICS = [
    "python type hints",
    "deploying to kubernetes",
    "vegetarian recipes",
    "celsius temperatures",
    "short answers",
    "terraform modules",
    "running the test suite",
    "berlin timezone",
    "pnpm workspaces",
    "booking flights",
]
QUERIES = [
    "how should I write python",
    "kubernetes deploy",
    "food without meat",
    "temperature units",
    "keep it brief",
    "infrastructure as code",
    "tests before merge",
    "what time is it there",
    "package manager",
    "travel plans",
    "zorblax",
]


def _doc(entity_type: str, i: int, user: str, text: str, **kw) -> SearchDoc:
    doc_id = f"{entity_type[:2]}-{user}-{i}"
    return SearchDoc(
        entity_type,
        doc_id,
        text,
        {"id": doc_id, "content": text, "user_id": user},
        user_id=user,
        created_at=NOW - i,
        **kw,
    )


def corpus(n_users: int = 6) -> list[SearchDoc]:
    docs = []
    for u in range(n_users):
        for i, topic in enumerate(TOPICS):
            if (u + i) % 3 == 0:
                docs.append(_doc("profile", i, f"u{u}", f"User {u} cares about {topic} (note {i})"))
            else:
                docs.append(
                    _doc(
                        "user_playbook",
                        i,
                        f"u{u}",
                        f"When asked about {topic}, answer with care {u}",
                        agent_version="v1",
                        playbook_name="general",
                    )
                )
    docs.append(
        SearchDoc(
            "agent_playbook",
            "ap-1",
            "Always confirm before booking flights",
            {"id": "ap-1"},
            agent_version="v1",
            playbook_status="approved",
            created_at=NOW,
        )
    )
    return docs


def changed(docs: list[SearchDoc], round_: int) -> list[SearchDoc]:
    """One round of lake changes: a doc edited, one superseded, one deleted, two added."""
    out = [d for d in docs if d.doc_id != docs[round_].doc_id]  # deleted
    edit = out[round_ + 1]
    out[round_ + 1] = replace(
        edit, text=edit.text + f" and also zorblax {round_}", payload={**edit.payload, "content": edit.text + " edited"}
    )
    out[round_ + 2] = replace(out[round_ + 2], status="superseded")
    out += [
        _doc(
            "user_playbook",
            100 + round_,
            f"u{round_ % 3}",
            f"New rule {round_}: mention zorblax and pnpm",
            agent_version="v1",
            playbook_name="general",
        ),
        _doc("profile", 200 + round_, "u1", f"Moved to city number {round_} near the kubernetes office"),
    ]
    return out


@pytest.fixture(scope="module")
def embedder() -> LocalMiniLMEmbedder:
    return LocalMiniLMEmbedder()


def results(index: LoadedIndex, embedder, entity_type: str) -> list:
    """Ids and ranks of every query in every mode, with and without a user filter and an all-status filter."""
    out = []
    for query in QUERIES:
        vector = embed_search_query(embedder, query)
        for mode in ("hybrid", "vector", "fts"):
            for filters in (
                SearchFilters(),
                SearchFilters(user_id="u1"),
                SearchFilters(statuses=("current", "superseded"), playbook_statuses=None),
            ):
                hits = index.search(entity_type, query, vector, top_k=5, threshold=0.0, mode=mode, filters=filters)
                out.append([(h.doc_id, h.bm25_rank, h.vector_rank, h.payload.get("content")) for h in hits])
    return out


def same_answers(a: LoadedIndex, b: LoadedIndex, embedder) -> None:
    for entity_type in ("profile", "user_playbook", "agent_playbook"):
        assert a.count(entity_type) == b.count(entity_type)
        assert results(a, embedder, entity_type) == results(b, embedder, entity_type), entity_type


def digests(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and "lock" not in p.name
    }


def full(tmp_path: Path, docs: list[SearchDoc], embedder, name: str, **kw) -> LoadedIndex:
    root = tmp_path / name
    return LoadedIndex.load(root, publish_index(root, docs, embedder, **kw))


def test_a_delta_answers_like_a_full_rebuild_and_leaves_the_old_version_alone(tmp_path: Path, embedder) -> None:
    root = tmp_path / "inc"
    docs = corpus()
    base = publish_index(root, docs, embedder)
    before = digests(root / base)
    old_answers = results(LoadedIndex.load(root, base), embedder, "user_playbook")

    docs2 = changed(docs, 0)
    staged = stage_update(root, docs2, embedder)
    assert staged.mode == "incremental" and staged.deltas == 1
    assert staged.changes == {"docs_upserted": 4, "docs_deleted": 1}  # edit, supersede, 2 new; 1 deleted
    activate_version(root, staged.version)

    delta = LoadedIndex.load(root, staged.version)
    same_answers(delta, full(tmp_path, docs2, embedder, "full"), embedder)
    assert digests(root / base) == before  # hard links, never rewritten
    assert results(LoadedIndex.load(root, base), embedder, "user_playbook") == old_answers
    # The deleted doc is gone, the edited one answers with its new payload, old rows never come back.
    assert delta.payload(docs[0].entity_type, docs[0].doc_id) is None
    edited = docs2[1]
    assert delta.payload(edited.entity_type, edited.doc_id)["content"].endswith("edited")
    assert delta.manifest["tombstones"] and delta.manifest["base_version"] == base


def test_nothing_changed_means_no_new_version(tmp_path: Path, embedder) -> None:
    root = tmp_path / "idx"
    docs = corpus(3)
    version = publish_index(root, docs, embedder)
    staged = stage_update(root, list(reversed(docs)), embedder)  # order does not matter
    assert (staged.mode, staged.version, staged.changes["docs_upserted"]) == ("unchanged", version, 0)


def test_many_rounds_fold_deltas_and_still_match(tmp_path: Path, embedder) -> None:
    root = tmp_path / "idx"
    docs = corpus()
    publish_index(root, docs, embedder)
    for round_ in range(MAX_DELTAS + 2):
        docs = changed(docs, round_)
        staged = stage_update(root, docs, embedder)
        assert staged.mode == "incremental"
        activate_version(root, staged.version)
        assert staged.deltas <= MAX_DELTAS
    manifest = json.loads((root / current_version(root) / "manifest.json").read_text())
    assert len(manifest["deltas"]) < MAX_DELTAS  # folded once on the way
    same_answers(LoadedIndex.load(root), full(tmp_path, docs, embedder, "full"), embedder)


def test_deltas_beside_an_hnsw_graph(tmp_path: Path, embedder) -> None:
    """Base rows are walked in the graph, delta rows scanned exactly, tombstoned base rows excluded from both."""
    root = tmp_path / "idx"
    docs = corpus(12)
    publish_index(root, docs, embedder, hnsw_min_rows=20)
    docs2 = changed(docs, 1)
    staged = stage_update(root, docs2, embedder, hnsw_min_rows=20)
    assert staged.mode == "incremental"
    delta = LoadedIndex.load(root, staged.version)
    assert "user_playbook" in delta.manifest["ann"]
    rebuilt = full(tmp_path, docs2, embedder, "full", hnsw_min_rows=20)
    for query in QUERIES:
        vector = embed_search_query(embedder, query)
        got = delta.search(
            "user_playbook", query, vector, top_k=5, threshold=0.0, mode="vector", filters=SearchFilters()
        )
        want = rebuilt.search(
            "user_playbook", query, vector, top_k=5, threshold=0.0, mode="vector", filters=SearchFilters()
        )
        assert [h.doc_id for h in got] == [h.doc_id for h in want], query
        assert all(h.doc_id != docs[1].doc_id for h in got)
    new_rule = next(d for d in docs2 if d.doc_id.startswith("us-u1-101"))
    hits = delta.search(
        "user_playbook",
        new_rule.text,
        embed_search_query(embedder, new_rule.text),
        top_k=1,
        threshold=0.0,
        mode="vector",
        filters=SearchFilters(),
    )
    assert hits[0].doc_id == new_rule.doc_id


def test_compaction_when_asked_or_when_the_delta_outgrows_the_base(tmp_path: Path, embedder) -> None:
    root = tmp_path / "idx"
    docs = corpus(3)
    publish_index(root, docs, embedder)
    assert stage_update(root, changed(docs, 0), embedder, compact=True).mode == "full"
    manifest = json.loads((root / current_version(root) / "manifest.json").read_text())
    many = [_doc("profile", 1000 + i, "u9", f"fact number {i}") for i in range(1200)]
    reason = needs_compaction(
        manifest, plan_changes({t: {} for t in ("profile", "user_playbook", "agent_playbook")}, many)
    )
    assert reason and "profile" in reason
    assert needs_compaction(manifest, plan_changes({}, many[:10])) is None


def test_a_changed_embedder_forces_a_full_build(tmp_path: Path, embedder) -> None:
    root = tmp_path / "idx"
    docs = corpus(2)
    publish_index(root, docs, embedder)

    class Other:
        model_id, dim = "other-model", embedder.dim

        def embed(self, texts):
            return embedder.embed(texts)

    staged = stage_update(root, changed(docs, 0), Other())
    assert staged.mode == "full" and "embedder" in staged.reason


def test_a_format_1_version_is_replaced_by_a_full_build(tmp_path: Path, embedder) -> None:
    """Versions written before fingerprints existed still load, and the next build is a full one."""
    root = tmp_path / "idx"
    docs = corpus(2)
    version = publish_index(root, docs, embedder)
    manifest_path = root / version / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["format_version"] = 1
    for key in ("rows", "deltas", "tombstones"):
        manifest.pop(key)
    manifest_path.write_text(json.dumps(manifest))
    assert LoadedIndex.load(root, version).count("profile") == sum(d.entity_type == "profile" for d in docs)
    staged = stage_update(root, docs, embedder)
    assert staged.mode == "full" and "format 1" in staged.reason


def test_build_index_output_is_a_base_with_fingerprints(tmp_path: Path, embedder) -> None:
    import pyarrow.parquet as pq

    manifest = build_index(corpus(1), embedder, tmp_path / "v")
    assert manifest["format_version"] == 2 and manifest["deltas"] == [] and manifest["rows"] == manifest["counts"]
    fingerprints = pq.read_table(tmp_path / "v" / "docs.parquet", columns=["fingerprint"]).column(0).to_pylist()
    assert len(set(fingerprints)) == len(fingerprints) and all(len(f) == 32 for f in fingerprints)
    assert np.load(tmp_path / "v" / "vectors" / "profile.npy").dtype == np.float32


def test_new_docs_weigh_once_against_the_base_and_updates_twice() -> None:
    manifest = {"counts": {t: 0 for t in ENTITY_TYPES} | {"profile": 4000}}
    new = [_doc("profile", 5000 + i, "u9", f"fact number {i}") for i in range(900)]
    # 900 new rows on a base of 4,000: a delta (each new doc only adds a row; counted as dead too it rebuilt)
    assert needs_compaction(manifest, plan_changes({t: {} for t in ENTITY_TYPES}, new)) is None
    # the same 900 as edits of docs the base holds: 900 tombstones and 900 delta rows, past a quarter of the base
    prior = {t: {} for t in ENTITY_TYPES} | {"profile": {d.doc_id: (i, "old") for i, d in enumerate(new)}}
    reason = needs_compaction(manifest, plan_changes(prior, new))
    assert reason and "900 dead" in reason
