"""The learning multi-asset: one extraction pass per user window, then dedup against what each user already has.

`user_profiles` and `user_playbooks` are one multi-asset because a single extractor call per window returns both —
half the LLM calls of extracting them separately, which is where the batch design saves cost. The same step
writes the `change_log` (every addition and supersession) and the `extraction_bookmarks` (where each user's
extraction stands), so all four stay consistent for a window.
"""

import dagster as dg
import pyarrow as pa

from reflexio_pipelines.assets.metadata import preview
from reflexio_pipelines.lake.records import turns_from_table, user_states
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.learning.learn import learn
from reflexio_pipelines.partitions import GRANULARITY, PARTITIONS, window_of_key
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


@dg.multi_asset(
    specs=[
        dg.AssetSpec(name, deps=["turns"], group_name="learning", kinds={"deltalake"}, description=description)
        for name, (description, _) in _OUTPUTS.items()
    ],
    partitions_def=PARTITIONS,
)
def user_learning(
    context: dg.AssetExecutionContext, lake: LakeResource, extractor: ExtractorResource, embedder: EmbedderResource
):
    store = lake.get()
    window = window_of_key(context.partition_key, GRANULARITY)
    turns = turns_from_table(store.read_table("turns", window))
    states = user_states(store, {t.user_id for t in turns}, window)
    output = learn(
        turns,
        states,
        extractor.get(),
        embedder.get(),
        extractor.dedup_judge_factory(),
        window=window,
        run_id=context.run.run_id,
        config=extractor.get_config(),
    )
    tables = {
        "user_profiles": output.profiles,
        "user_playbooks": output.playbooks,
        "change_log": output.change_log,
        "extraction_bookmarks": output.bookmarks,
    }
    arrow = {name: pa.Table.from_pylist(rows, schema=TABLES[name]) for name, rows in tables.items()}
    with store.lock(f"window-{window}"):
        versions = {name: store.replace_window(name, window, table) for name, table in arrow.items()}
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
        "extractor": ", ".join(sorted(stats.extractors)) or "none",
    }
    for name, table in arrow.items():
        yield dg.MaterializeResult(
            asset_key=name,
            metadata={
                "window": window,
                "dagster/row_count": table.num_rows,
                "delta_version": versions[name],
                "preview": preview(table, _OUTPUTS[name][1]),
                **cost,
            },
        )
