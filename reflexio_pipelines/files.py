"""Small durable-file primitives shared by the lake, the index publisher and the model loader."""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TMP_PREFIX = ".tmp-"


def fsync_path(path: Path) -> None:
    """fsync a file or a directory (a directory so that renames and new entries in it are durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: Path) -> None:
    """fsync every file and directory under `root`."""
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            fsync_path(Path(dirpath) / name)
        fsync_path(Path(dirpath))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` so readers see the old file or the whole new one, never a torn one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f"{TMP_PREFIX}{uuid.uuid4().hex}-{path.name}"
    with removed_on_failure(tmp):
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    fsync_path(path.parent)


@contextmanager
def removed_on_failure(tmp: Path) -> Iterator[None]:
    """Delete the temporary file `tmp` if the block fails (a full disk, a failed fsync): a refused write leaves
    nothing behind, not even an empty file."""
    try:
        yield
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
