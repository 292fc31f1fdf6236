"""How much of the lake a step reads: data files and bytes of each Delta table, after Delta's file skipping.

`Lake.read_table` notes every read made inside `counting_reads()` (in the thread that opened it): the files that
survive the read's filters, by partition values and by each file's min/max statistics in the Delta log (the files
a reader opens), their bytes, and the table's file count. The learning step reports them in its run metadata, so a
window's state reads can be checked to follow the window's users rather than the lake's size (issue 15 item 3).
Bytes are whole-file sizes: an upper bound on what Parquet row-group pruning then reads of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa


@dataclass
class TableReads:
    """One table's reads: files opened, their bytes, and the files the table held (summed over reads)."""

    reads: int = 0
    files: int = 0
    bytes: int = 0
    files_in_table: int = 0


@dataclass
class ReadLedger:
    """Reads per table inside one `counting_reads()` block."""

    tables: dict[str, TableReads] = field(default_factory=dict)

    def metadata(self) -> dict[str, Any]:
        """Run metadata: totals, and per table `files read / files held, bytes` (a sorted JSON-able dict)."""
        return {
            "lake_files_read": sum(t.files for t in self.tables.values()),
            "lake_bytes_read": sum(t.bytes for t in self.tables.values()),
            "lake_files_held": sum(t.files_in_table for t in self.tables.values()),
            "lake_reads": {
                name: {"reads": t.reads, "files": t.files, "of_files": t.files_in_table, "bytes": t.bytes}
                for name, t in sorted(self.tables.items())
            },
        }


_ledger: ContextVar[ReadLedger | None] = ContextVar("lake_read_ledger", default=None)


@contextmanager
def counting_reads() -> Iterator[ReadLedger]:
    """Count the lake reads made inside the block (this thread's)."""
    ledger = ReadLedger()
    token = _ledger.set(ledger)
    try:
        yield ledger
    finally:
        _ledger.reset(token)


def note_read(name: str, table: Any, dataset: Any) -> None:
    """Record a read of Delta table `name` (a `deltalake.DeltaTable`) through `dataset`, the pyarrow dataset of the
    files its filters kept (`storage.pruned_dataset`), if counting."""
    ledger = _ledger.get()
    if ledger is None:
        return
    actions = pa.table(table.get_add_actions(flatten=True))
    sizes = dict(zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist()))
    opened = [f.path for f in dataset.get_fragments()]
    reads = ledger.tables.setdefault(name, TableReads())
    reads.reads += 1
    reads.files += len(opened)
    reads.bytes += sum(sizes.get(p, 0) for p in opened)
    reads.files_in_table += len(sizes)
