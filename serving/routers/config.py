"""Organisation identity and configuration: whoami, get_config / set_config (never returning secrets), version."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Request
from fastapi.responses import JSONResponse

from reflexio_pipelines.storage import write_bytes
from reflexio_pipelines.learning.config import ConfigError, parse_extraction_config, resolve_extraction_config
from serving.deps import service

router = APIRouter()

API_VERSION = "v1"
SERVER_VERSION = "0.1.0"
#: Fields of the original's Config that are deployment settings here (environment / config file, where secrets
#: belong); `set_config` ignores them and says so, `get_config` reports the non-secret part.
DEPLOYMENT_FIELDS = ("storage_config", "storage_config_test", "api_key_config", "llm_config",
                     "skip_should_run_check", "enable_document_expansion")  # fmt: skip


@router.get("/meta/version")
def version() -> dict:
    return {"server_version": SERVER_VERSION, "api_version": API_VERSION, "min_client_version": "0.1.0"}


@router.get("/api/whoami")
def whoami(request: Request) -> dict:
    """The organisation the caller's key belongs to and where its data lives (path masked)."""
    state = service(request)
    return {"success": True, "org_id": state.org_id, "storage_type": "lake",
            "storage_label": f"lake:…/{state.lake.root.name}", "storage_configured": True,
            "message": ""}  # fmt: skip


@router.get("/api/get_config")
def get_config(request: Request) -> dict:
    """The effective extraction config plus the models in use. API keys are never returned."""
    state = service(request)
    config = resolve_extraction_config(state.lake.extraction_config(state.settings.extraction_config))
    llm = state.settings.llm
    return {
        **config.model_dump(mode="json", exclude_none=True),
        "storage_config": None,
        "llm_config": {"generation_model_name": llm.model or "builtin-rules", "should_run_model_name": llm.gate_model or None,
                       "embedding_model_name": state.settings.embedder.model},  # fmt: skip
    }


@router.post("/api/set_config")
def set_config(request: Request, body: dict[str, Any] = Body(...)):
    """Validate and store the organisation's extraction config; the next pipeline run uses it. Deployment fields
    (storage, API keys, models) are not settable here and are ignored, never stored."""
    state = service(request)
    ignored = [name for name in DEPLOYMENT_FIELDS if name in body]
    try:
        config = parse_extraction_config({k: v for k, v in body.items() if k not in DEPLOYMENT_FIELDS}, "set_config body")
    except ConfigError as exc:
        return JSONResponse(status_code=422, content={"success": False, "msg": str(exc)})
    write_bytes(state.lake.extraction_config_path, config.to_json().encode())
    note = f"; ignored deployment fields {ignored} (set them in the environment or config file)" if ignored else ""
    return {"success": True, "msg": f"config saved; the next pipeline run uses it{note}"}
