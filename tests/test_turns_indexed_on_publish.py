"""Every build takes in the turns published since the served version, whatever triggered it: publishes with
`wait_for_response` leave no landing file to serving's per-query fallback (before, they indexed learned items only
and all 272 landing files of a long-conversation benchmark stayed unindexed)."""

from __future__ import annotations

from reflexio_pipelines.pending import unindexed_turn_files
from reflexio_pipelines.runs import rebuild_index

SESSIONS = [
    ("s1", ["I adopted a greyhound called Biscuit last spring.", "Biscuit sounds lovely! How is he settling in?"]),
    ("s2", ["My sister Mara moved to Lisbon for a job at a bakery.", "Lisbon is a great city for bakers."]),
    ("s3", ["I started learning the cello in October.", "Cello is a rewarding instrument to pick up."]),
]


def _publish(client, session_id: str, lines: list[str]) -> None:
    body = {
        "user_id": "dana",
        "session_id": session_id,
        "interaction_data_list": [
            {"role": role, "content": text} for role, text in zip(("user", "assistant"), lines, strict=True)
        ],
    }
    reply = client.post("/api/publish_interaction?wait_for_response=true", json=body)
    assert reply.status_code == 200, reply.text


def test_wait_for_response_publishes_leave_no_turn_unindexed(client, lake):
    for session_id, lines in SESSIONS:
        _publish(client, session_id, lines)
    assert lake.landing_hours(), "the publishes landed nothing"
    assert unindexed_turn_files(lake) == []
    reply = client.post(
        "/api/search_interactions", json={"user_id": "dana", "query": "what pet did I adopt", "top_k": 10}
    )
    assert reply.status_code == 200, reply.text
    contents = [str(hit) for hit in reply.json()["interactions"]]
    assert any("greyhound" in c for c in contents), contents


def test_a_cli_rebuild_takes_in_published_turns(client, lake, settings, instance):
    body = {"user_id": "eli", "interaction_data_list": [{"role": "user", "content": "My bike is a red Bianchi."}]}
    assert client.post("/api/publish_interaction", json=body).status_code == 200
    assert unindexed_turn_files(lake), "a publish without wait_for_response builds nothing by itself"
    rebuild_index(settings=settings, instance=instance)
    assert unindexed_turn_files(lake) == []
