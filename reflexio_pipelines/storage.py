"""Where lake bytes live: a local directory, or an object store (`s3://bucket/prefix`).

A lake root is a `pathlib.Path` for a local lake and a `upath.UPath` (fsspec; `s3fs` for S3) for an object store,
so code that only joins, lists, reads and writes paths is the same for both. What differs is kept here:

- durability: a local write goes to a temp file, is fsynced and renamed into place; an object PUT is already
  atomic (readers see the old object or the whole new one) and durable when it returns, so it is written once;
- Delta tables: delta-rs gets the URI plus storage options; it commits with S3 conditional writes (`If-None-Match`),
  so two writers can never both create the same table version, on one host or several;
- local working copies: tantivy and faiss need local files, so index versions are built in a local temp directory
  and uploaded, and readers download a version once into the cache directory (`REFLEXIO_CACHE_DIR`).

Credentials and the endpoint come from the standard AWS environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
`AWS_REGION`, `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`) or the instance's role; they are never logged or written.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, Union

import pyarrow as pa
import pyarrow.parquet as pq
from upath import UPath

from reflexio_pipelines.files import TMP_PREFIX, fsync_path, removed_on_failure
from reflexio_pipelines.files import atomic_write_bytes as _atomic_write_local

if TYPE_CHECKING:
    from typing_extensions import TypeIs  # typing.TypeIs from Python 3.13

#: A lake location: a local path, or a remote one (any UPath that is not a local `Path`).
LakePath = Union[Path, UPath]
T = TypeVar("T")

DEFAULT_CACHE_DIR = "~/.cache/reflexio-lake"


def lake_path(location: str | os.PathLike[str]) -> LakePath:
    """The lake location `location` names: `s3://…` (any fsspec URL) or a local directory (made absolute)."""
    text = os.fspath(location)
    if "://" in text and not text.startswith("file://"):
        # Listings must be fresh: the service and the pipeline add landing files and table versions all the time.
        return UPath(text.rstrip("/"), use_listings_cache=False)
    return Path(text.removeprefix("file://")).expanduser().resolve()


def is_remote(path: LakePath) -> TypeIs[UPath]:
    """True for an object-store location (no fsync, no rename, no local locks). For the type checker, the path is
    then a `UPath`, and a local `Path` otherwise."""
    return not isinstance(path, Path)


def cache_dir() -> Path:
    """The local directory for working copies of remote data (index versions) and for write locks."""
    return Path(os.environ.get("REFLEXIO_CACHE_DIR") or DEFAULT_CACHE_DIR).expanduser().resolve()


def local_state_dir(root: LakePath, kind: str) -> Path:
    """A local directory for `kind` (e.g. "locks", "indexes") belonging to the lake at `root`: inside a local lake,
    under the cache directory (one per lake URI) for a remote one."""
    if not is_remote(root):
        return root / f"_{kind}"
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:16]
    return cache_dir() / kind / digest


def write_bytes(path: LakePath, data: bytes) -> None:
    """Write `data` so readers see the old content or all of the new, never a torn file; durable on return."""
    if is_remote(path):
        path.write_bytes(data)
    else:
        _atomic_write_local(path, data)


def write_parquet(table: pa.Table, path: LakePath) -> None:
    """Write a zstd Parquet file atomically and durably (see `write_bytes`)."""
    if is_remote(path):
        sink = io.BytesIO()
        pq.write_table(table, sink, compression="zstd")
        path.write_bytes(sink.getvalue())
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f"{TMP_PREFIX}{uuid.uuid4().hex}.parquet"
    with removed_on_failure(tmp):
        with open(tmp, "wb") as fh:
            pq.write_table(table, fh, compression="zstd")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    fsync_path(path.parent)


def read_parquet(path: LakePath, **kwargs: Any) -> pa.Table:
    """Read a Parquet file from either kind of location (`kwargs` as for `pyarrow.parquet.read_table`)."""
    if is_remote(path):
        with path.open("rb") as fh:
            return pq.read_table(io.BytesIO(fh.read()), **kwargs)
    # One open file for the footer and the pages: given a path, Arrow takes the size from a listing and opens the
    # file after it, so a file renamed over in between (an erasure rewriting a landing file) was read at the old
    # size ("Page was smaller (2) than expected (346)", a 500 in tests/test_erasure_reads.py one run in four).
    with pa.OSFile(str(path), "rb") as source:
        return pq.read_table(source, **kwargs)


def vanished(exc: BaseException) -> bool:
    """Whether `exc` says a file a reader had listed was gone when it was opened (deleted in between)."""
    if isinstance(exc, FileNotFoundError):
        return True
    from deltalake.exceptions import DeltaError

    text = str(exc).lower()
    return isinstance(exc, (DeltaError, OSError)) and ("not found" in text or "no such file" in text)


#: How long a read keeps starting again while `busy` says the lake is being changed (an erasure in progress): an
#: erasure of a large lake takes minutes, and a read must wait for it to commit rather than fail; a bound still,
#: so a hung erasure cannot hang every reader.
BUSY_PATIENCE_S = 600.0


def read_vanishing(
    read: Callable[[], T],
    attempts: int = 5,
    busy: Callable[[], bool] | None = None,
    patience_s: float = BUSY_PATIENCE_S,
) -> T:
    """`read()`, done again from the start when a file it listed vanished before it was opened: up to `attempts`
    times, and for as long as `busy()` says a writer that deletes files (an erasure) is still at work (up to
    `patience_s`).

    Readers list files and then open them. An erasure or a vacuum in between deletes landing files and Delta data
    files that no longer hold live rows; reading again lists afresh and sees the lake after the change, so the
    answer is consistent (never half before and half after) and never an error. An erasure deletes file after file
    for as long as it runs, so a read racing it starts again until the erasure has committed, not for a fixed
    number of tries."""
    started = time.monotonic()
    attempt = 0
    while True:
        try:
            return read()
        except Exception as exc:
            if not vanished(exc):
                raise
            attempt += 1
            waiting = busy is not None and time.monotonic() - started < patience_s and busy()
            if attempt >= attempts and not waiting:
                raise
            time.sleep(min(0.05 * attempt, 0.25))  # the deleting writer is mid-way: give it a moment to go on


def remove_tree(path: LakePath) -> None:
    """Delete a directory (or every object under a prefix) and everything in it; missing is fine."""
    if is_remote(path):
        if path.exists():
            path.fs.rm(path.path, recursive=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def sync_dir(path: LakePath) -> None:
    """Make new entries of a local directory durable (object stores need nothing)."""
    if not is_remote(path) and path.exists():
        fsync_path(path)


def upload_tree(local: Path, remote: UPath, *, last: str | None = None) -> None:
    """Copy every file under `local` to the prefix `remote`; the file named `last` (relative) is uploaded after all
    the others, so its presence marks the copy complete."""
    files = sorted(p for p in local.rglob("*") if p.is_file())
    files.sort(key=lambda p: str(p.relative_to(local)) == last)
    for path in files:
        remote.fs.put_file(str(path), (remote / str(path.relative_to(local))).path)  # streamed, multipart if large


def download_tree(remote: UPath, local: Path) -> None:
    """Copy every object under the prefix `remote` into the local directory `local` unless it is there already,
    atomically: a reader sees the whole copy or none (two processes racing to download it both succeed)."""
    tmp = local.parent / f"{TMP_PREFIX}{uuid.uuid4().hex}"
    tmp.mkdir(parents=True)
    try:
        prefix = remote.path.rstrip("/") + "/"
        for key in remote.fs.find(remote.path):
            target = tmp / key[len(prefix) :]
            target.parent.mkdir(parents=True, exist_ok=True)
            remote.fs.get_file(key, str(target))
        os.rename(tmp, local)
    except OSError:
        if not local.exists():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def open_delta(path: LakePath) -> Any:
    """The Delta table at `path` (a `deltalake.DeltaTable`), wherever it lives."""
    from deltalake import DeltaTable

    return DeltaTable(delta_uri(path), storage_options=delta_options(path))


def pruned_dataset(table: Any, filters: list[tuple] | None) -> Any:
    """A pyarrow dataset of the files of Delta `table` that can hold rows matching DNF `filters` (all files without).

    Files are pruned by partition values and min/max statistics while delta-rs replays the log, before a fragment
    exists for any of them: `to_pyarrow_table(filters=...)` made a fragment, with its statistics expression, for
    every file and pruned afterwards, ~40 ms per read of a 100-window table even when one window matched (~2 ms
    now). Rows are not filtered here: `row_filter` does that as the dataset is read."""
    return table.to_pyarrow_dataset(file_pruning_predicate=filters or None)


def row_filter(filters: list[tuple] | None) -> Any:
    """DNF `filters` as the pyarrow expression that keeps exactly the matching rows (None: every row)."""
    from pyarrow.parquet import filters_to_expression

    return filters_to_expression(filters) if filters else None


def read_delta(table: Any, filters: list[tuple] | None, columns: list[str] | None = None) -> pa.Table:
    """The rows of Delta `table` matching DNF `filters`, optionally only `columns`."""
    return pruned_dataset(table, filters).to_table(columns=columns, filter=row_filter(filters))


def delta_uri(path: LakePath) -> str:
    """The table location as delta-rs takes it."""
    return str(path)


def delta_options(path: LakePath) -> dict[str, str] | None:
    """delta-rs storage options for a table at `path` (None for a local table).

    delta-rs reads credentials and the region from the environment itself; what it does not infer is that a plain
    `http://` endpoint (a private S3-compatible server) is allowed.
    """
    if not is_remote(path):
        return None
    options: dict[str, str] = {}
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        options["AWS_ENDPOINT_URL"] = endpoint
        if endpoint.startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
    return options
