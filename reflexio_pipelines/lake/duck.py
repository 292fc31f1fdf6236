"""The analysts' DuckDB connection: one view per lake table, read straight from the Delta/Parquet files.

    from reflexio_pipelines.lake.duck import connect
    con = connect("lake")
    con.sql("select user_id, count(*) from turns group by 1").show()

DuckDB's own delta extension needs a download, so Delta tables are exposed through pyarrow datasets, which works
offline and pushes filters down to the files; on object storage the landing files are read the same way.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.records import ENTITY_TABLES, live_rows
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.storage import is_remote, open_delta


def connect(lake_root: str | Path = "lake") -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with a view per lake table (`turns`, `user_profiles`, `user_playbooks`,
    `change_log`, `extraction_bookmarks`, `lifecycle_events`, `landing_turns`) plus `current_user_profiles` and
    `current_user_playbooks`: what is served now (supersession and lifecycle events applied)."""
    lake = Lake.at(lake_root)
    con = duckdb.connect()
    for name, schema in TABLES.items():
        path = lake.table_path(name)
        if (path / "_delta_log").exists():
            con.register(name, open_delta(path).to_pyarrow_dataset())
        else:
            con.register(name, schema.empty_table())
    for entity, (name, _, _) in ENTITY_TABLES.items():
        con.register(f"current_{name}", pa.Table.from_pylist(live_rows(lake, entity), schema=TABLES[name]))
    landing_root = lake.landing_turns
    if is_remote(landing_root):
        # DuckDB's httpfs extension is a download away; pyarrow reads the objects through the lake's filesystem.
        if landing_root.exists():
            con.register(
                "landing_turns",
                ds.dataset(landing_root.path, filesystem=landing_root.fs, format="parquet", partitioning="hive"),
            )
        return con
    landing = list(landing_root.glob("date=*/hour=*/[!.]*.parquet"))
    if landing:
        files = ", ".join(f"'{p}'" for p in sorted(landing))
        con.execute(f"create view landing_turns as select * from read_parquet([{files}], hive_partitioning = true)")
    return con
