"""Sessions for evaluation: grouping, closing after a quiet period (from the data, not a timer), deterministic
sampling, and the correction / user-turn counts."""

from __future__ import annotations

import random

import pytest

from reflexio_pipelines.learning.sessions import (
    DEFAULT_QUIET_PERIOD_S,
    DEFAULT_SAMPLING_RATE,
    Session,
    corrections_in,
    group_sessions,
    is_closed,
    is_sampled,
    shadow_turns,
    user_turns_to_resolution,
)
from reflexio_pipelines.learning.types import Turn

T0 = 1_767_225_600  # 2026-01-01 00:00 UTC


def turn(
    turn_id: str,
    role: str,
    content: str,
    at: int = 0,
    *,
    session: str | None = "s1",
    request: str = "r1",
    user: str = "ann",
    **extra,
) -> Turn:
    return Turn(
        turn_id=turn_id,
        interaction_id=abs(hash(turn_id)) % 10**9,
        request_id=request,
        user_id=user,
        role=role,
        content=content,
        created_at=T0 + at,
        session_id=session,
        **extra,
    )


def one_session(*turns: Turn) -> Session:
    (session,) = group_sessions(turns)
    return session


# --- grouping ----------------------------------------------------------------------------------------------------


def test_groups_by_session_id_else_request_id_in_chronological_order() -> None:
    turns = [
        turn("a1", "user", "Deploy billing", 0, session="s-a", request="r1", agent_version="v1"),
        turn("a2", "assistant", "Deploying", 5, session="s-a", request="r1", agent_version="v1"),
        turn("a3", "user", "Thanks", 70, session="s-a", request="r2", agent_version="v2"),  # same session
        turn("b1", "user", "Hi", 30, session=None, request="r-solo"),
        turn("b2", "assistant", "Hello", 31, session=None, request="r-solo"),
        turn("c1", "user", "Other request", 40, session=None, request="r-other", agent_version="v9"),
    ]
    shuffled = turns[:]
    random.Random(7).shuffle(shuffled)
    sessions = group_sessions(shuffled)
    assert [(s.session_id, [t.turn_id for t in s.turns]) for s in sessions] == [
        ("s-a", ["a1", "a2", "a3"]),
        ("r-solo", ["b1", "b2"]),
        ("r-other", ["c1"]),
    ]
    first = sessions[0]
    assert (first.user_id, first.started_at, first.last_at) == ("ann", T0, T0 + 70)
    assert first.agent_version == "v2"  # the newest turn's version
    assert sessions[1].agent_version == "" and sessions[2].agent_version == "v9"
    assert group_sessions([]) == []


def test_turns_of_one_publish_keep_their_order_and_users_never_share_a_session() -> None:
    same_second = [
        turn("x3", "user", "third", 0, turn_index=2, ingested_at_us=1),
        turn("x1", "user", "first", 0, turn_index=0, ingested_at_us=1),
        turn("x2", "assistant", "second", 0, turn_index=1, ingested_at_us=1),
    ]
    assert [t.content for t in one_session(*same_second).turns] == ["first", "second", "third"]
    shared_id = [turn("p1", "user", "hi", 0, user="ann"), turn("q1", "user", "hi", 1, user="bob")]
    sessions = group_sessions(shared_id)
    assert [(s.user_id, s.session_id) for s in sessions] == [("ann", "s1"), ("bob", "s1")]


# --- closing -----------------------------------------------------------------------------------------------------


def test_session_closes_after_the_quiet_period_computed_from_the_data() -> None:
    session = one_session(turn("t1", "user", "q", 0), turn("t2", "assistant", "a", 100))
    last = T0 + 100
    assert DEFAULT_QUIET_PERIOD_S == 600
    assert not is_closed(session, now=last)
    assert not is_closed(session, now=last + 599)
    assert is_closed(session, now=last + 600)
    assert is_closed(session, now=last + 10 * 86_400)  # nothing in memory: a run days later still finds it
    assert not is_closed(session, now=last + 100, quiet_period_s=120)
    assert is_closed(session, now=last + 120, quiet_period_s=120)
    # a new turn re-opens the quiet period
    longer = one_session(turn("t1", "user", "q", 0), turn("t2", "assistant", "a", 100), turn("t3", "user", "more", 500))
    assert not is_closed(longer, now=last + 600) and is_closed(longer, now=T0 + 1100)


def test_a_late_arriving_upload_keeps_an_old_session_open() -> None:
    # the conversation happened a day ago (client time) but its last part landed just now
    arrived_us = (T0 + 86_400) * 1_000_000
    session = one_session(turn("t1", "user", "q", 0), turn("t2", "assistant", "a", 10, ingested_at_us=arrived_us))
    assert session.last_arrival_at == T0 + 86_400
    assert not is_closed(session, now=T0 + 86_400 + 60)
    assert is_closed(session, now=T0 + 86_400 + 600)
    future = one_session(turn("t1", "user", "clock ahead", 3_600))  # client clock ahead: open until it has passed
    assert not is_closed(future, now=T0 + 600) and is_closed(future, now=T0 + 4_200)


# --- sampling ----------------------------------------------------------------------------------------------------


IDS = [f"session-{i:05d}" for i in range(10_000)]


@pytest.mark.parametrize("rate", [DEFAULT_SAMPLING_RATE, 0.01, 0.2, 0.5, 0.9])
def test_sampling_rate_is_met_within_one_percent(rate: float) -> None:
    share = sum(is_sampled(s, "helpfulness", rate) for s in IDS) / len(IDS)
    assert abs(share - rate) <= 0.01, share


def test_sampling_is_deterministic_nested_and_independent_per_evaluator() -> None:
    first = [s for s in IDS if is_sampled(s, "helpfulness", 0.2)]
    assert first == [s for s in IDS if is_sampled(s, "helpfulness", 0.2)]  # a re-run picks the same sessions
    # raising the rate only adds sessions: everything sampled at 5 % is still sampled at 20 %
    assert {s for s in IDS if is_sampled(s, "helpfulness", 0.05)} <= set(first)
    other = {s for s in IDS if is_sampled(s, "tone", 0.2)}
    overlap = len(other & set(first)) / len(IDS)
    assert abs(overlap - 0.04) <= 0.01  # independent evaluators: ≈ 0.2 × 0.2
    # pinned values: the hash must not change between releases (it would re-sample history)
    pinned = [False, True, False, True, False, True, True, True]
    assert [is_sampled(f"s{i}", "helpfulness", 0.5) for i in range(8)] == pinned


def test_sampling_edge_rates() -> None:
    assert not any(is_sampled(s, "helpfulness", 0) for s in IDS)
    assert all(is_sampled(s, "helpfulness", 1) for s in IDS)
    assert all(is_sampled(s, "helpfulness", 1.0) for s in IDS[:100])
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="sampling rate"):
            is_sampled("s", "helpfulness", bad)


# --- counts ------------------------------------------------------------------------------------------------------


def test_corrections_and_user_turns() -> None:
    session = one_session(
        turn("t1", "user", "Don't bother with a greeting, deploy billing.", 0),  # marker, but nothing to correct yet
        turn("t2", "assistant", "Deploying billing to us-east-1.", 1),
        turn("t3", "user", "No, use us-west-2 instead.", 2),  # correction 1
        turn("t4", "tool", "deploy ok", 3),
        turn("t5", "assistant", "Deploying to us-east-1 again.", 4),
        turn("t6", "user", "Wrong region again: never us-east-1.", 5),  # correction 2
        turn("t7", "assistant", "Deployed to us-west-2.", 6),
        turn("t8", "user", "No problem, thanks!", 7),  # politeness, not a correction
        turn("t9", "system", "session closed", 8),
    )
    assert corrections_in(session) == 2
    assert user_turns_to_resolution(session) == 4  # user turns only: tool/system/assistant excluded
    assert corrections_in(one_session(turn("t1", "user", "Thanks!", 0))) == 0
    assert shadow_turns(session) == []
    with_shadow = one_session(
        turn("t1", "user", "q", 0),
        turn("t2", "assistant", "a", 1, shadow_content="b"),
        turn("t3", "assistant", "c", 2, shadow_content="  "),
    )
    assert [t.turn_id for t in shadow_turns(with_shadow)] == ["t2"]
