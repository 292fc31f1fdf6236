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
incomplete window of a session that is still active. `rebuild` re-extracts the window from scratch instead. A
session that goes quiet while a run learns is learned by that run: after its commit the run makes another pass
over the held-back turns that fell due meanwhile (window_pass.py `CATCH_UP_PASSES`), instead of leaving them to a
next run that could start only after this one.

The learning itself is window_pass.py (Dagster-free); assets/learning_shards.py fans the same work out over
shards of the window's users (`REFLEXIO_LEARNING_SHARDS`).
"""

import time
from typing import Literal

import dagster as dg

from reflexio_pipelines.assets.metadata import preview, table_specs
from reflexio_pipelines.lake.llm_calls import ledger_written
from reflexio_pipelines.lake.reads import counting_reads
from reflexio_pipelines.lake.windows import window_end, window_of_key
from reflexio_pipelines.learning.batch import LearnOutput
from reflexio_pipelines.learning.windows import Pace, pace_at
from reflexio_pipelines.partitions import GRANULARITY, PARTITIONS
from reflexio_pipelines.resources import EmbedderResource, ExtractorResource, LakeResource
from reflexio_pipelines.window_pass import Committed, Learner, learn_and_commit

OUTPUTS = {
    "user_profiles": (
        "Per-user facts, deduplicated; a newer statement supersedes an older one (kept for audit).",
        ["user_id", "content", "profile_time_to_live", "supersedes"],
    ),
    "user_playbooks": (
        "Per-user behavioural rules (corrections, tool failures, expert answers), deduplicated.",
        ["user_id", "kind", "trigger", "content", "supersedes"],
    ),
    "change_log": (
        "Every addition and supersession of a profile or user playbook.",
        ["entity", "change", "item_id", "superseded_by", "content"],
    ),
    "extraction_bookmarks": (
        "Per user: the last turn processed, how many new turns and windows this window had.",
        ["user_id", "last_turn_id", "new_turns", "extraction_windows", "items_extracted"],
    ),
}


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


def run_pace(config: LearningRunConfig, extractor: ExtractorResource, partition_key: str) -> Pace:
    """The run's pace (learning/windows.py `pace_at`), its clock read now: the extractor's quiet period, the run
    config's flush, the partition's window end."""
    quiet_period_s = extractor.get_config().quiet_period(bool(extractor.model.strip()))
    now_us = config.now_us if config.now_us is not None else time.time_ns() // 1000
    return pace_at(
        now_us,
        flush=config.flush,
        flush_users=config.flush_users,
        quiet_period_s=quiet_period_s,
        window_end=window_end(partition_key, GRANULARITY),
    )


@dg.multi_asset(
    specs=table_specs("learning", {name: (["turns"], description) for name, (description, _) in OUTPUTS.items()}),
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
    # The ledger is written after the window lock is released (it takes that lock itself).
    with ledger_written(store, run_id=run_id, asset="user_learning", window=window):
        # The whole step holds the window's lock: a second run of the window (the sensor does not wait for the
        # first) starts from the bookmarks the first one committed, instead of extracting the same turns again.
        with store.lock(f"window-{window}"), counting_reads() as reads:
            # the clock is read once the lock is held (turns that fell due while this run waited go through now),
            # and again after each commit: turns falling due during the run are learned by it (CATCH_UP_PASSES)
            output, committed = learn_and_commit(
                store,
                window,
                learner(extractor, embedder),
                lambda: run_pace(config, extractor, context.partition_key),
                run_id=run_id,
                rebuild=config.rebuild,
            )
    metadata = materialization_metadata(
        context, output, committed, reads.metadata(), window=window, previews=lake.metadata_previews
    )
    for name, table_metadata in metadata.items():
        yield dg.MaterializeResult(asset_key=name, metadata=table_metadata)


def learner(extractor: ExtractorResource, embedder: EmbedderResource) -> Learner:
    """The run's `Learner`, from its resources."""
    return Learner(
        extractor.get(), embedder.get(), extractor.dedup_judge_factory(), extractor.get_config(), extractor.concurrency
    )


def materialization_metadata(
    context: dg.OpExecutionContext,
    output: LearnOutput,
    committed: Committed,
    read: dict,
    *,
    window: str,
    previews: bool,
) -> dict[str, dict]:
    """Per table the learning step wrote: its materialisation metadata (the run's cost and what it read of the
    lake). Failed batches are logged (ids and error classes only: no turn content, no provider text)."""
    failed = [f for f in output.failures if f.stage != "blocked"]
    if output.failures:
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
        "failed_window_ids": ", ".join(sorted(f.extraction_window_id or _failed_batch(f, previews) for f in failed)),
        "blocked_users": sum(1 for f in output.failures if f.stage == "blocked"),
        "turns_extracted": stats.turns_extracted,
        "turns_held_back": stats.turns_held,
        "learning_passes": stats.passes,
        "extractor": ", ".join(sorted(stats.extractors)) or "none",
        **read_metadata(read),
    }
    return {
        name: {
            "window": window,
            "dagster/row_count": table.num_rows,
            "delta_version": committed.versions[name],
            "preview": preview(table, OUTPUTS[name][1], enabled=previews),
            **cost,
        }
        for name, table in committed.tables.items()
    }


def read_metadata(read: dict) -> dict:
    """What a step read of the lake (after Delta file skipping), as metadata: it should follow the window's users,
    not the lake."""
    return {
        **{k: v for k, v in read.items() if k != "lake_reads"},
        "lake_reads": dg.MetadataValue.json(read["lake_reads"]),
    }
