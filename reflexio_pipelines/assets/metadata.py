"""Helpers shared by assets for the metadata the Dagster UI shows (row counts, previews)."""

from __future__ import annotations

import dagster as dg
import pyarrow as pa


def preview(table: pa.Table, columns: list[str], *, enabled: bool, rows: int = 5, width: int = 80) -> dg.MetadataValue:
    """A markdown table of the first rows, long cells shortened, for the asset's metadata panel; a placeholder when
    previews of user data are off (`LakeResource.metadata_previews`)."""
    if not enabled:
        return dg.MetadataValue.md("_(previews off: metadata_previews is false)_")
    if table.num_rows == 0:
        return dg.MetadataValue.md("_(no rows)_")
    head = table.select(columns).slice(0, rows).to_pylist()
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in head:
        cells = [_cell(row[c], width) for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return dg.MetadataValue.md("\n".join(lines))


def _cell(value: object, width: int) -> str:
    text = str(value).replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"
