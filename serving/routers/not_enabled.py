"""Features of the original that are hosted-only or off by default there, answered in the original's shape for a
service where they are not enabled (docs/api.md):

- Pending tool calls (`/api/pending_tool_calls`): the original's extractor may ask a human a question and park the
  window until it is answered. This service's extractors never ask, so there are none: the list is empty and every
  id is the original's 404 "Pending tool call not found".
- Braintrust import (`/api/braintrust/*`): a hosted connector of the original. Status says not connected; connecting,
  choosing projects and syncing are refused with 404 naming the feature; disconnecting has nothing to remove.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query
from fastapi.responses import JSONResponse

from serving.deps import ServiceDep
from serving.errors import error
from serving.models.acks import MessageResponse, MsgResponse
from serving.models.not_enabled import BraintrustStatusResponse, PendingToolCallListResponse, PendingToolCallResponse

router = APIRouter()
CallId = Annotated[str, Path(min_length=1, max_length=256)]
NOT_FOUND = {404: {"description": "no such pending tool call (this service never creates one)"}}
BRAINTRUST = "Braintrust import is not enabled on this service (a hosted feature of the original)"


def _no_such_call() -> JSONResponse:
    return error(404, "Pending tool call not found", "message")


@router.get("/api/pending_tool_calls", response_model=PendingToolCallListResponse)
def list_pending_tool_calls(
    state: ServiceDep,
    status: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1)] = 100,
) -> PendingToolCallListResponse:
    """Always empty: no extractor of this service parks a window on a human's answer."""
    return PendingToolCallListResponse(pending_tool_calls=[])


@router.get(
    "/api/pending_tool_calls/{pending_tool_call_id}", responses=NOT_FOUND, response_model=PendingToolCallResponse
)
def get_pending_tool_call(state: ServiceDep, pending_tool_call_id: CallId) -> JSONResponse:
    return _no_such_call()


@router.post(
    "/api/pending_tool_calls/{pending_tool_call_id}/resolve",
    responses=NOT_FOUND,
    response_model=PendingToolCallResponse,
)
def resolve_pending_tool_call(
    state: ServiceDep, pending_tool_call_id: CallId, body: Annotated[dict[str, Any], Body()]
) -> JSONResponse:
    return _no_such_call()


@router.patch(
    "/api/pending_tool_calls/{pending_tool_call_id}/answer", responses=NOT_FOUND, response_model=PendingToolCallResponse
)
def update_pending_tool_call_answer(
    state: ServiceDep, pending_tool_call_id: CallId, body: Annotated[dict[str, Any], Body()]
) -> JSONResponse:
    return _no_such_call()


@router.post(
    "/api/pending_tool_calls/{pending_tool_call_id}/not_applicable",
    responses=NOT_FOUND,
    response_model=PendingToolCallResponse,
)
def mark_pending_tool_call_not_applicable(state: ServiceDep, pending_tool_call_id: CallId) -> JSONResponse:
    return _no_such_call()


@router.post(
    "/api/pending_tool_calls/{pending_tool_call_id}/cancel", responses=NOT_FOUND, response_model=PendingToolCallResponse
)
def cancel_pending_tool_call(state: ServiceDep, pending_tool_call_id: CallId) -> JSONResponse:
    return _no_such_call()


@router.get("/api/braintrust/status", response_model=BraintrustStatusResponse, response_model_exclude_none=True)
def braintrust_status(state: ServiceDep) -> BraintrustStatusResponse:
    return BraintrustStatusResponse(connected=False, last_error=BRAINTRUST)


@router.post("/api/braintrust/connect", responses={404: {"description": BRAINTRUST}}, response_model=MsgResponse)
@router.post(
    "/api/braintrust/select_projects", responses={404: {"description": BRAINTRUST}}, response_model=MsgResponse
)
@router.post("/api/braintrust/sync", responses={404: {"description": BRAINTRUST}}, response_model=MsgResponse)
def braintrust_refused(state: ServiceDep) -> JSONResponse:
    return error(404, BRAINTRUST, "message")


@router.delete("/api/braintrust/connection", response_model=MessageResponse)
def braintrust_disconnect(state: ServiceDep) -> MessageResponse:
    return MessageResponse(success=True, message="no Braintrust connection to remove")
