"""Retrieval experiments at the original's paths: `GET/POST /api/retrieval_experiments`,
`POST /api/retrieval_experiments/stop`, `GET /api/retrieval_experiments/{experiment_id}/results` — a named period
of this project's holdout (`lake/experiments.py`), results per arm with the lift and its 95 % interval."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from fastapi.responses import JSONResponse

from reflexio_pipelines.lake import experiments
from serving.deps import ServiceDep
from serving.errors import error, not_found
from serving.models.experiments import (
    RetrievalExperimentListResponse,
    RetrievalExperimentResultsResponse,
    StartRetrievalExperimentRequest,
    StopRetrievalExperimentRequest,
)

router = APIRouter()
CONFLICT = {409: {"description": "another experiment is active, the id was used before, or it is not active"}}


@router.get("/api/retrieval_experiments", response_model=RetrievalExperimentListResponse)
def list_retrieval_experiments(state: ServiceDep) -> dict[str, Any]:
    """The active experiment (if any) and every experiment started, oldest first."""
    return experiments.listing(state.lake)


@router.post("/api/retrieval_experiments", response_model=RetrievalExperimentListResponse, responses=CONFLICT)
def start_retrieval_experiment(
    body: StartRetrievalExperimentRequest, state: ServiceDep
) -> dict[str, Any] | JSONResponse:
    """Start the organisation's only active experiment: `holdout_percentage` % of users (per agent version, drawn
    as the holdout draws) get no learned context from search from the next request on."""
    try:
        answer = experiments.start(
            state.lake, state.settings.extraction_config, body.experiment_id, body.holdout_percentage
        )
    except experiments.ExperimentConflict as exc:
        return error(409, str(exc), "message")
    state.policy.refresh()  # the share applies to the very next search
    return answer


@router.post("/api/retrieval_experiments/stop", response_model=RetrievalExperimentListResponse, responses=CONFLICT)
def stop_retrieval_experiment(body: StopRetrievalExperimentRequest, state: ServiceDep) -> dict[str, Any] | JSONResponse:
    """Stop the active experiment and restore the holdout it replaced; its history and results stay."""
    try:
        answer = experiments.stop(state.lake, state.settings.extraction_config, body.experiment_id)
    except experiments.ExperimentConflict as exc:
        return error(409, str(exc), "message")
    state.policy.refresh()
    return answer


@router.get(
    "/api/retrieval_experiments/{experiment_id}/results",
    response_model=RetrievalExperimentResultsResponse,
    responses={404: {"description": "no experiment with this id ever ran"}},
)
def retrieval_experiment_results(
    state: ServiceDep, experiment_id: Annotated[str, Path(min_length=1, max_length=128)]
) -> dict[str, Any] | JSONResponse:
    """Per arm: users, sessions closed in the period, evaluated sessions, success rate (a client's reported outcome
    replaces the judge's), corrections, turns to resolution, escalations; the lift in percentage points with
    Newcombe's 95 % interval. Sessions count once the evaluation run has closed them (`session_outcomes`)."""
    answer = experiments.results(state.lake, experiment_id)
    return answer if answer is not None else not_found(f"retrieval experiment {experiment_id!r}", "message")
