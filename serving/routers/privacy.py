"""Per-user data export and erasure: `POST /api/export_user_data`, `DELETE /api/erase_user_data`,
`GET /api/erasures`.

The lake logic lives in `reflexio_pipelines/privacy`; this router validates and runs it off the event loop, through
`serving/erasures.py`, which pauses the user's ingest for the erasure and brings what the service holds in memory in
line: buffered retrievals are flushed first (so they are erased with the rest), the index, control and curation
overlays are reloaded right after, so a search in the next request no longer finds the user. An unknown user is not
an error: export answers 200 with every table empty, erasure 200 with zero counts.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from reflexio_pipelines.privacy.erasure import erasure_requests
from reflexio_pipelines.privacy.export import as_json, as_parquet_zip, export_user
from serving import erasures
from serving.deps import ServiceDep
from serving.errors import error
from serving.models.privacy import (
    EraseUserDataRequest,
    EraseUserDataResponse,
    ErasuresResponse,
    ExportUserDataRequest,
    ExportUserDataResponse,
)

router = APIRouter()
log = logging.getLogger(__name__)


@router.post(
    "/api/export_user_data",
    response_model=ExportUserDataResponse,
    responses={
        200: {
            "description": "JSON, or a zip of Parquet files (`format: parquet`)",
            "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}},
        }
    },
)
async def export_user_data(body: ExportUserDataRequest, state: ServiceDep):
    """Every row the lake holds about the user, per table: JSON `{table: [rows]}` or a zip of `<table>.parquet`."""
    tables = await run_in_threadpool(export_user, state.lake, body.user_id)
    if body.format == "json":
        return JSONResponse({"success": True, "user_id": body.user_id, "tables": as_json(tables)})
    return Response(
        await run_in_threadpool(as_parquet_zip, tables),
        media_type="application/zip",
        headers={"Content-Disposition": 'attachment; filename="user_data.zip"'},
    )


@router.delete("/api/erase_user_data", response_model=EraseUserDataResponse)
async def erase_user_data(body: EraseUserDataRequest, state: ServiceDep):
    """Remove the user from the landing files, every table and its history, and the index; answers when done.
    Meanwhile the user's publishes answer 409 (publish again afterwards)."""
    try:
        result = await run_in_threadpool(erasures.erase, state, body.user_id)
    except Exception as exc:  # e.g. a lock held past its timeout or a full disk: the marker lets a retry finish it
        log.exception("erasure failed")
        return error(
            503,
            f"erasure interrupted ({type(exc).__name__}); retry the same request to complete it (a "
            "restart of the service resumes it too)",
            "message",
        )
    message = (
        f"erased {result.total} rows; index version {result.index_version} is being served"
        if result.total
        else "nothing of this user was left to erase"
    )
    return {
        "success": True,
        "message": message,
        "erased": result.erased,
        "redacted": result.redacted,
        "files_purged": result.files_purged,
        "index_version": result.index_version,
    }


@router.get("/api/erasures", response_model=ErasuresResponse)
def list_erasures(state: ServiceDep) -> dict:
    """Every erasure request of the organisation, oldest first, by its id (a salted hash: no user id): status
    (`in_progress` — running, or interrupted and resumed at the next start — or `completed`), times, rows erased."""
    return {"success": True, "erasures": erasure_requests(state.lake)}
