"""Asset `turns`: the window's landing files compacted into the Delta table `tables/turns`."""


import dagster as dg

from reflexio_pipelines.assets.metadata import preview
from reflexio_pipelines.lake.compaction import compact_landing, users_in
from reflexio_pipelines.partitions import GRANULARITY, PARTITIONS, landing_hours_of_key, window_of_key
from reflexio_pipelines.resources import LakeResource


@dg.asset(
    partitions_def=PARTITIONS,
    group_name="ingest",
    kinds={"deltalake", "parquet"},
    description="Published turns of one time window, compacted from the immutable landing files (one row per turn).",
)
def turns(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    store = lake.get()
    key = context.partition_key
    window = window_of_key(key, GRANULARITY)
    hour_dirs = [store.landing_turns / f"date={d}" / f"hour={h}" for d, h in landing_hours_of_key(key, GRANULARITY)]
    files = store.landing_files(hour_dirs)
    names = [store.relative(f) for f in files]
    table = compact_landing(files, names, window)
    with store.lock(f"window-{window}"):
        version = store.replace_window("turns", window, table)
        store.write_consumed(window, names)
    return dg.MaterializeResult(
        metadata={
            "window": window,
            "dagster/row_count": table.num_rows,
            "users": users_in(table),
            "landing_files": len(files),
            "delta_version": version,
            "preview": preview(table, ["turn_id", "user_id", "role", "content"], enabled=lake.metadata_previews),
        }
    )
