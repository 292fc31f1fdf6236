"""Export everything the lake holds about one user: one list of rows per table, as JSON or as a zip of Parquet.

Every table in `TABLES` is present (empty when it holds nothing of the user), so an unknown user gets the same
shape with empty lists. Rows are whole rows, provenance included; rows shared with other users (agent playbooks the
user's playbooks contributed to and their change log) list only the user's own member ids, and their text holds only
the user's own words and the consolidator's (`shared.py`): nothing another contributor wrote. Turns that landed but
were not materialised yet come from the landing files, with the window they will be processed in.
"""

from __future__ import annotations

import io
import zipfile

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.privacy.scope import check_rules, landing_rows, matches, only_user, scope_of
from reflexio_pipelines.privacy.shared import shared_wording


def export_user(lake: Lake, user_id: str) -> dict[str, pa.Table]:
    """table name -> the user's rows of that table (with the table's schema), for every table in TABLES.

    Read again from the start when a landing file vanished under it (another user's erasure deleted it)."""
    check_rules()
    return lake.read_consistently(lambda: _export(lake, user_id))


def _export(lake: Lake, user_id: str) -> dict[str, pa.Table]:
    scope = scope_of(lake, user_id)
    wording = shared_wording(lake, scope)
    out: dict[str, pa.Table] = {}
    for name, schema in TABLES.items():
        table = lake.read_table(name)
        found = matches(table, scope)
        direct, shared = table.filter(found.direct), table.filter(found.shared)
        if shared.num_rows:
            shared = pa.Table.from_pylist(
                [wording.for_export(only_user(r, scope)) for r in shared.to_pylist()], schema=schema
            )
        out[name] = pa.concat_tables([direct, shared])
    out["turns"] = pa.concat_tables([out["turns"], _unmaterialised_turns(lake, user_id, out["turns"])])
    return out


def _unmaterialised_turns(lake: Lake, user_id: str, materialised: pa.Table) -> pa.Table:
    """The user's turns in landing files whose rows are not in the `turns` table yet, shaped like `turns` rows."""
    known = pa.array(materialised.column("turn_id").to_pylist(), pa.string())
    parts = []
    for hit in landing_rows(lake, user_id):
        rows = hit.rows.filter(pc.invert(pc.is_in(hit.rows.column("turn_id"), value_set=known)))
        if not rows.num_rows:
            continue
        rows = rows.append_column("landing_file", pa.array([lake.relative(hit.path)] * rows.num_rows, pa.string()))
        rows = rows.append_column("window", pa.array([hit.window] * rows.num_rows, pa.string()))
        parts.append(rows.select(TABLES["turns"].names).cast(TABLES["turns"]))
    return pa.concat_tables(parts) if parts else TABLES["turns"].empty_table()


def as_json(tables: dict[str, pa.Table]) -> dict[str, list[dict]]:
    """One JSON object keyed by table name, each a list of row objects."""
    return {name: table.to_pylist() for name, table in tables.items()}


def as_parquet_zip(tables: dict[str, pa.Table]) -> bytes:
    """A zip with `<table>.parquet` per table (schemas as in the lake)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:  # Parquet is compressed already
        for name, table in tables.items():
            sink = io.BytesIO()
            pq.write_table(table, sink, compression="zstd")
            archive.writestr(f"{name}.parquet", sink.getvalue())
    return buffer.getvalue()
