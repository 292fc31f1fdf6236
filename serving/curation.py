"""Manual curation applied to retrieval at once: deletions leave search in the same request cycle and edited
items are served with their new text, until the next index version (built right after, see serving/reindex.py)
contains them. The durable record is the lake's curation log (reflexio_pipelines/lake/curation.py); other
replicas pick changes up when its version changes (checked by the index watcher)."""

from __future__ import annotations

from typing import Any

from reflexio_pipelines.lake.curation import (
    ID_COLUMNS,
    CurationOp,
    apply_adds_and_updates,
    deleted_ids,
    read_ops,
    record,
)
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.search.documents import patch_view
from serving.log_mirror import LogMirror


class CurationOverlay(LogMirror):
    """Per entity: ids deleted and the latest edited fields, mirrored from the curation log."""

    def __init__(self, lake: Lake) -> None:
        super().__init__(lake)
        self._ops: list[dict[str, Any]] = []
        self._deleted: dict[str, frozenset[str]] = {}
        self._patches: dict[str, dict[str, dict[str, Any]]] = {}
        self._by_entity: dict[str, list[dict[str, Any]]] = {}
        #: Bumped by every change of the mirrored log (serving/fresh.py rebuilds when it moves).
        self.generation = 0

    def _log_version(self) -> int | None:
        return self._lake.table_version("curation_log")

    def _load(self) -> list[dict[str, Any]]:
        return read_ops(self._lake)

    def record(self, ops: list[CurationOp], actor: str = "api") -> None:
        """Write ops durably, then apply them to retrieval."""

        def apply(written: list[dict[str, Any]]) -> None:
            self._install(self._ops + [dict(r, fields=op.fields) for r, op in zip(written, ops, strict=True)])

        self._write(lambda: record(self._lake, ops, actor), apply)

    def _install(self, ops: list[dict[str, Any]]) -> None:
        self._ops = ops
        by_entity: dict[str, list[dict[str, Any]]] = {}
        for op in ops:
            by_entity.setdefault(op["entity"], []).append(op)
        self._by_entity = by_entity
        self._deleted = {entity: deleted_ids(entity_ops) for entity, entity_ops in by_entity.items()}
        patches: dict[str, dict[str, dict[str, Any]]] = {}
        for op in ops:
            if op["action"] == "update":
                patches.setdefault(op["entity"], {}).setdefault(op["item_id"], {}).update(op["fields"])
        self._patches = patches
        self.generation += 1

    def added_rows(self, entity: str) -> list[dict[str, Any]]:
        """Rows added through the API and not deleted since, with their edits applied."""
        ops = self._by_entity.get(entity, [])
        gone = self._deleted.get(entity, frozenset())
        id_column = ID_COLUMNS[entity]
        return [r for r in apply_adds_and_updates([], ops, id_column) if str(r[id_column]) not in gone]

    def excluded(self, entity: str) -> frozenset[str]:
        """Ids of `entity` that must not be served."""
        return self._deleted.get(entity, frozenset())

    def patched(self, entity: str, doc_id: str, payload: dict[str, Any]) -> dict[str, Any]:
        """`payload` with any edit of the item applied (edits already in the index re-apply identically)."""
        fields = self._patches.get(entity, {}).get(doc_id)
        return patch_view(payload, fields) if fields else payload
