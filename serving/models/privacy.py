"""Per-user export and erasure."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from serving.models.fields import CleanModel, UserId


class ExportUserDataRequest(CleanModel):
    """POST /api/export_user_data body."""

    user_id: UserId
    format: Literal["json", "parquet"] = "json"


class EraseUserDataRequest(CleanModel):
    """DELETE /api/erase_user_data body."""

    user_id: UserId


class ExportUserDataResponse(BaseModel):
    """POST /api/export_user_data with `format: json`: every row the lake holds about the user, per table."""

    success: bool
    user_id: str
    tables: dict[str, list[dict[str, Any]]]


class EraseUserDataResponse(BaseModel):
    """DELETE /api/erase_user_data: rows erased and redacted per table, history files purged, the index served."""

    success: bool
    message: str
    erased: dict[str, int]
    redacted: dict[str, int]
    files_purged: int
    index_version: str | None


class ErasureRequest(BaseModel):
    """One erasure request, by its id (a salted hash: no user id)."""

    erasure_id: str
    status: str | None
    started_at: int | None
    completed_at: int | None
    erased: dict[str, int]


class ErasuresResponse(BaseModel):
    """GET /api/erasures."""

    success: bool
    erasures: list[ErasureRequest]
