"""GET /api/quarantine: the files moved aside because they could not be read."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class QuarantinedFile(BaseModel):
    """One row of the lake's `quarantine` table (reflexio_pipelines/lake/quarantine.py)."""

    quarantined_at_us: int
    kind: Literal["landing", "table"]
    table_name: str | None = None
    original_path: str
    quarantine_path: str
    size_bytes: int
    sha256: str
    error: str
    status: Literal["quarantined", "erased"]
    erased_at_us: int | None = None


class QuarantineResponse(BaseModel):
    success: bool = True
    files: list[QuarantinedFile]
