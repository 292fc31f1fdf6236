"""The learning step fanned out over shards of a window's users (`REFLEXIO_LEARNING_SHARDS` > 1): the same four
assets as assets/learning.py, as a graph of steps that Dagster's executor runs in parallel — a process per step
with the multiprocess executor on one machine, a pod per step with `k8s_job_executor` across machines.

    plan_shards ─► learn_shard[shard_0] ─┐
                ─► learn_shard[shard_1] ─┼─► commit_shards  (user_profiles, user_playbooks, change_log,
                ─► learn_shard[…]       ─┘                    extraction_bookmarks)

- `plan_shards` fixes the run's pace (its clock: every shard decides alike what is due), splits the window's users
  into shards of equal size in the order of a hash of their ids (window_pass.py `shard_users`) and stamps what
  earlier runs of the window committed (window_pass.py `window_stamp`); it stages this plan in the lake (lake/staging.py).
- Each `learn_shard` learns its users exactly as one pass would (window_pass.py `learn_users`) and stages its
  output in the lake: outputs hold users' words, so they never go through Dagster's IO manager or run storage.
- `commit_shards` takes the window's lock, merges the shards in the window's user order (the rows one pass over
  every user writes, byte for byte) and commits them in one step, as the unsharded asset does (window_pass.py
  `commit_staged`). If another run of the window committed while the shards learned (the stamp moved) or the
  staging is gone (an erasure), it learns the window again under the lock, from what is committed now: a lost race
  costs the loser's LLM calls, never a duplicated or lost item.

`REFLEXIO_LLM_CONCURRENCY` holds per step process (each machine brings its own workers); the provider's
requests/tokens per minute are split between the shards (resources/extractor.py `ExtractorResource.shards`).
"""

import dagster as dg

from reflexio_pipelines.assets.learning import (
    OUTPUTS,
    LearningRunConfig,
    learner,
    materialization_metadata,
    read_metadata,
    run_pace,
)
from reflexio_pipelines.lake import staging
from reflexio_pipelines.lake.llm_calls import ledger_written
from reflexio_pipelines.lake.reads import counting_reads
from reflexio_pipelines.lake.windows import window_of_key
from reflexio_pipelines.partitions import GRANULARITY, PARTITIONS
from reflexio_pipelines.resources import EmbedderResource, ExtractorResource, LakeResource
from reflexio_pipelines.window_pass import (
    commit_staged,
    learn_users,
    previous_rows,
    shard_users,
    window_stamp,
    window_users,
)


def _window(context: dg.OpExecutionContext) -> str:
    return window_of_key(context.partition_key, GRANULARITY)


@dg.op(ins={"turns": dg.In(dg.Nothing)}, out=dg.DynamicOut(int))
def plan_shards(
    context: dg.OpExecutionContext, config: LearningRunConfig, lake: LakeResource, extractor: ExtractorResource
):
    """Stage the run's plan; one output per shard holding users (shard 0 alone for a window without users, so the
    commit still runs and marks the window learned)."""
    store, window = lake.get(), _window(context)
    users = window_users(store, window)
    count = max(1, extractor.shards)
    plan = staging.ShardPlan(
        window=window,
        run_id=context.run.run_id,
        count=count,
        pace=run_pace(config, extractor, context.partition_key),
        rebuild=config.rebuild,
        users=tuple(users),
        shards=tuple(shard_users(users, count)),
        stamp=window_stamp(previous_rows(store, window, config.rebuild)),
    )
    staging.write_plan(store, plan)
    for shard in plan.active_shards() or [0]:
        yield dg.DynamicOutput(shard, mapping_key=f"shard_{shard}")


@dg.op
def learn_shard(
    context: dg.OpExecutionContext,
    shard: int,
    lake: LakeResource,
    extractor: ExtractorResource,
    embedder: EmbedderResource,
) -> int:
    """Learn one shard's users and stage the output; returns the shard."""
    store, window, run_id = lake.get(), _window(context), context.run.run_id
    plan = staging.read_plan(store, window, run_id)
    if plan is None:  # erased meanwhile: the commit learns the window again
        context.log.warning(f"the plan of shard {shard} is gone (an erasure?); the commit learns the window")
        return shard
    users = plan.users_of(shard)
    with ledger_written(store, run_id=run_id, asset="user_learning", window=window), counting_reads() as reads:
        previous = previous_rows(store, window, plan.rebuild)
        output = learn_users(
            store, window, learner(extractor, embedder), plan.pace, run_id=run_id, previous=previous, users=users
        )
    staging.write_shard(store, window, run_id, shard, output)
    context.add_output_metadata(
        {
            "users": len(users),
            "llm_calls": output.stats.llm_calls,
            "turns_extracted": output.stats.turns_extracted,
            **read_metadata(reads.metadata()),
        }
    )
    return shard


@dg.op(out={name: dg.Out(dg.Nothing) for name in OUTPUTS})
def commit_shards(
    context: dg.OpExecutionContext,
    config: LearningRunConfig,
    shards: list[int],
    lake: LakeResource,
    extractor: ExtractorResource,
    embedder: EmbedderResource,
):
    """Merge the staged shards and commit the window (see the module docstring for a lost race)."""
    store, window, run_id = lake.get(), _window(context), context.run.run_id
    with ledger_written(store, run_id=run_id, asset="user_learning", window=window):
        with store.lock(f"window-{window}"), counting_reads() as reads:
            output, committed = commit_staged(
                store,
                window,
                run_id,
                shards,
                learner_of=lambda: learner(extractor, embedder),
                pace_of=lambda: run_pace(config, extractor, context.partition_key),
                rebuild=config.rebuild,
                warn=context.log.warning,
            )
    staging.drop_run(store, window, run_id)
    metadata = materialization_metadata(
        context, output, committed, reads.metadata(), window=window, previews=lake.metadata_previews
    )
    for name, table_metadata in metadata.items():
        yield dg.Output(None, output_name=name, metadata={**table_metadata, "shards": len(shards)})


def _config_mapping(config: dict) -> dict:
    # the run config of the unsharded step (jobs.learning_run_config) reaches the two steps that pace the window
    return {"plan_shards": {"config": config}, "commit_shards": {"config": config}}


@dg.graph_multi_asset(
    name="user_learning",
    outs={
        name: dg.AssetOut(description=description, group_name="learning", kinds={"deltalake"})
        for name, (description, _) in OUTPUTS.items()
    },
    ins={"turns": dg.AssetIn(dagster_type=dg.Nothing)},
    partitions_def=PARTITIONS,
    config=dg.ConfigMapping(config_fn=_config_mapping, config_schema=LearningRunConfig.to_config_schema()),
)
def sharded_user_learning(turns):
    """The four learning tables of a window, learned by shards of its users in parallel steps."""
    shards = plan_shards(turns).map(learn_shard).collect()
    return dict(zip(OUTPUTS, commit_shards(shards), strict=True))
