"""From one partition's turns to rows of learned items, deduplicated against what each user already has.

For every user and extractor group (extractors sharing window size, stride and source filter, see
learning/config.py): keep the group's sources' turns, plan windows over the user's stream (processed history, then
the new turns), extract each window once for the whole group, merge what overlapping windows found twice; then
deduplicate the user's new items (from every group) against the user's current items (a judge groups duplicates
and contradictions; the newer statement supersedes the older, nothing is deleted).

Ids are derived from (user, normalised content), so re-running a partition yields the same ids, and the same fact
or rule observed again collapses into the existing item. Every row records where it came from: source turns,
extraction window, partition window, run id, extractor, prompt version and model.

Forget requests ("forget that I live in Paris") come from the extractor as directives; the user's profiles they
match (learning/forget.py, a heuristic) are superseded by a *tombstone* row with status `forgotten`, which is never
served: the forgotten profile leaves search at the next index build, and because supersession is by id, a later
re-extraction of the same fact from older turns (a re-materialised window, a rerun) stays superseded.

A user's batch is all-or-nothing: with `on_failure="record"` a window that still fails after the extractor's
retries, or a dedup judge that gets no usable answer, costs the user its whole batch in this run — no item, change
or bookmark of that user is written (the bookmark stays before the failed window) and a `Failure` is returned for
the caller to record; re-running the partition learns the user's batch once, from the start. With
`on_failure="raise"` (rerun operations) the failure propagates instead.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import numpy as np

from reflexio_pipelines.learning.batch import Failure, LearnOutput, LearnStats, UserState
from reflexio_pipelines.learning.config import DEFAULT_CONFIG, ExtractionConfig
from reflexio_pipelines.learning.dedup import Candidate, DedupJudge, Resolution, deduplicate, profile_slot
from reflexio_pipelines.learning.embedding import Embedder, MemoEmbedder
from reflexio_pipelines.learning.extract import Extractor
from reflexio_pipelines.learning.extractor_groups import ExtractorGroup
from reflexio_pipelines.learning.forget import forget_requested
from reflexio_pipelines.learning.learned_rows import (
    bookmark,
    change_rows,
    content_key,
    content_part,
    merge,
    playbook_id,
    playbook_rows,
    playbook_text,
    profile_id,
    profile_rows,
    row_time,
)
from reflexio_pipelines.learning.llm_extract import ExtractionFailed, GatedExtractionResult
from reflexio_pipelines.learning.llm_failures import FailureSummary
from reflexio_pipelines.learning.llm_ledger import about_user
from reflexio_pipelines.learning.llm_stage import StageFailed
from reflexio_pipelines.learning.stated_changes import (
    replace_rules,
    replaces_something,
    supersede_stated_changes,
    withdraw_playbooks,
)
from reflexio_pipelines.learning.types import ExtractionResult, ForgetDirective, Turn, Window
from reflexio_pipelines.learning.windows import FLUSH_ALL, Pace, group_by_user, plan_windows, ready_turns, turn_sort_key

#: Builds the dedup judge for one entity ("profile" or "user_playbook"), given the vectors already computed.
JudgeFactory = Callable[[str, dict[str, np.ndarray]], DedupJudge]
#: Users whose deduplication texts are embedded in one batch (see `learn`): big enough that a batch is worth a call
#: (a remote embedder gets ceil(users / 32) calls), small enough that the last group's batch after the last
#: extraction is short.
EMBED_GROUP = 32


class DedupFailed(StageFailed):
    """The dedup judge got no usable answer after its retries (raised instead of keeping every NEW item)."""


class _UserFailed(Exception):
    """Internal: ends one user's batch in record mode."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.stage)
        self.failure = failure


def learn(
    turns: list[Turn],
    states: dict[str, UserState],
    extractor: Extractor,
    embedder: Embedder,
    judge_factory: JudgeFactory,
    *,
    window: str,
    run_id: str,
    config: ExtractionConfig = DEFAULT_CONFIG,
    status: str = "current",
    on_failure: Literal["raise", "record"] = "raise",
    blocked: dict[str, str] | None = None,
    pace: Pace = FLUSH_ALL,
    concurrency: int = 1,
) -> LearnOutput:
    """Learn from one partition's `turns`; `states` holds each user's history and current items; `config` says
    which extractors run (one extraction call per window and extractor group) and how windows are cut.

    `status="pending"` is a rerun: rows are written as pending (not served) until an upgrade promotes them.
    `on_failure="record"` turns a failed user batch into a `Failure` in the output (nothing of that user is
    written) instead of raising. `blocked` maps users that must wait (an earlier window of theirs is unresolved)
    to the reason; they are not extracted and come back as `blocked` failures. Turns a user's state lists as
    already processed by an earlier run of this partition (`UserState.processed`) are context, not new; `pace`
    says which of the new turns go through now (learning/windows.py `ready_turns`; default: all of them).

    Users are independent, so up to `concurrency` of them are extracted (and judged) at once, in threads: the LLM
    calls wait on the network, and the endpoint's throttle bounds what is in flight. Embeddings for the users'
    deduplication are computed in batches of `EMBED_GROUP` users, in user order, as their extractions come back.
    The output is the same for any `concurrency`: rows are assembled in user order.
    """
    blocked = blocked or {}
    groups = config.groups()
    by_user = group_by_user(turns)
    memo = MemoEmbedder(embedder)
    out = LearnOutput([], [], [], [], LearnStats(users=len(by_user)))
    todo = {u: t for u, t in by_user.items() if u not in blocked}
    for user_id in (u for u in by_user if u in blocked):
        user_turns = by_user[user_id]
        out.failures.append(
            Failure(
                user_id,
                "*",
                "blocked",
                FailureSummary("Blocked", blocked[user_id]),
                first_turn_id=user_turns[0].turn_id,
                last_turn_id=user_turns[-1].turn_id,
            )
        )

    def extract_one(user_id: str) -> _Extracted:
        return _extract_user(
            user_id,
            todo[user_id],
            states.get(user_id, UserState()),
            groups,
            extractor,
            pace,
            window=window,
            run_id=run_id,
        )

    # Deduplication embeds every user's texts, in batches of EMBED_GROUP users in user order, primed on this thread
    # as each group's extractions come back, while later users' calls are still in flight: under steady publishing
    # one batch after the last extraction held the main thread 1.5-2.4 s per pass (py-spy). The batches are the
    # same for any concurrency and any finishing order, so every text gets the same vector.
    extracted = run_per_user(
        extract_one,
        list(todo),
        concurrency,
        then=lambda group: memo.prime(_texts_to_embed(group, states)),
        group_size=EMBED_GROUP,
    )

    def resolve_one(user_id: str) -> _Extracted:
        return _resolve_user(
            extracted[user_id],
            states.get(user_id, UserState()),
            memo,
            judge_factory,
            window=window,
            run_id=run_id,
            status=status,
        )

    resolved = run_per_user(resolve_one, [u for u, e in extracted.items() if e.failure is None], concurrency)
    for user_id in todo:  # user order: the output does not depend on which thread finished first
        user = resolved.get(user_id, extracted[user_id])
        out.stats.add(user.stats)
        if user.failure is not None:
            if on_failure == "raise":
                raise user.failure.__cause__ or user.failure from None
            out.failures.append(user.failure.failure)
            continue
        out.profiles.extend(user.rows["profiles"])
        out.playbooks.extend(user.rows["playbooks"])
        out.change_log.extend(user.rows["change_log"])
        out.bookmarks.extend(user.rows["bookmarks"])
        out.learned_users.add(user_id)
    return out


T = TypeVar("T")


def run_per_user(
    work: Callable[[str], T],
    user_ids: list[str],
    concurrency: int,
    *,
    then: Callable[[list[T]], None] | None = None,
    group_size: int = 0,
) -> dict[str, T]:
    """`work(user_id)` for every user, up to `concurrency` at once; each thread gets a copy of the caller's context
    (the LLM call ledger) with the user set as the subject of its calls. With `then`, the results of each group of
    `group_size` users, in user order, are passed to it on the caller's thread as soon as the whole group is done
    (while later users' work goes on), groups in order."""

    def one(user_id: str) -> T:
        with about_user(user_id):
            return work(user_id)

    groups = [user_ids[i : i + group_size] for i in range(0, len(user_ids), group_size)] if then else []
    # without `then` there are no groups, so the no-op is never called: it only makes `report` non-optional
    report: Callable[[list[T]], None] = then if then is not None else (lambda results: None)
    if concurrency <= 1 or len(user_ids) <= 1:
        done = {u: one(u) for u in user_ids}
        for group in groups:
            report([done[u] for u in group])
        return done
    with ThreadPoolExecutor(max_workers=min(concurrency, len(user_ids)), thread_name_prefix="learn") as pool:
        futures = {u: pool.submit(contextvars.copy_context().run, one, u) for u in user_ids}
        for group in groups:
            report([futures[u].result() for u in group])
        return {u: f.result() for u, f in futures.items()}


@dataclass
class _Extracted:
    """One user's batch between the phases: what the extractor found, then (after `_resolve_user`) the rows."""

    user_id: str
    user_turns: list[Turn]
    stats: LearnStats
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)
    playbooks: dict[int, dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[ForgetDirective, Turn, Window, ExtractionResult, ExtractorGroup]] = field(default_factory=list)
    #: per group: the turns extracted now, those held back, the windows, when the held-back turns fall due (µs)
    planned: list[tuple[ExtractorGroup, list[Turn], list[Turn], list[Window], int | None]] = field(default_factory=list)
    failure: _UserFailed | None = None
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def _extract_user(
    user_id: str,
    user_turns: list[Turn],
    state: UserState,
    groups: list[ExtractorGroup],
    extractor: Extractor,
    pace: Pace,
    *,
    window: str,
    run_id: str,
) -> _Extracted:
    """Phase 1 of a user's batch: extract every window of the turns that go through now (per extractor group)."""
    found = _Extracted(user_id, user_turns, LearnStats())
    stats = found.stats
    for group in groups:
        done = state.processed.get(group.name, frozenset())
        accepted = [t for t in user_turns if group.accepts(t)]
        ready, held = ready_turns([t for t in accepted if t.turn_id not in done], group.batch_size, pace)
        if not ready and not held:
            continue  # nothing new for this group's sources: its bookmark stays where it was
        history = [t for t in state.history if group.accepts(t)] + [t for t in accepted if t.turn_id in done]
        windows = plan_windows(history, ready, group.batch_size, group.batch_interval, pace.quiet_us)
        stats.turns_extracted += len(ready)
        stats.turns_held += len(held)
        due = held[-1].ingested_at_us + pace.quiet_us if held else None
        found.planned.append((group, ready, held, windows, due))
        fresh = {t.turn_id for t in ready}
        for win in windows:
            try:
                result = extractor.extract(win, group)
            except ExtractionFailed as exc:
                stats.windows += 1
                stats.llm_calls += exc.calls
                stats.prompt_tokens += exc.prompt_tokens
                stats.completion_tokens += exc.completion_tokens
                failure = Failure(
                    user_id,
                    group.name,
                    "extract",
                    exc.summary,
                    exc.attempts,
                    win.window_id,
                    win.turns[0].turn_id,
                    win.turns[-1].turn_id,
                )
                found.failure = _UserFailed(failure)
                found.failure.__cause__ = exc
                return found
            _count(stats, result)
            by_id = {t.turn_id: t for t in win.turns}
            # Context turns were learned from when they were new: an item resting only on them is a repeat.
            for row in profile_rows(win, result, group, by_id, window, run_id):
                if fresh & set(row["source_turn_ids"]):
                    merge(found.profiles, row["profile_id"], row)
            for row in playbook_rows(win, result, group, by_id, window, run_id):
                if fresh & set(row["source_turn_ids"]):
                    merge(found.playbooks, row["user_playbook_id"], row)
            for directive in result.forget:  # a request seen only as context was handled when it was new
                asked = [by_id[i] for i in directive.source_turn_ids if i in by_id and i in fresh]
                if asked:
                    found.requests.append((directive, max(asked, key=turn_sort_key), win, result, group))
    return found


def users_with_new_turns(
    turns: Iterable[Turn], bookmarks: Iterable[dict] | None, groups: list[ExtractorGroup]
) -> set[str]:
    """The users with a turn some extractor group accepts and has not processed yet (per this window's
    `extraction_bookmarks` rows): every other user of the window has nothing to learn in this run. Under steady
    publishing an open window held ~2,250 users while ~600 had new turns; going through all of them cost a run
    seconds of state reads and per-user work before the users with due turns got their LLM calls."""
    processed = {(b["user_id"], b["extractor"]): set(b["processed_turn_ids"] or ()) for b in bookmarks or ()}
    return {
        t.user_id
        for t in turns
        if any(g.accepts(t) and t.turn_id not in processed.get((t.user_id, g.name), ()) for g in groups)
    }


def _texts_to_embed(batches: Iterable[_Extracted], states: dict[str, UserState]) -> list[str]:
    """Every text the resolve phase will embed (new and current items, forget targets), for one batched call."""
    texts: list[str] = []
    for found in batches:
        if found.failure is not None or not (found.profiles or found.playbooks or found.requests):
            continue
        state = states.get(found.user_id, UserState())
        texts += [d.target for d, *_ in found.requests]
        texts += [r["content"] for r in [*found.profiles.values(), *state.profiles]]
        texts += [playbook_text(r) for r in [*found.playbooks.values(), *state.playbooks]]
    return texts


def _resolve_user(
    found: _Extracted,
    state: UserState,
    embedder: Embedder,
    judge_factory: JudgeFactory,
    *,
    window: str,
    run_id: str,
    status: str,
) -> _Extracted:
    """Phase 2 of a user's batch: apply forget requests, deduplicate against the user's current items, and build
    the rows (set on `found.rows` only once everything succeeded; a failure leaves only its cost in `found.stats`)."""
    stats, user_id, user_turns = found.stats, found.user_id, found.user_turns
    profiles, playbooks = dict(found.profiles), dict(found.playbooks)
    order = {t.turn_id: turn_sort_key(t) for t in [*state.history, *user_turns]}
    tombstones, existing_profiles = forget_requested(
        found.requests, profiles, state.profiles, order, embedder, stats, window, run_id
    )
    withdrawn, existing_playbooks = withdraw_playbooks(found.requests, state.playbooks, embedder, window, run_id)
    try:
        kept_profiles = _dedup(
            "profile",
            list(profiles.values()),
            existing_profiles,
            embedder,
            judge_factory,
            stats,
            id_column="profile_id",
            order=order,
            text_of=lambda r: r["content"],
            slot_of=lambda r: profile_slot(r["content"]),
            key_of=lambda r: r["content"],
            rewrite=lambda r, text: dict(r, content=text, profile_id=profile_id(r["user_id"], text)),
        )
        kept_playbooks = _dedup(
            "user_playbook",
            list(playbooks.values()),
            existing_playbooks,
            embedder,
            judge_factory,
            stats,
            id_column="user_playbook_id",
            order=order,
            text_of=playbook_text,
            slot_of=lambda r: content_key(r["trigger"] or "") or None,
            key_of=lambda r: r["content"],
            rewrite=lambda r, text: dict(
                r, content=text, user_playbook_id=playbook_id(r["user_id"], r["trigger"], text)
            ),
        )
    except DedupFailed as exc:
        failure = Failure(
            user_id, "*", "dedup", exc.summary, exc.calls, None, user_turns[0].turn_id, user_turns[-1].turn_id
        )
        found.failure = _UserFailed(failure)
        found.failure.__cause__ = exc
        return found
    kept_profiles = [dict(r, status=status) for r in kept_profiles]
    kept_playbooks = [dict(r, status=status) for r in kept_playbooks]
    retired, retiring = replace_rules(kept_profiles, existing_playbooks, embedder)
    withdrawn += retired
    kept_profiles = [r for r in kept_profiles if replaces_something(r, retiring)]
    found.rows = {
        "profiles": kept_profiles + tombstones,
        "playbooks": kept_playbooks + withdrawn,
        "change_log": change_rows("profile", kept_profiles + tombstones, "profile_id", window, run_id)
        + change_rows("user_playbook", kept_playbooks + withdrawn, "user_playbook_id", window, run_id),
        "bookmarks": [
            bookmark(
                state.bookmarks.get(group.name),
                user_id,
                group.name,
                ready,
                held,
                due,
                windows,
                _items_of(group, kept_profiles, kept_playbooks),
                window,
                run_id,
            )
            for group, ready, held, windows, due in found.planned
        ],
    }
    return found


def _items_of(group: ExtractorGroup, profiles: list[dict[str, Any]], playbooks: list[dict[str, Any]]) -> int:
    """Kept items produced by one of the group's extractors (all kept items when there is one group)."""
    names = {d.name for d in group.profile_extractors + group.playbook_extractors}
    profile_items = sum(1 for r in profiles if names & set(r["extractor_names"]))
    playbook_items = sum(1 for r in playbooks if r["playbook_name"] in names)
    return profile_items + playbook_items


def _count(stats: LearnStats, result: ExtractionResult) -> None:
    stats.windows += 1
    stats.llm_calls += result.llm_calls
    stats.prompt_tokens += result.prompt_tokens
    stats.completion_tokens += result.completion_tokens
    stats.extractors.add(result.extractor)
    if isinstance(result, GatedExtractionResult):
        stats.gate_calls += result.gate_calls
        stats.gate_skipped += result.gate_skipped


def _stated_at(row: dict[str, Any], order: dict[str, tuple]) -> tuple:
    """When a new row was stated: the sort key of its latest source turn (its timestamp when none is known)."""
    return max((order[t] for t in row["source_turn_ids"] if t in order), default=(row_time(row),))


def _dedup(
    entity: str,
    new_rows: list[dict[str, Any]],
    existing_rows: list[dict[str, Any]],
    embedder: Embedder,
    judge_factory: JudgeFactory,
    stats: LearnStats,
    *,
    id_column: str,
    order: dict[str, tuple],
    text_of: Callable[[dict[str, Any]], str],
    slot_of: Callable[[dict[str, Any]], str | None],
    key_of: Callable[[dict[str, Any]], str],
    rewrite: Callable[[dict[str, Any], str], dict[str, Any]],
) -> list[dict[str, Any]]:
    """Resolve new rows against the user's current rows; returns the rows to write (with `supersedes` set).

    New rows go to the judge in the order they were stated (their last source turn in `order`, turn_id ->
    turn_sort_key), so when two of them conflict the later statement wins even when both came in one publish and
    share a timestamp (by row id, an arbitrary hash, a correction could lose to the request it corrected)."""
    if not new_rows:
        return []
    new_rows = sorted(new_rows, key=lambda r: (_stated_at(r, order), str(r[id_column])))
    texts = [text_of(r) for r in new_rows] + [text_of(r) for r in existing_rows]
    vectors = embedder.embed(texts)
    new_vectors, existing_vectors = vectors[: len(new_rows)], vectors[len(new_rows) :]
    new = [Candidate(f"new:{i}", text_of(r), row_time(r), slot_of(r), key_of(r)) for i, r in enumerate(new_rows)]
    existing = [Candidate(str(r[id_column]), text_of(r), row_time(r), slot_of(r), key_of(r)) for r in existing_rows]
    by_candidate = {c.item_id: v for c, v in zip(new + existing, vectors)}
    judge = judge_factory(entity, by_candidate)
    resolution: Resolution = deduplicate(new, existing, new_vectors, existing_vectors, judge)
    stats.dedup_calls += resolution.judge_calls
    stats.llm_calls += resolution.judge_calls
    stats.prompt_tokens += resolution.prompt_tokens
    stats.completion_tokens += resolution.completion_tokens
    # An LLM judge that got no usable answer falls back to "no groups"; written as is, that would keep duplicates
    # and contradictions current. The batch fails instead and is retried (the rule judge never fails).
    failure: FailureSummary | None = getattr(judge, "last_failure", None)
    if failure is not None:
        message = f"{entity} dedup judge failed after {resolution.judge_calls} call(s): {failure}"
        raise DedupFailed(message, stage="dedup", calls=resolution.judge_calls, summary=failure)
    stats.duplicates_dropped += len(new_rows) - len(resolution.keep)
    if getattr(judge, "follows_change_words", False):
        supersede_stated_changes(resolution, new_rows, existing_rows, new_vectors, existing_vectors, text_of, id_column)
    id_type = type(new_rows[0][id_column])
    kept = []
    for i in sorted(resolution.keep):
        row = new_rows[i]
        text = resolution.keep[i]
        if text != text_of(row):
            row = rewrite(row, text if entity == "profile" else content_part(row, text))
        supersedes = [id_type(x) for x in resolution.supersedes.get(i, []) if id_type(x) != row[id_column]]
        stats.superseded += len(supersedes)
        kept.append(dict(row, supersedes=supersedes))
    return kept
