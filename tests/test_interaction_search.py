"""Turns in the precomputed index (issue #21): documents with conversational context, vectors mixed from each line's
embedding, search_interactions through the service (index + recent-turns overlay, heuristic speaker/time boosts,
neighbours), deletes, and the sensor that takes new turns in."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import dagster as dg
import numpy as np
import pytest
from fastapi.testclient import TestClient

from reflexio_pipelines.definitions import build_definitions
from reflexio_pipelines.jobs import MAX_NEW_TURNS_PER_BUILD
from reflexio_pipelines.learning.embedding import l2_normalize
from reflexio_pipelines.resources import LakeResource
from reflexio_pipelines.runs import rebuild_index
from reflexio_pipelines.search.build import build_index, doc_fingerprint
from reflexio_pipelines.search.conversation import NEIGHBOUR_WEIGHT, NEIGHBOURS_KEY, turn_docs
from reflexio_pipelines.search.query import LoadedIndex
from reflexio_pipelines.search.text import normalize_text
from reflexio_pipelines.search.turns import rank_texts
from reflexio_pipelines.search.types import SearchDoc
from reflexio_pipelines.search.versions import TURNS_WATERMARK, new_version_id, turns_watermark
from reflexio_pipelines.sensors import interaction_index_sensor
from serving.app import create_app
from serving.interaction_search import search_turns
from tests.support.index_runs import index_turns

MAY_2023 = int(datetime(2023, 5, 8, 18, 0, tzinfo=timezone.utc).timestamp())
AUG_2023 = int(datetime(2023, 8, 20, 18, 0, tzinfo=timezone.utc).timestamp())


def _row(turn_index: int, role: str, content: str, created_at: int = MAY_2023, session: str = "s1") -> dict:
    return {
        "turn_id": f"r-{session}:{turn_index}",
        "interaction_id": 1000 + turn_index,
        "request_id": f"r-{session}",
        "turn_index": turn_index,
        "user_id": "pair",
        "session_id": session,
        "role": role,
        "content": content,
        "user_action": "none",
        "user_action_description": "",
        "interacted_image_url": "",
        "shadow_content": "",
        "expert_content": "",
        "tools_used": "[]",
        "agent_version": "",
        "created_at": created_at + turn_index,
        "ingested_at_us": 1,
    }


def test_turn_documents_carry_their_window_and_session_date():
    rows = [
        _row(i, ("Leo", "Maya")[i % 2], text)
        for i, text in enumerate(
            ["Did you run the Lisbon marathon?", "I did, four hours ten.", "Wow!", "My knees hate me.", "Rest up."]
        )
    ]
    docs = {d.doc_id: d for d in turn_docs(rows)}
    answer = docs["r-s1:1"]
    assert answer.entity_type == "interaction" and answer.user_id == "pair"
    assert "8 May 2023" in answer.text and "Lisbon marathon" in answer.text  # the question before it, the date
    assert answer.payload[NEIGHBOURS_KEY] == ["r-s1:0", "r-s1:2", "r-s1:3"]  # two before (one exists), two after
    assert answer.payload["content"] == "I did, four hours ten." and answer.payload["role"] == "Maya"
    assert answer.vector_parts[0] == ("I did, four hours ten.", pytest.approx(1 - NEIGHBOUR_WEIGHT))
    assert sum(w for _, w in answer.vector_parts) == pytest.approx(1.0)
    assert "Leo" not in answer.vector_parts[1][0]  # lines carry no speaker (the role is matched separately)
    # A turn that arrives later joins the windows before it: those documents change, so they are re-indexed.
    grown = {d.doc_id: d for d in turn_docs([*rows, _row(5, "Leo", "See you Sunday.")])}
    assert doc_fingerprint(grown["r-s1:4"]) != doc_fingerprint(docs["r-s1:4"])
    assert doc_fingerprint(grown["r-s1:1"]) == doc_fingerprint(docs["r-s1:1"])  # its window did not change


def test_bm25_ranks_the_turn_that_said_it_ahead_of_its_neighbours():
    # Every window line is in five documents; the middle turn's document is the longest of them (four neighbours),
    # so with its line counted once BM25's length norm put the neighbours' documents first.
    rows = [
        _row(i, ("Leo", "Maya")[i % 2], text)
        for i, text in enumerate(
            [
                "Hey, how was your weekend, anything fun happen?",
                "Pretty quiet, mostly errands and laundry, you know how it goes.",
                "We finally adopted a greyhound, we called her Pickle.",
                "Oh wow, congratulations, that is such lovely news for you both!",
                "Thanks, she sleeps all day on the sofa already.",
            ]
        )
    ]
    docs = turn_docs(rows)
    ranked = rank_texts([d.text for d in docs], "greyhound called Pickle", 5)
    assert docs[ranked[0]].doc_id == "r-s1:2" and len(ranked) == 5


class CountingEmbedder:
    """The real local embedder, counting the texts it embeds."""

    def __init__(self, real) -> None:
        self.real, self.model_id, self.dim, self.texts = real, real.model_id, real.dim, []

    def embed(self, texts):
        self.texts += list(texts)
        return self.real.embed(texts)


def test_a_turn_vector_mixes_its_lines_each_embedded_once(tmp_path):
    from reflexio_pipelines.learning.embedding import LocalMiniLMEmbedder

    real = LocalMiniLMEmbedder()
    embedder = CountingEmbedder(real)
    rows = [_row(i, "Maya", f"line number {i} about gardens") for i in range(6)]
    profile = SearchDoc("profile", "p1", "Prefers tea", {"content": "Prefers tea"}, user_id="pair")
    version = new_version_id()
    build_index([*turn_docs(rows), profile], embedder, tmp_path / version)
    assert sorted(embedder.texts) == sorted([normalize_text(r["content"]) for r in rows] + ["prefers tea"])
    index = LoadedIndex.load(tmp_path, version)
    doc = next(d for d in turn_docs(rows) if d.doc_id == "r-s1:2")
    parts = real.embed([normalize_text(p) for p, _ in doc.vector_parts])
    expected = l2_normalize(np.sum(parts * np.asarray([w for _, w in doc.vector_parts])[:, None], axis=0)[None])[0]
    np.testing.assert_allclose(index.vector("interaction", "r-s1:2"), expected, atol=1e-5)
    np.testing.assert_allclose(index.vector("profile", "p1"), real.embed(["prefers tea"])[0], atol=1e-6)


CONVERSATION = [
    ("Leo", "Hey, how was your weekend?"),
    ("Maya", "We finally adopted a beagle puppy, we called him Biscuit."),
    ("Leo", "That's adorable."),
    ("Maya", "Also I signed up for cello lessons on Tuesdays."),
    ("Leo", "I've been practising the trumpet every evening."),
    ("Maya", "Tried making a mushroom risotto from scratch yesterday."),
    ("Leo", "Did you run the Lisbon marathon in the end?"),
    ("Maya", "I did! Four hours and ten minutes, my knees still hate me."),
]


def _publish(client, turns, created_at: int, session: str) -> None:
    body = {
        "user_id": "pair",
        "session_id": session,
        "interaction_data_list": [
            {"role": role, "content": text, "created_at": created_at + i} for i, (role, text) in enumerate(turns)
        ],
    }
    reply = client.post("/api/publish_interaction", json=body)
    assert reply.status_code == 200 and reply.json()["success"], reply.text


def _search(client, query: str, **extra) -> dict:
    reply = client.post("/api/search_interactions", json={"user_id": "pair", "query": query, "top_k": 5, **extra})
    assert reply.status_code == 200, reply.text
    return reply.json()


@pytest.fixture
def client(settings, instance):
    with TestClient(create_app(settings)) as c:
        _publish(c, CONVERSATION, MAY_2023, "s1")
        _publish(
            c,
            [("Leo", "How is the garden?"), ("Maya", "Tried making paella from scratch for the neighbours.")],
            AUG_2023,
            "s2",
        )
        index_turns(settings, instance)
        c.app.state.svc.index.refresh()
        yield c


def test_turns_are_served_from_the_index_with_their_neighbours(client, lake):
    assert turns_watermark(lake.index_root) > 0
    served = client.app.state.svc.index.index
    assert served.count("interaction") == len(CONVERSATION) + 2
    hit = _search(client, "What is the name of Maya's dog?")["interactions"][0]
    assert hit["content"] == "We finally adopted a beagle puppy, we called him Biscuit."
    assert {"interaction_id", "role", "content", "created_at", "user_action"} <= set(hit)
    assert [n["content"] for n in hit["neighbours"]] == [text for _, text in CONVERSATION[:4] if text != hit["content"]]
    assert NEIGHBOURS_KEY not in hit and all(NEIGHBOURS_KEY not in n for n in hit["neighbours"])
    # The answer that only makes sense after its question is found by the question's words.
    hit = _search(client, "How long did Maya take to finish the marathon?")["interactions"][0]
    assert hit["content"].startswith("I did! Four hours")


def test_speaker_and_time_named_in_the_question_boost_the_matching_turns(client):
    found = _search(client, "Which instrument is Leo practising?")
    assert found["interactions"][0]["content"].startswith("I've been practising the trumpet")
    assert "heuristic boosts: speaker Leo" in found["msg"]
    timed = _search(client, "What did Maya cook in August 2023?")
    assert timed["interactions"][0]["content"].startswith("Tried making paella")
    assert "time range" in timed["msg"]
    assert _search(client, "What did Maya cook in May 2023?")["interactions"][0]["content"].startswith(
        "Tried making a mushroom risotto"
    )


def test_each_heuristic_boost_can_be_left_out(client):
    """The ablation switch (benchmarks/interaction_ranking.py --ablation): a boost left out adds no leg."""
    state, query = client.app.state.svc, "What did Leo cook in August 2023?"
    both = search_turns(state, "pair", query, 5, "hybrid", None, None)[1]
    assert any("speaker Leo" in n and "time range" in n for n in both)
    speaker_only = search_turns(state, "pair", query, 5, "hybrid", None, None, boosts=frozenset({"speaker"}))[1]
    assert any("speaker Leo" in n and "time range" not in n for n in speaker_only)
    assert not any(
        "heuristic" in n for n in search_turns(state, "pair", query, 5, "hybrid", None, None, boosts=frozenset())[1]
    )


def test_a_published_turn_is_found_before_any_run_and_until_a_version_holds_it(client, settings, instance):
    state = client.app.state.svc
    _publish(client, [("Maya", "My new bike is a green Brompton, it folds in seconds.")], AUG_2023 + 600, "s3")
    assert _search(client, "folding Brompton bike")["interactions"][0]["content"].startswith("My new bike")
    rebuild_index(settings=settings, instance=instance, index_turns=False)  # a build of learned items only
    state.index.refresh()
    assert state.index.index.payload("interaction", next(iter(_turn_ids(state, "Brompton")))) is None
    assert _search(client, "folding Brompton bike")["interactions"][0]["content"].startswith("My new bike")
    index_turns(settings, instance)
    state.index.refresh()
    assert state.recent_turns.rows("pair", state.turns_watermark(state.index.index)) == []  # the overlay let go
    assert _search(client, "folding Brompton bike")["interactions"][0]["content"].startswith("My new bike")


def _turn_ids(state, word: str) -> set[str]:
    from reflexio_pipelines.lake.interactions import turn_rows

    return {r["turn_id"] for r in turn_rows(state.lake, [("user_id", "=", "pair")]) if word in (r["content"] or "")}


def test_a_deleted_turn_leaves_search_and_neighbour_lists_at_once(client):
    dog = _search(client, "What is the name of Maya's dog?")["interactions"][0]
    reply = client.request(
        "DELETE", "/api/delete_interaction", json={"user_id": "pair", "interaction_id": dog["interaction_id"]}
    )
    assert reply.json()["success"], reply.text
    found = _search(client, "beagle puppy called Biscuit")["interactions"]
    assert all("Biscuit" not in t["content"] for t in found)
    assert all("Biscuit" not in json.dumps(t["neighbours"]) for t in found)


def test_a_query_without_words_lists_the_newest_turns(client):
    turns = client.post("/api/search_interactions", json={"user_id": "pair", "most_recent_k": 2}).json()
    assert [t["content"] for t in turns["interactions"]] == [
        "Tried making paella from scratch for the neighbours.",
        "How is the garden?",
    ]


def test_the_sensor_asks_for_a_run_while_turns_wait_outside_the_index(settings, instance, lake):
    defs_lake = LakeResource(root=str(lake.root))
    with TestClient(create_app(settings)) as c:
        _publish(c, CONVERSATION[:2], MAY_2023, "s1")

        def evaluate():
            context = dg.build_sensor_context(instance=instance, resources={"lake": defs_lake})
            return interaction_index_sensor(context)

        (request,) = evaluate().run_requests
        intake = {"index_turns": True, "max_new_turns": MAX_NEW_TURNS_PER_BUILD}
        assert request.run_config == {"ops": {"search_index": {"config": intake}}}
        index_turns(settings, instance)
        assert not evaluate().run_requests
        _publish(c, CONVERSATION[2:4], MAY_2023 + 60, "s1")
        (later,) = evaluate().run_requests
        assert later.run_key != request.run_key


def test_the_sensor_leaves_the_turns_to_a_learning_run_in_flight(settings, instance, lake):
    from dagster._core.storage.dagster_run import DagsterRun

    with TestClient(create_app(settings)) as c:
        _publish(c, CONVERSATION[:2], MAY_2023, "s1")
    context = dg.build_sensor_context(instance=instance, resources={"lake": LakeResource(root=str(lake.root))})
    assert interaction_index_sensor(context).run_requests  # turns wait outside the index
    instance.add_run(DagsterRun(job_name="learn_job", run_id="learning-in-flight", status=dg.DagsterRunStatus.STARTED))
    skipped = interaction_index_sensor(context)
    assert not skipped.run_requests and "learn_job" in skipped.skip_reason.skip_message


def test_a_run_checks_and_serves_its_own_build_not_the_newest(settings, instance, lake):
    from reflexio_pipelines.assets.search_index import expected_counts, staged_version

    def index_run():
        return (
            build_definitions(settings)
            .resolve_job_def("index_job")
            .execute_in_process(
                instance=instance, run_config={"ops": {"search_index": {"config": {"index_turns": True}}}}
            )
        )

    with TestClient(create_app(settings)) as c:
        _publish(c, CONVERSATION[:2], MAY_2023, "s1")
        first = index_run()
        _publish(c, CONVERSATION[2:4], MAY_2023 + 60, "s1")
        second = index_run()
    assert first.success and second.success
    mine, newest = staged_version(instance, lake.index_root, first.run_id), staged_version(instance, lake.index_root)
    assert mine != newest and newest == staged_version(instance, lake.index_root, second.run_id)
    assert expected_counts(instance, lake.index_root, first.run_id)["interaction"] == 2
    assert expected_counts(instance, lake.index_root)["interaction"] == 4


def test_a_version_records_its_turn_watermark(client, lake):
    manifest = client.app.state.svc.index.index.manifest
    assert manifest["watermarks"][TURNS_WATERMARK] == turns_watermark(lake.index_root)


def test_a_turn_outside_the_index_is_found_by_meaning_as_the_index_finds_it(client):
    # No word of the question is in the turn: only the vector leg finds it, so the landing-file fallback must have
    # one, as the index has (the fallback is a bridge, not a second ranker).
    _publish(client, [("Maya", "My new bike is a green Brompton, it folds in seconds.")], AUG_2023 + 600, "s3")
    found = _search(client, "Which bicycle did she purchase?")["interactions"]
    assert found and found[0]["content"].startswith("My new bike")
    fts = _search(client, "Which bicycle did she purchase?", search_mode="fts")["interactions"]
    assert all(not t["content"].startswith("My new bike") for t in fts)  # BM25 alone misses it
