"""Jobs: the whole loop for one window, its two halves for backfills, and aggregation."""

from __future__ import annotations

import dagster as dg

INDEX_ASSETS = dg.AssetSelection.assets("search_index", "serving_index")
AGGREGATION_ASSETS = dg.AssetSelection.assets("playbook_embeddings", "agent_playbooks", "aggregation_change_log")
EVALUATION_ASSETS = dg.AssetSelection.assets(
    "session_evaluations",
    "shadow_comparisons",
    "session_outcomes",
    "item_outcome_events",
    "item_outcomes",
    "outcome_change_log",
    "impact_metrics",
    "impact_before_after",
    "impact_holdout",
)


def lake_run_config(root: str, metadata_previews: bool) -> dict:
    """Run config pointing a run's `lake` resource at another lake (an organisation's): the resource's whole
    config, since run config replaces a configured resource's values rather than merging with them."""
    return {"resources": {"lake": {"config": {"root": root, "metadata_previews": metadata_previews}}}}


#: New turns one sensor-launched `index_job` build takes in (`interaction_index_sensor`). Under steady publishing
#: (50 turns/s, 2 cores) an uncapped index_job between learning runs took 106 s and slowed the runs beside it; 600
#: bounds it at ~10 s. The rest waits for the next build (serving covers unindexed turns from the landing files).
MAX_NEW_TURNS_PER_BUILD = 600
#: New turns a landing-sensor learning run's build takes in beside the items the run learned, which wait for it:
#: under the same load its build embedded 650-870 texts at ~50/s (long turn lines; short items go faster), 15 s of a
#: 16.5 s step with 600 (py-spy), and publish -> searchable p95 was 71 s. 200 keeps it to a few seconds.
MAX_NEW_TURNS_PER_LEARNING_BUILD = 200


def learning_run_config(
    flush: str = "all", flush_users: list[str] | tuple[str, ...] = (), index_turns: bool = False
) -> dict:
    """Run config of the learning step (assets/learning.py `LearningRunConfig`) for a `learn_job`/`extract_job` run:
    `flush="due"` holds back incomplete windows of active sessions, except `flush_users`' turns. `index_turns`
    (`learn_job` only) has the run's index build take in the turns published since the served version too."""
    ops: dict = {"user_learning": {"config": {"flush": flush, "flush_users": sorted(set(flush_users))}}}
    if index_turns:
        ops["search_index"] = {"config": {"index_turns": True, "max_new_turns": MAX_NEW_TURNS_PER_LEARNING_BUILD}}
    return {"ops": ops}


#: turns → learning for one window, then rebuild and publish the index (what the sensor launches).
learn_job = dg.define_asset_job(
    "learn_job",
    selection=dg.AssetSelection.all() - AGGREGATION_ASSETS - EVALUATION_ASSETS,
    description="Compact a window's turns, learn from them, rebuild and publish the search index.",
)

#: turns → learning for one window only (a backfill runs this per window, then index_job once).
extract_job = dg.define_asset_job(
    "extract_job",
    selection=dg.AssetSelection.all() - INDEX_ASSETS - AGGREGATION_ASSETS - EVALUATION_ASSETS,
    description="Compact a window's turns and learn from them, without touching the index.",
)

#: Rebuild and publish the index from everything learned so far.
index_job = dg.define_asset_job(
    "index_job",
    selection=INDEX_ASSETS,
    description="Rebuild the search index over all current learned items and publish it.",
)

#: Cluster current user playbooks into agent playbooks, then rebuild and publish the index.
aggregation_job = dg.define_asset_job(
    "aggregation_job",
    selection=AGGREGATION_ASSETS | INDEX_ASSETS,
    description="Embed and cluster user playbooks across users into agent playbooks (pending approval); re-index.",
)

#: Judge newly closed, sampled sessions, count what served items led to, and recompute the impact metrics.
evaluation_job = dg.define_asset_job(
    "evaluation_job",
    selection=EVALUATION_ASSETS,
    description="Evaluate sampled closed sessions (success, shadow head-to-head), count the outcomes of served learned "
    "items, and recompute impact metrics (treated vs control, correction recurrence).",
)
