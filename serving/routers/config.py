"""Organisation identity and configuration: whoami, get_config / set_config (never returning secrets), my_config,
version.

`set_config(get_config())` through the original client is a no-op: the client serialises every field of its
Config, so the original's fields this pipeline has no counterpart for arrive at their defaults and are accepted
(learning/config.py), its deployment fields arrive as `get_config` reported them and are ignored, and the fields
the original's Config lacks (quiet periods) keep their stored values.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Request

from reflexio_pipelines.learning.config import ConfigError, ExtractionConfig
from reflexio_pipelines.learning.config_loading import parse_extraction_config, resolve_extraction_config
from reflexio_pipelines.learning.extract import describe_extractor
from reflexio_pipelines.storage import write_bytes
from serving.deps import service
from serving.errors import error
from serving.models.acks import MsgResponse
from serving.models.config import GetConfigResponse, MyConfigResponse, VersionResponse, WhoAmIResponse
from serving.state import ServiceState

router = APIRouter()

API_VERSION = "v1"
SERVER_VERSION = "0.1.0"
#: Fields of the original's Config that are deployment settings here (environment / config file, where secrets
#: belong); `set_config` ignores them (and says so when they differ from what `get_config` reports), never stores
#: them; `get_config` reports the non-secret part.
DEPLOYMENT_FIELDS = ("storage_config", "storage_config_test", "api_key_config", "llm_config")
#: Fields of this pipeline's config the original's Config does not have: its client never sends them, so a body
#: without them keeps the stored values instead of resetting them.
PIPELINE_ONLY_FIELDS = (
    "config_version",
    "session_quiet_period_seconds",
    "extraction_quiet_period_seconds",
    "holdout",
    "outcomes",
)


def _config(state: ServiceState) -> ExtractionConfig:
    """The extraction config in force for the organisation (stored through set_config, else the settings')."""
    return resolve_extraction_config(state.lake.extraction_config(state.settings.extraction_config))


def _reported_deployment(state: ServiceState) -> dict[str, Any]:
    """The deployment fields as get_config reports them: the models in use, never a key or a storage secret."""
    llm = state.settings.llm
    return {
        "storage_config": None,
        "llm_config": {
            "generation_model_name": llm.model or str(describe_extractor(llm)["name"]),
            "should_run_model_name": llm.gate_model or None,
            "embedding_model_name": state.settings.embedder.model,
        },
    }


def _unchanged(value: Any, reported: Any) -> bool:
    """Whether a deployment field's value says nothing new: unset, a default, or what get_config reported."""
    if value in (None, 0, "UNKNOWN", {}):  # storage_config_test arrives as 0 (StorageConfigTest.UNKNOWN)
        return True
    if isinstance(value, dict) and isinstance(reported, dict):
        return {k: v for k, v in value.items() if v is not None} == {k: v for k, v in reported.items() if v is not None}
    return value == reported


@router.get("/meta/version", response_model=VersionResponse)
def version() -> dict:
    """The server's version, its API version and the oldest client it serves."""
    return {"server_version": SERVER_VERSION, "api_version": API_VERSION, "min_client_version": "0.1.0"}


@router.get("/api/whoami", response_model=WhoAmIResponse)
def whoami(request: Request) -> dict:
    """The organisation the caller's key belongs to and where its data lives (path masked)."""
    state = service(request)
    return {
        "success": True,
        "org_id": state.org_id,
        "storage_type": "lake",
        "storage_label": f"lake:…/{state.lake.root.name}",
        "storage_configured": True,
        "message": "",
    }


@router.get("/api/my_config", response_model=MyConfigResponse)
def my_config(request: Request) -> MyConfigResponse:
    """Disabled, always: the original hands out the organisation's raw storage credentials here. The lake's
    location and credentials are deployment settings of this service and never leave it."""
    service(request)  # an unknown organisation still fails like every other call
    return MyConfigResponse(
        success=False,
        storage_type="lake",
        message=(
            "my_config is disabled: this service never returns storage credentials. The lake is deployment "
            "configuration (REFLEXIO_LAKE, docs/configuration.md); GET /api/whoami names the organisation and a masked "
            "storage label"
        ),
    )


@router.get("/api/get_config", response_model=GetConfigResponse)
def get_config(request: Request) -> dict:
    """The effective extraction config plus the models in use. API keys are never returned."""
    state = service(request)
    return {**_config(state).model_dump(mode="json", exclude_none=True), **_reported_deployment(state)}


@router.post("/api/set_config", response_model=MsgResponse)
def set_config(request: Request, body: dict[str, Any] = Body(...)):
    """Validate and store the organisation's extraction config; the next pipeline run uses it (nothing is saved
    when any field is invalid: 422 naming it). Deployment fields (storage, API keys, models) are not settable
    here and are never stored; the message names those the body tried to change."""
    state = service(request)
    reported = _reported_deployment(state)
    ignored = [name for name in DEPLOYMENT_FIELDS if name in body and not _unchanged(body[name], reported.get(name))]
    stored = _config(state).model_dump(mode="json", exclude_none=True)
    data = {k: v for k, v in body.items() if k not in DEPLOYMENT_FIELDS}
    data.update({k: stored[k] for k in PIPELINE_ONLY_FIELDS if k not in data and k in stored})
    try:
        config = parse_extraction_config(data, "set_config body")
    except ConfigError as exc:
        return error(422, str(exc))
    write_bytes(state.lake.extraction_config_path, config.to_json().encode())
    state.policy.refresh()  # the holdout and outcome settings apply to the very next search
    note = f"; ignored deployment fields {ignored} (set them in the environment or config file)" if ignored else ""
    return MsgResponse(success=True, msg=f"config saved; the next pipeline run uses it{note}")
