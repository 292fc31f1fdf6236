"""The learning multi-asset: one extraction pass per user window, then dedup against what each user already has.

`user_profiles` and `user_playbooks` are one multi-asset because a single extractor call per window returns both —
half the LLM calls of extracting them separately, which is where the batch design saves cost. The same step
writes the `change_log` (every addition and supersession) and the `extraction_bookmarks` (where each user's
extraction stands), so all four stay consistent for a window.

A user batch that fails (an LLM window still failing after its retries, a dedup judge without a usable answer) is
not written at all and is recorded in the `extraction_failures` table and in the materialisation metadata
(`failed_windows`, `failed_window_ids`); the run itself succeeds with everyone else's items. The window is
retried by its next run (`pending.windows_to_retry` lists them; the sensor and `launch()` request them), which marks the rows resolved; meanwhile
later windows of that user wait (learning/failures.py). All tables of a window are replaced together under the
window's lock, so runs racing on one window commit one after the other with the same content.

Each turn is extracted once, however often the window runs: a run continues from the bookmarks earlier runs of the
window left (their items are state, written back unchanged, learning/carry.py) and extracts only the turns after
them. Which of those go through now is the run config's `flush` (learning/windows.py `ready_turns`): `all` for a
deliberate run (the default: `materialize`, the UI, a backfill), `due` for the sensor's runs, which hold back an
incomplete window of a session that is still active. `rebuild` re-extracts the window from scratch instead.
"""

import time
from typing import Literal

import dagster as dg
import pyarrow as pa

from reflexio_pipelines.assets.metadata import preview
from reflexio_pipelines.lake.llm_calls import ledger_written
from reflexio_pipelines.lake.reads import counting_reads
from reflexio_pipelines.lake.records import live_turns, user_states
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.learning.carry import ITEM_TABLES, WINDOW_TABLES, window_rows
from reflexio_pipelines.learning.failures import blocked_users, merge_failures
from reflexio_pipelines.learning.learn import learn
from reflexio_pipelines.learning.windows import Pace
from reflexio_pipelines.partitions import GRANULARITY, PARTITIONS, window_end, window_of_key
from reflexio_pipelines.resources import EmbedderResource, ExtractorResource, LakeResource

_OUTPUTS = {
    "user_profiles": ("Per-user facts, deduplicated; a newer statement supersedes an older one (kept for audit).",
                      ["user_id", "content", "profile_time_to_live", "supersedes"]),
    "user_playbooks": ("Per-user behavioural rules (corrections, tool failures, expert answers), deduplicated.",
                       ["user_id", "kind", "trigger", "content", "supersedes"]),
    "change_log": ("Every addition and supersession of a profile or user playbook.",
                   ["entity", "change", "item_id", "superseded_by", "content"]),
    "extraction_bookmarks": ("Per user: the last turn processed, how many new turns and windows this window had.",
                             ["user_id", "last_turn_id", "new_turns", "extraction_windows", "items_extracted"]),
}  # fmt: skip


def _failed_batch(failure, previews: bool) -> str:
    # A failure without an extraction window is one user's batch; its user id is user data (see metadata_previews).
    return f"{failure.user_id}:{failure.stage}" if previews else failure.stage


class LearningRunConfig(dg.Config):
    """How much of the window's new turns a run extracts (see the module docstring)."""

    flush: Literal["all", "due"] = "all"
    #: users whose held-back turns go through now whatever `flush` says (`wait_for_response`)
    flush_users: list[str] = []
    #: re-extract every turn of the window, ignoring what earlier runs of it extracted
    rebuild: bool = False
    #: the run's clock in unix microseconds (tests); None = now
    now_us: int | None = None


def _pace(config: LearningRunConfig, quiet_period_s: float, partition_key: str) -> Pace:
    now_us = config.now_us if config.now_us is not None else time.time_ns() // 1000
    closed = now_us >= window_end(partition_key, GRANULARITY).timestamp() * 1_000_000
    return Pace(quiet_us=int(quiet_period_s * 1_000_000), now_us=now_us, flush=config.flush == "all" or closed,
                flush_users=frozenset(config.flush_users))  # fmt: skip


def _previous_rows(store, window: str, rebuild: bool) -> dict[str, list[dict]]:
    """This window's rows from earlier runs (none for a rebuild); rerun rows are the operation's, not the window's."""
    if rebuild:
        return {}
    rows = {name: store.read_table(name, window).to_pylist() for name in WINDOW_TABLES}
    for name in ITEM_TABLES:
        rows[name] = [r for r in rows[name] if r["operation_id"] is None]
    return rows


@dg.multi_asset(
    specs=[
        dg.AssetSpec(name, deps=["turns"], group_name="learning", kinds={"deltalake"}, description=description)
        for name, (description, _) in _OUTPUTS.items()
    ],
    partitions_def=PARTITIONS,
)
def user_learning(
    context: dg.AssetExecutionContext,
    config: LearningRunConfig,
    lake: LakeResource,
    extractor: ExtractorResource,
    embedder: EmbedderResource,
):
    store = lake.get()
    window = window_of_key(context.partition_key, GRANULARITY)
    run_id = context.run.run_id
    extraction_config = extractor.get_config()
    pace = _pace(config, extraction_config.quiet_period(bool(extractor.model.strip())), context.partition_key)
    # The ledger is written after the window lock is released (it takes that lock itself).
    with ledger_written(store, run_id=run_id, asset="user_learning", window=window):
        # The whole step holds the window's lock: a second run of the window (the sensor does not wait for the
        # first) starts from the bookmarks the first one committed, instead of extracting the same turns again.
        with store.lock(f"window-{window}"), counting_reads() as reads:
            turns = live_turns(store, window)
            users = sorted({t.user_id for t in turns})
            previous = _previous_rows(store, window, config.rebuild)
            states = user_states(store, set(users), window, bookmarks=previous.get("extraction_bookmarks"))
            # a user with an unlearned earlier window waits behind it (see learning/failures.py)
            earlier = [("user_id", "in", users), ("window", "<", window)]
            blocked = blocked_users(store.read_table("extraction_failures", filters=earlier).to_pylist()) if users else {}
            output = learn(
                turns,
                states,
                extractor.get(),
                embedder.get(),
                extractor.dedup_judge_factory(),
                window=window,
                run_id=run_id,
                config=extraction_config,
                on_failure="record",
                blocked=blocked,
                pace=pace,
                concurrency=extractor.concurrency,
            )
            tables = window_rows(previous, output)
            arrow = {name: pa.Table.from_pylist(rows, schema=TABLES[name]) for name, rows in tables.items()}
            failures = merge_failures(store.read_table("extraction_failures", window).to_pylist(), output.failures,
                                      output.learned_users, window=window, run_id=run_id, at=int(time.time()))  # fmt: skip
            versions = {name: store.replace_window(name, window, table) for name, table in arrow.items()}
            store.replace_window("extraction_failures", window, pa.Table.from_pylist(failures, TABLES["extraction_failures"]))
            # only now: a run that dies before this line leaves the window pending, so the sensor runs it again
            store.mark_learned(window)
    failed = [f for f in output.failures if f.stage != "blocked"]
    if output.failures:
        # ids and error classes only: no turn content, no provider text
        context.log.warning(
            f"{len(output.failures)} user batch(es) not learned in window {window} and left for the next run: "
            + "; ".join(f"{f.user_id} {f.stage} {f.extraction_window_id or ''} {f.summary}" for f in output.failures)
        )
    stats = output.stats
    cost = {
        "users": stats.users,
        "extraction_windows": stats.windows,
        "llm_calls": stats.llm_calls,
        "dedup_calls": stats.dedup_calls,
        "gate_calls": stats.gate_calls,
        "windows_skipped_by_gate": stats.gate_skipped,
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.completion_tokens,
        "superseded": stats.superseded,
        "duplicates_dropped": stats.duplicates_dropped,
        "forget_requests": stats.forget_requests,
        "profiles_forgotten": stats.forgotten,
        "failed_windows": len(failed),
        "failed_window_ids": ", ".join(sorted(f.extraction_window_id or _failed_batch(f, lake.metadata_previews)
                                              for f in failed)),
        "blocked_users": sum(1 for f in output.failures if f.stage == "blocked"),
        "turns_extracted": stats.turns_extracted,
        "turns_held_back": stats.turns_held,
        "extractor": ", ".join(sorted(stats.extractors)) or "none",
    }
    # what the step read of the lake (after Delta file skipping): should follow the window's users, not the lake
    read = reads.metadata()
    cost.update({k: v for k, v in read.items() if k != "lake_reads"})
    cost["lake_reads"] = dg.MetadataValue.json(read["lake_reads"])
    for name, table in arrow.items():
        yield dg.MaterializeResult(
            asset_key=name,
            metadata={
                "window": window,
                "dagster/row_count": table.num_rows,
                "delta_version": versions[name],
                "preview": preview(table, _OUTPUTS[name][1], enabled=lake.metadata_previews),
                **cost,
            },
        )

