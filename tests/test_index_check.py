"""The blocking index check's self-retrieval: a doc must be found by its own text. Unreadable texts that embed
alike lose ties by id and must not block every later index version (a fuzzed manual add once did); a doc whose
vector belongs to another doc is not excused as a tie."""

from __future__ import annotations

import numpy as np

from reflexio_pipelines.checks import self_retrieval_problems, tied_out
from reflexio_pipelines.learning.embedding import make_embedder
from reflexio_pipelines.search.build import build_index
from reflexio_pipelines.search.query import LoadedIndex
from reflexio_pipelines.search.text import embed_search_query
from reflexio_pipelines.search.types import SearchDoc, SearchFilters

READABLE = [
    "Never deploy to us-east-1; always use us-west-2.",
    "Answer with SQL examples.",
    "Schedule reports for 08:00 CET.",
    "Escalate after the second failed attempt.",
]


def _docs(texts: list[str]) -> list[SearchDoc]:
    return [
        SearchDoc("agent_playbook", f"ap-{i:02d}", t, {"content": t}, playbook_status="pending")
        for i, t in enumerate(texts)
    ]


def test_unreadable_texts_that_tie_do_not_fail_the_check(tmp_path):
    embedder = make_embedder("local")
    # Unassigned code points and symbols: no BM25 terms, and (nearly) the same embedding each.
    unreadable = [chr(0x5F028 + i) for i in range(12)]
    build_index(_docs(READABLE + unreadable), embedder, tmp_path / "20261130T000000000000Z-aaaaaa")
    index = LoadedIndex.load(tmp_path, "20261130T000000000000Z-aaaaaa")
    assert self_retrieval_problems(index, embedder) == []


def test_a_misaligned_vector_is_not_taken_for_a_tie(tmp_path):
    embedder = make_embedder("local")
    texts = READABLE + [
        f"Always check the {w} before deploying."
        for w in ("logs", "queue", "cache", "quota", "backups", "alerts", "tokens", "DNS")
    ]
    version = "20261130T000000000000Z-bbbbbb"
    build_index(_docs(texts), embedder, tmp_path / version)
    vectors_path = tmp_path / version / "vectors" / "agent_playbook.npy"
    np.save(vectors_path, np.load(vectors_path)[::-1].copy())  # every row now holds another doc's vector
    index = LoadedIndex.load(tmp_path, version, verify=False)
    text = READABLE[0]
    query = embed_search_query(embedder, text)
    everything = SearchFilters(playbook_statuses=None)
    assert not tied_out(index, "agent_playbook", "ap-00", text, query, 1, everything)
    # The same doc with its own vector back is a true nearest neighbour, which the tie rule accepts.
    np.save(vectors_path, np.load(vectors_path)[::-1].copy())
    index = LoadedIndex.load(tmp_path, version, verify=False)
    assert tied_out(index, "agent_playbook", "ap-00", text, query, 1, everything)


def _turn_rows(users: int) -> list[dict]:
    """Template-like traffic: every user says the same six lines on the same day (as a synthetic corpus does)."""
    lines = [
        "I use pnpm in this repo.",
        "Noted, pnpm it is.",
        "Run the tests please.",
        "All 12 tests pass.",
        "Thanks!",
        "You're welcome.",
    ]
    rows = []
    for u in range(users):
        for i, line in enumerate(lines):
            rows.append(
                {
                    "turn_id": f"t-{u}-{i}",
                    "interaction_id": u * 10 + i,
                    "user_id": f"u{u}",
                    "session_id": f"s{u}",
                    "request_id": f"r{u}",
                    "turn_index": i,
                    "created_at": 1_700_000_000,
                    "ingested_at_us": 1,
                    "role": "User" if i % 2 == 0 else "Assistant",
                    "content": line,
                    "user_action": None,
                    "user_action_description": None,
                    "interacted_image_url": None,
                    "shadow_content": None,
                    "expert_content": None,
                    "tools_used": None,
                    "agent_version": "v1",
                }
            )
    return rows


def test_turns_of_template_like_traffic_pass_and_a_misaligned_turn_vector_fails(tmp_path):
    from reflexio_pipelines.search.conversation import turn_docs

    embedder = make_embedder("local")
    version = "20261130T000000000000Z-cccccc"
    build_index(turn_docs(_turn_rows(30)), embedder, tmp_path / version)
    assert self_retrieval_problems(LoadedIndex.load(tmp_path, version), embedder) == []
    vectors_path = tmp_path / version / "vectors" / "interaction.npy"
    np.save(vectors_path, np.roll(np.load(vectors_path), 7, axis=0))  # every row now holds another turn's vector
    problems = self_retrieval_problems(LoadedIndex.load(tmp_path, version, verify=False), embedder)
    assert problems and all("is not the one its lines make" in p for p in problems)
