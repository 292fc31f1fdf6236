"""Jobs: the whole loop for one window, and its two halves for backfills."""

from __future__ import annotations

import dagster as dg

INDEX_ASSETS = dg.AssetSelection.assets("search_index", "serving_index")

#: turns → profiles/playbooks for one window, then rebuild and publish the index (what the sensor launches).
learn_job = dg.define_asset_job(
    "learn_job",
    selection=dg.AssetSelection.all(),
    description="Compact a window's turns, learn from them, rebuild and publish the search index.",
)

#: turns → profiles/playbooks for one window only (a backfill runs this per window, then index_job once).
extract_job = dg.define_asset_job(
    "extract_job",
    selection=dg.AssetSelection.all() - INDEX_ASSETS,
    description="Compact a window's turns and learn from them, without touching the index.",
)

#: Rebuild and publish the index from everything learned so far.
index_job = dg.define_asset_job(
    "index_job",
    selection=INDEX_ASSETS,
    description="Rebuild the search index over all current learned items and publish it.",
)
