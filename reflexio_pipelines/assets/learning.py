"""Assets `user_profiles` and `user_playbooks`: one extraction pass per user window yields both.

They are one multi-asset because a single extractor call per window returns profiles and playbooks together —
half the LLM calls of extracting them separately, which is where the batch design saves cost.
"""


import dagster as dg
import pyarrow as pa

from reflexio_pipelines.assets.metadata import preview
from reflexio_pipelines.lake.records import turns_from_table
from reflexio_pipelines.lake.schemas import USER_PLAYBOOKS, USER_PROFILES
from reflexio_pipelines.learning.learn import learn
from reflexio_pipelines.partitions import GRANULARITY, PARTITIONS, window_of_key
from reflexio_pipelines.resources import ExtractorResource, LakeResource


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            "user_profiles",
            deps=["turns"],
            group_name="learning",
            kinds={"deltalake"},
            description="Per-user facts extracted from the window's turns, with provenance.",
        ),
        dg.AssetSpec(
            "user_playbooks",
            deps=["turns"],
            group_name="learning",
            kinds={"deltalake"},
            description="Per-user behavioural rules (corrections, tool failures, expert answers), with provenance.",
        ),
    ],
    partitions_def=PARTITIONS,
)
def user_learning(context: dg.AssetExecutionContext, lake: LakeResource, extractor: ExtractorResource):
    store = lake.get()
    window = window_of_key(context.partition_key, GRANULARITY)
    turns = turns_from_table(store.read_table("turns", window))
    output = learn(
        turns,
        extractor.get(),
        window_size=extractor.window_size,
        window_stride=extractor.window_stride,
        window=window,
        run_id=context.run.run_id,
        agent_context=extractor.agent_context,
    )
    profiles = pa.Table.from_pylist(output.profiles, schema=USER_PROFILES)
    playbooks = pa.Table.from_pylist(output.playbooks, schema=USER_PLAYBOOKS)
    with store.lock(f"window-{window}"):
        profiles_version = store.replace_window("user_profiles", window, profiles)
        playbooks_version = store.replace_window("user_playbooks", window, playbooks)
    stats = output.stats
    cost = {
        "users": stats.users,
        "extraction_windows": stats.windows,
        "llm_calls": stats.llm_calls,
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.completion_tokens,
        "extractor": ", ".join(sorted(stats.extractors)) or "none",
    }
    yield dg.MaterializeResult(
        asset_key="user_profiles",
        metadata={
            "window": window,
            "dagster/row_count": profiles.num_rows,
            "delta_version": profiles_version,
            "preview": preview(profiles, ["user_id", "content", "profile_time_to_live"]),
            **cost,
        },
    )
    yield dg.MaterializeResult(
        asset_key="user_playbooks",
        metadata={
            "window": window,
            "dagster/row_count": playbooks.num_rows,
            "delta_version": playbooks_version,
            "preview": preview(playbooks, ["user_id", "kind", "trigger", "content"]),
            **cost,
        },
    )
