"""Asset `turns`: the window's landing files compacted into the Delta table `tables/turns`.

A window runs many times while it is open, so a run compacts only the landing files that landed since the last
one (cost follows what is new: 8 s per run late in a busy hour when every run re-read the whole window, measured at
50 turns/s). When a file the last run consumed is gone without the consumed list saying so, the window is compacted
from all its files again.
"""


import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

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
    with store.lock(f"window-{window}"):
        consumed = set(store.read_consumed(window))
        incremental = bool(consumed) and consumed <= set(names)
        if incremental:
            fresh = [(f, n) for f, n in zip(files, names) if n not in consumed]
            new_names = [n for _, n in fresh]
            # rows of a fresh file may be there already (a crash after the commit, before the consumed list)
            kept = store.read_table("turns", window)
            kept = kept.filter(pc.invert(pc.is_in(kept.column("landing_file"), value_set=pa.array(new_names, pa.string()))))
            added = compact_landing([f for f, _ in fresh], new_names, window)
            added = added.filter(pc.invert(pc.is_in(added.column("turn_id"), value_set=kept.column("turn_id"))))  # first copy wins
            version = store.replace_landing_files(window, new_names, added) if fresh else store.table_version("turns")
            table = pa.concat_tables([kept, added])
        else:
            table = compact_landing(files, names, window)
            version = store.replace_window("turns", window, table)
        store.write_consumed(window, names)
    return dg.MaterializeResult(
        metadata={
            "window": window,
            "dagster/row_count": table.num_rows,
            "compaction": "incremental" if incremental else "full",
            "users": users_in(table),
            "landing_files": len(files),
            "landing_files_compacted": len(new_names) if incremental else len(files),
            "delta_version": version,
            "preview": preview(table, ["turn_id", "user_id", "role", "content"], enabled=lake.metadata_previews),
        }
    )
