"""Helpers shared by assets for the metadata the Dagster UI shows (row counts, previews)."""

from __future__ import annotations

import dagster as dg
import pyarrow as pa

#: Columns holding what people wrote (or rules made from it). Dagster's run storage is out of erasure's reach, so a
#: preview shows their length, never their words: an erased user's words must survive nowhere.
FREE_TEXT_COLUMNS = frozenset({"content", "trigger", "rationale", "blocking_issue", "expert_content", "shadow_content"})


def table_specs(group: str, tables: dict[str, tuple[list[str], str]]) -> list[dg.AssetSpec]:
    """The specs of a multi-asset's outputs, each one Delta table of the lake: key -> (deps, description)."""
    return [
        dg.AssetSpec(key, deps=deps, group_name=group, kinds={"deltalake"}, description=description)
        for key, (deps, description) in tables.items()
    ]


def preview(table: pa.Table, columns: list[str], *, enabled: bool, rows: int = 5, width: int = 80) -> dg.MetadataValue:
    """A markdown table of the first rows, long cells shortened and free-text cells replaced by their length, for the
    asset's metadata panel; a placeholder when previews of user data are off (`LakeResource.metadata_previews`:
    then not even ids are shown)."""
    if not enabled:
        return dg.MetadataValue.md("_(previews off: metadata_previews is false)_")
    if table.num_rows == 0:
        return dg.MetadataValue.md("_(no rows)_")
    head = table.select(columns).slice(0, rows).to_pylist()
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in head:
        cells = [_words_left_out(row[c]) if c in FREE_TEXT_COLUMNS else _cell(row[c], width) for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return dg.MetadataValue.md("\n".join(lines))


def _cell(value: object, width: int) -> str:
    text = str(value).replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def _words_left_out(value: object) -> str:
    return "" if value is None else f"({len(str(value))} chars)"
