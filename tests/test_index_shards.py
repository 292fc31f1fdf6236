"""Index shards in serving (search/shards.py): a replica that loads 2 of 4 shards answers its users exactly as the
whole index does, holds only their documents (and every shared one), and refuses other users with a 421 naming
their shard. Real local embedder, tantivy and faiss; the service through its real app."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from reflexio_pipelines.learning.embedding import LocalMiniLMEmbedder
from reflexio_pipelines.search import LoadedIndex, SearchDoc, SearchFilters, embed_search_query
from reflexio_pipelines.search.incremental import stage_update
from reflexio_pipelines.search.shards import ShardSelector, shard_of
from reflexio_pipelines.search.versions import activate_version, publish_index
from reflexio_pipelines.settings import Settings

TOPICS = [
    "python type hints",
    "kubernetes deploys",
    "vegetarian food",
    "celsius units",
    "short answers",
    "terraform modules",
    "the test suite",
    "berlin timezone",
    "pnpm workspaces",
    "booking flights",
]
USERS = [f"user-{i}" for i in range(24)]
SELECTOR = ShardSelector(frozenset({0, 1}), 4)


def corpus() -> list[SearchDoc]:
    docs = []
    for u, user in enumerate(USERS):
        for i, topic in enumerate(TOPICS):
            entity = "profile" if (u + i) % 2 else "user_playbook"
            doc_id = f"{entity}-{user}-{i}"
            text = f"{user} note {i}: cares about {topic} and {TOPICS[(i + u) % len(TOPICS)]}"
            docs.append(
                SearchDoc(
                    entity, doc_id, text, {"id": doc_id, "content": text}, user_id=user, created_at=1_700_000_000 + i
                )
            )
    docs += [
        SearchDoc(
            "agent_playbook",
            f"ap-{i}",
            f"Shared rule about {t}",
            {"id": f"ap-{i}", "playbook_status": "approved"},
            agent_version="v1",
            playbook_status="approved",
        )
        for i, t in enumerate(TOPICS)
    ]
    return docs


@pytest.fixture(scope="module")
def embedder() -> LocalMiniLMEmbedder:
    return LocalMiniLMEmbedder()


def answers(index: LoadedIndex, embedder, user: str | None, entity: str) -> list:
    out = []
    for query in ["python", "what does the user eat", "deploy to kubernetes", "units", "flights and timezone", ""]:
        vector = embed_search_query(embedder, query)
        for mode in ("hybrid", "vector", "fts"):
            hits = index.search(
                entity, query, vector, top_k=5, threshold=0.0, mode=mode, filters=SearchFilters(user_id=user)
            )
            out.append([(h.doc_id, h.bm25_rank, h.vector_rank, round(h.score, 9), h.payload) for h in hits])
    return out


@pytest.mark.parametrize("hnsw_min_rows", [50_000, 20], ids=["exact", "whole-index-has-a-graph"])
def test_two_of_four_shards_answer_their_users_like_the_whole_index(tmp_path: Path, embedder, hnsw_min_rows):
    root = tmp_path / "index"
    docs = corpus()
    publish_index(root, docs, embedder, hnsw_min_rows=hnsw_min_rows)
    # A delta too: shards select rows across the base and delta segments, tombstones included.
    changed = [d for d in docs if d.doc_id != "profile-user-1-0"] + [
        SearchDoc("user_playbook", f"new-{u}", f"{u} now prefers pnpm for kubernetes", {"id": f"new-{u}"}, user_id=u)
        for u in USERS[:6]
    ]
    activate_version(root, stage_update(root, changed, embedder, hnsw_min_rows=hnsw_min_rows).version)
    whole = LoadedIndex.load(root)
    part = LoadedIndex.load(root, shards=SELECTOR)

    held = [u for u in USERS if SELECTOR.holds(u)]
    assert 0 < len(held) < len(USERS)
    for entity in ("profile", "user_playbook"):
        expected = sum(1 for d in changed if d.entity_type == entity and SELECTOR.holds(d.user_id))
        assert part.count(entity) == expected < whole.count(entity)
        for user in held:
            assert answers(part, embedder, user, entity) == answers(whole, embedder, user, entity), (entity, user)
        other = next(u for u in USERS if not SELECTOR.holds(u))
        assert answers(part, embedder, other, entity) == [[]] * 18  # nothing of another shard's users is loaded
    assert part.count("agent_playbook") == whole.count("agent_playbook") == len(TOPICS)
    assert answers(part, embedder, None, "agent_playbook") == answers(whole, embedder, None, "agent_playbook")


def test_selector_parsing_and_the_hash_is_stable() -> None:
    assert ShardSelector.parse("", 4) is None and ShardSelector.parse("0,1,2,3", 4) is None  # all = whole
    assert ShardSelector.parse(" 2, 0 ", 4) == ShardSelector(frozenset({0, 2}), 4)
    with pytest.raises(ValueError, match="outside 0..3"):
        ShardSelector.parse("4", 4)
    with pytest.raises(ValueError, match="shard numbers"):
        ShardSelector.parse("a", 4)
    assert shard_of("user-1", 4) == shard_of("user-1", 4)
    assert len({shard_of(u, 4) for u in USERS}) == 4  # spreads


def test_a_sharded_service_refuses_other_shards_users_with_421(tmp_path: Path, embedder) -> None:
    from serving.app import create_app

    lake = tmp_path / "lake"
    from reflexio_pipelines.lake.io import Lake

    publish_index(Lake.at(str(lake)).index_root, corpus(), embedder)
    settings = Settings(lake=str(lake), index_shards="0,1", index_shard_count=4)
    held = next(u for u in USERS if SELECTOR.holds(u))
    other = next(u for u in USERS if not SELECTOR.holds(u))
    with TestClient(create_app(settings)) as client:
        ok = client.post("/api/search", json={"query": "kubernetes", "user_id": held, "threshold": 0.0})
        assert ok.status_code == 200 and ok.json()["profiles"] + ok.json()["user_playbooks"], ok.json()
        for path in ("/api/search", "/api/search_profiles", "/api/search_user_playbooks"):
            refused = client.post(path, json={"query": "kubernetes", "user_id": other})
            assert refused.status_code == 421, path
            body = refused.json()
            assert body["success"] is False and f"shard {shard_of(other, 4)}" in body["msg"]
            assert refused.headers["X-Reflexio-Shard"] == str(shard_of(other, 4))
        shared = client.post("/api/search_agent_playbooks", json={"query": "flights"})
        assert shared.status_code == 200 and shared.json()["agent_playbooks"]


def test_a_bad_shard_setting_fails_at_start_up_naming_it() -> None:
    from reflexio_pipelines.settings import SettingsError, load_settings

    with pytest.raises(SettingsError, match="outside 0..1"):
        load_settings({"index_shards": "3", "index_shard_count": 2})
