"""Which users a learning pass works on and in what groups (learning/learn.py): only users with turns not processed
yet; deduplication texts embedded group by group (`run_per_user`'s ordered callbacks) while later users are still
being extracted, the groups the same whatever the concurrency and whichever user finishes first, so every text gets
the same vector in every run."""

from __future__ import annotations

import random
import threading
import time

import pytest

from reflexio_pipelines.learning.extractor_groups import ExtractorGroup
from reflexio_pipelines.learning.learn import run_per_user, users_with_new_turns
from reflexio_pipelines.learning.types import Turn


@pytest.mark.parametrize("concurrency", [1, 8])
def test_groups_arrive_in_user_order_whatever_finishes_first(concurrency: int) -> None:
    users = [f"user-{i:02d}" for i in range(21)]
    delays = {u: random.Random(u).uniform(0.0, 0.02) for u in users}
    seen: list[list[str]] = []
    finished: list[str] = []
    lock = threading.Lock()

    def work(user: str) -> str:
        time.sleep(delays[user])  # later users often finish first
        with lock:
            finished.append(user)
        return user.upper()

    out = run_per_user(work, users, concurrency, then=lambda group: seen.append(list(group)), group_size=5)
    assert out == {u: u.upper() for u in users}
    assert seen == [[u.upper() for u in users[i : i + 5]] for i in range(0, 21, 5)]
    if concurrency > 1:
        assert finished != users  # the finishing order was not the user order, yet the groups were


def test_a_group_is_handed_over_before_the_last_users_are_done() -> None:
    users = [f"user-{i}" for i in range(6)]
    release = threading.Event()
    handed: list[int] = []

    def work(user: str) -> str:
        if user in users[3:]:  # the second group finishes only once the first has been handed over
            assert release.wait(2), "the first group was not handed over while the second was still running"
        return user

    def then(group: list[str]) -> None:
        handed.append(len(group))
        release.set()

    run_per_user(work, users, 6, then=then, group_size=3)
    assert handed == [3, 3]


def _turn(user: str, n: int, source: str = "chat") -> Turn:
    return Turn(f"{user}:{n}", n, f"{user}-req", user, "user", f"turn {n}", 1_000 + n, source=source)


def test_only_users_with_a_turn_some_group_has_not_processed_are_learned() -> None:
    chat = ExtractorGroup("default", 10, 5, None, (), ())
    email = ExtractorGroup("email", 10, 5, ("email",), (), ())
    turns = [_turn("done", 1), _turn("done", 2), _turn("new", 1), _turn("half", 1), _turn("half", 2)]
    turns += [_turn("mail", 1, source="email")]
    bookmarks = [
        {"user_id": "done", "extractor": "default", "processed_turn_ids": ["done:1", "done:2"]},
        {"user_id": "half", "extractor": "default", "processed_turn_ids": ["half:1"]},
        {"user_id": "mail", "extractor": "default", "processed_turn_ids": ["mail:1"]},
    ]
    assert users_with_new_turns(turns, bookmarks, [chat]) == {"new", "half"}
    # the email group has not read mail's turn yet, whatever the default group did
    assert users_with_new_turns(turns, bookmarks, [chat, email]) == {"new", "half", "mail"}
    assert users_with_new_turns(turns, None, [chat]) == {"done", "new", "half", "mail"}  # a window's first run
