"""One learning pass over a window against the lake: read the window's turns and its users' state, learn
(learning/learn.py), commit the window's tables. Dagster-free: the learning assets (assets/learning.py, and the
fanned-out assets/learning_shards.py) are thin shells over these functions, so one window learned whole and the
same window learned as shards run the same code.

A pass may cover only some of the window's users (`users`, a shard): users are independent in `learn()`, so the
shards' outputs merged in the window's user order (`merge_outputs`) are exactly the output of one pass over every
user, and the commit is the same (`commit_staged`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import pyarrow as pa

from reflexio_pipelines.lake import staging
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.records import live_turns, user_states
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.learning.batch import LearnOutput, LearnStats
from reflexio_pipelines.learning.carry import ITEM_TABLES, WINDOW_TABLES, window_rows
from reflexio_pipelines.learning.config import ExtractionConfig
from reflexio_pipelines.learning.embedding import Embedder
from reflexio_pipelines.learning.extract import Extractor
from reflexio_pipelines.learning.failures import blocked_users, merge_failures
from reflexio_pipelines.learning.learn import JudgeFactory, learn, users_with_new_turns
from reflexio_pipelines.learning.windows import Pace, group_by_user

Rows = list[dict]


@dataclass(frozen=True)
class Learner:
    """What learns: the extractor, embedder and dedup judge of the run's resources, and how many users at once."""

    extractor: Extractor
    embedder: Embedder
    judge_factory: JudgeFactory
    config: ExtractionConfig
    concurrency: int = 1


def previous_rows(store: Lake, window: str, rebuild: bool) -> dict[str, Rows]:
    """This window's rows from earlier runs (none for a rebuild); rerun rows are the operation's, not the window's."""
    if rebuild:
        return {}
    rows = {name: store.read_table(name, window).to_pylist() for name in WINDOW_TABLES}
    for name in ITEM_TABLES:
        rows[name] = [r for r in rows[name] if r["operation_id"] is None]
    return rows


def window_stamp(previous: dict[str, Rows]) -> str:
    """A digest of what earlier runs committed for the window: it changes with every commit that moved a bookmark
    or added an item, so a fanned-out run can tell at its commit whether another run of the window committed while
    its shards were learning."""
    marks = sorted(
        (b["user_id"], b["extractor"], b["last_turn_id"] or "", b["run_id"] or "", tuple(b["processed_turn_ids"] or ()))
        for b in previous.get("extraction_bookmarks", [])
    )
    counts = [len(previous.get(name, [])) for name in WINDOW_TABLES]
    return hashlib.sha256(json.dumps([marks, counts]).encode()).hexdigest()


def window_users(store: Lake, window: str) -> list[str]:
    """The window's users in the order one pass learns them (learn.py `group_by_user` over the window's turns)."""
    return list(group_by_user(live_turns(store, window)))


def shard_users(users: Sequence[str], count: int) -> list[int]:
    """The shard (0..count-1) of each of `users`: the users in the order of a hash of their id, cut into `count`
    runs of equal size (±1). Equal, not hash buckets, because the largest shard sets a fanned-out run's time: 600
    users in 4 hash buckets held 128-164 (a run 1.1x its share), balanced 150 each."""
    order = sorted(range(len(users)), key=lambda i: hashlib.blake2b(users[i].encode(), digest_size=8).digest())
    shards = [0] * len(users)
    for rank, i in enumerate(order):
        shards[i] = rank * count // len(users)
    return shards


def learn_users(
    store: Lake,
    window: str,
    learner: Learner,
    pace: Pace,
    *,
    run_id: str,
    previous: dict[str, Rows],
    users: Collection[str] | None = None,
) -> LearnOutput:
    """Learn the window's new turns of `users` (None: every user of the window) from their state in the lake.

    `previous` is the window's rows from earlier runs (`previous_rows`): the state a run continues from."""
    turns = live_turns(store, window)
    bookmarks = previous.get("extraction_bookmarks")
    wanted = users_with_new_turns(turns, bookmarks, learner.config.groups())
    if users is not None:
        wanted &= set(users)
    turns = [t for t in turns if t.user_id in wanted]
    ids = sorted(wanted)
    if bookmarks is not None:
        bookmarks = [b for b in bookmarks if b["user_id"] in wanted]
    states = user_states(store, set(ids), window, bookmarks=bookmarks)
    # a user with an unlearned earlier window waits behind it (see learning/failures.py)
    earlier = [("user_id", "in", ids), ("window", "<", window)]
    blocked = blocked_users(store.read_table("extraction_failures", filters=earlier).to_pylist()) if ids else {}
    return learn(
        turns,
        states,
        learner.extractor,
        learner.embedder,
        learner.judge_factory,
        window=window,
        run_id=run_id,
        config=learner.config,
        on_failure="record",
        blocked=blocked,
        pace=pace,
        concurrency=learner.concurrency,
    )


def merge_outputs(outputs: Sequence[LearnOutput], user_order: Sequence[str]) -> LearnOutput:
    """The shards' outputs as one pass over every user writes them: each table's rows (contiguous per user in a
    shard's output) in the window's user order; blocked users' failures first, as `learn()` lists them."""
    position = {user: i for i, user in enumerate(user_order)}

    def ordered(rows: list) -> list:
        return sorted(rows, key=lambda r: position.get(r["user_id"], len(position)))  # stable within a user

    stats = LearnStats(users=sum(o.stats.users for o in outputs))
    for output in outputs:
        stats.add(output.stats)
    failures = [f for o in outputs for f in o.failures]
    failures.sort(key=lambda f: (f.stage != "blocked", position.get(f.user_id, len(position))))
    return LearnOutput(
        profiles=ordered([r for o in outputs for r in o.profiles]),
        playbooks=ordered([r for o in outputs for r in o.playbooks]),
        change_log=ordered([r for o in outputs for r in o.change_log]),
        bookmarks=ordered([r for o in outputs for r in o.bookmarks]),
        stats=stats,
        failures=failures,
        learned_users={u for o in outputs for u in o.learned_users},
    )


@dataclass
class Committed:
    """What a commit wrote: the window's tables as Arrow and the Delta version of each."""

    tables: dict[str, pa.Table]
    versions: dict[str, int]


def commit_window(
    store: Lake,
    window: str,
    run_id: str,
    previous: dict[str, Rows],
    output: LearnOutput,
    *,
    clock: Callable[[], float] = time.time,
) -> Committed:
    """Replace the window's tables with `previous` carried forward plus `output`, record its failures, and only
    then mark the window learned (a run that dies before the last line leaves the window pending, so the sensor
    runs it again). The caller holds the window's lock."""
    tables = window_rows(previous, output)
    arrow = {name: pa.Table.from_pylist(rows, schema=TABLES[name]) for name, rows in tables.items()}
    failures = merge_failures(
        store.read_table("extraction_failures", window).to_pylist(),
        output.failures,
        output.learned_users,
        window=window,
        run_id=run_id,
        at=int(clock()),
    )
    versions = {name: store.replace_window(name, window, table) for name, table in arrow.items()}
    store.replace_window("extraction_failures", window, pa.Table.from_pylist(failures, TABLES["extraction_failures"]))
    store.mark_learned(window)
    return Committed(arrow, versions)


def commit_staged(
    store: Lake,
    window: str,
    run_id: str,
    shards: Sequence[int],
    *,
    learner_of: Callable[[], Learner],
    pace_of: Callable[[], Pace],
    rebuild: bool,
    warn: Callable[[str], None],
) -> tuple[LearnOutput, Committed]:
    """Commit a fanned-out run: the staged outputs of its `shards` merged in the window's user order. If another run
    committed the window while the shards learned (the plan's stamp moved) or the staging is gone (an erasure), the
    window is learned again from what is committed now instead, by `learner_of()` (only then made: a merge needs no
    model), after `warn`; `pace_of()` paces it when the plan is gone too, and `rebuild` then says whether to start
    from scratch. A lost race costs the loser's LLM calls, never a duplicated or lost item. The caller holds the
    window's lock."""
    plan = staging.read_plan(store, window, run_id)
    previous = previous_rows(store, window, plan.rebuild if plan else rebuild)
    outputs = [staging.read_shard(store, window, run_id, s) for s in sorted(shards)] if plan else []
    if plan is not None and window_stamp(previous) == plan.stamp and all(o is not None for o in outputs):
        output = merge_outputs(outputs, plan.users)
    else:
        warn(
            f"window {window} changed while its shards learned (another run committed it, "
            "or its staging was erased): learning it again from what is committed now"
        )
        pace = plan.pace if plan else pace_of()
        output = learn_users(store, window, learner_of(), pace, run_id=run_id, previous=previous)
    return output, commit_window(store, window, run_id, previous, output)


#: Extra passes a run makes over held-back turns that fell due while it learned (sensor runs under steady traffic:
#: a session that went quiet mid-run is learned by this run, not by the next one, which compacts and learns only
#: after this run's commit). One, not more: every pass delays the index build that
#: makes the earlier passes' items searchable, and the next run already starts while this one indexes. Measured
#: under steady publishing (50 turns/s, 1 s LLM, 150 s): with 3 every learning step made 4 passes of ~3 s, and
#: publish → searchable p95 was 58.9-61.4 s. Still one now that the next run waits for the lock while this one learns
#: (sensors.py): with none, p95 was 56.1 s against 52.6-53.0 s (p50 48.9 against 44.6-45.2 s).
CATCH_UP_PASSES = 1


def learn_and_commit(
    store: Lake,
    window: str,
    learner: Learner,
    pace_of: Callable[[], Pace],
    *,
    run_id: str,
    rebuild: bool = False,
    catch_up: int = CATCH_UP_PASSES,
) -> tuple[LearnOutput, Committed]:
    """Learn the window and commit it; then, up to `catch_up` times, learn and commit again if held-back turns fell
    due meanwhile (`pace_of()` is the run's pace with its clock read now). The caller holds the window's lock.

    Returns every pass's failures and counts (users counted once) and the last commit. A pass with failures ends
    it: the failed batches wait for the next run, as they always do."""
    total: LearnOutput | None = None
    committed: Committed | None = None
    for attempt in range(1 + max(0, catch_up)):
        previous = previous_rows(store, window, rebuild and attempt == 0)
        output = learn_users(store, window, learner, pace_of(), run_id=run_id, previous=previous)
        committed = commit_window(store, window, run_id, previous, output)
        total = output if total is None else _with_pass(total, output)
        failed = [f for f in output.failures if f.stage != "blocked"]
        if failed or not fell_due(committed.tables["extraction_bookmarks"].to_pylist(), pace_of().now_us):
            break
    assert total is not None and committed is not None
    return total, committed


def fell_due(bookmarks: Rows, now_us: int) -> bool:
    """Whether any user's held-back turns are due at `now_us` (their session has been quiet long enough)."""
    return any(b["held_turns"] and b["due_at_us"] is not None and b["due_at_us"] <= now_us for b in bookmarks)


def _with_pass(total: LearnOutput, later: LearnOutput) -> LearnOutput:
    stats = LearnStats(users=total.stats.users, passes=total.stats.passes + later.stats.passes)
    stats.add(total.stats)
    stats.add(later.stats)
    blocked = {f.user_id for f in total.failures if f.stage == "blocked"}
    failures = [*total.failures, *(f for f in later.failures if not (f.stage == "blocked" and f.user_id in blocked))]
    return LearnOutput(
        [*total.profiles, *later.profiles],
        [*total.playbooks, *later.playbooks],
        [*total.change_log, *later.change_log],
        [*total.bookmarks, *later.bookmarks],
        stats,
        failures,
        total.learned_users | later.learned_users,
    )
