"""The analysts' DuckDB connection: one view per lake table, read straight from the Delta/Parquet files.

    from reflexio_pipelines.lake.duck import connect
    con = connect("lake")
    con.sql("select user_id, count(*) from turns group by 1").show()

DuckDB's own delta extension needs a download, so Delta tables are exposed through pyarrow datasets, which works
offline and pushes filters down to the files.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.schemas import TABLES


def connect(lake_root: str | Path = "lake") -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with views `turns`, `user_profiles`, `user_playbooks`, `landing_turns`."""
    from deltalake import DeltaTable

    lake = Lake.at(lake_root)
    con = duckdb.connect()
    for name, schema in TABLES.items():
        path = lake.table_path(name)
        if (path / "_delta_log").exists():
            con.register(name, DeltaTable(str(path)).to_pyarrow_dataset())
        else:
            con.register(name, schema.empty_table())
    landing = list(lake.landing_turns.glob("date=*/hour=*/[!.]*.parquet"))
    if landing:
        files = ", ".join(f"'{p}'" for p in sorted(landing))
        con.execute(f"create view landing_turns as select * from read_parquet([{files}], hive_partitioning = true)")
    return con
