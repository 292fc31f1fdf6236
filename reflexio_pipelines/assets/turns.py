"""Asset `turns`: the window's landing files compacted into the Delta table `tables/turns`.

A window runs many times while it is open, so a run compacts only the landing files that landed since the last
one (cost follows what is new: 8 s per run late in a busy hour when every run re-read the whole window, measured at
50 turns/s). When a file the last run consumed is gone without the consumed list saying so, the window is compacted
from all its files again. The compaction itself is lake/compaction.py `compact_window`.
"""

import dagster as dg

from reflexio_pipelines.assets.metadata import preview
from reflexio_pipelines.lake.compaction import compact_window, users_in
from reflexio_pipelines.lake.windows import landing_hours_of_key, window_of_key
from reflexio_pipelines.partitions import GRANULARITY, PARTITIONS
from reflexio_pipelines.resources import LakeResource


@dg.asset(
    partitions_def=PARTITIONS,
    group_name="ingest",
    kinds={"deltalake", "parquet"},
    description="Published turns of one time window, compacted from the immutable landing files (one row per turn).",
)
def turns(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    window = window_of_key(context.partition_key, GRANULARITY)
    done = compact_window(lake.get(), window, landing_hours_of_key(context.partition_key, GRANULARITY))
    return dg.MaterializeResult(
        metadata={
            "window": window,
            "dagster/row_count": done.table.num_rows,
            "compaction": "incremental" if done.incremental else "full",
            "users": users_in(done.table),
            "landing_files": done.landing_files,
            "landing_files_compacted": done.files_compacted,
            "delta_version": done.version,
            "preview": preview(done.table, ["turn_id", "user_id", "role", "content"], enabled=lake.metadata_previews),
        }
    )
