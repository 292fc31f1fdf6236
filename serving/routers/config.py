"""Organisation identity and configuration: whoami, get_config / set_config / update_config (never returning
secrets), my_config, version.

Both generations of the original's client talk to this service: `get_config` answers in both of its config shapes
at once (learning/config_shapes.py; each client reads the fields it knows, so each reads back the shape it wrote),
and `set_config` / `update_config` take either. `set_config(get_config())` through either client is a no-op: the
client serialises every field of its Config, so the original's fields this pipeline has no counterpart for arrive at
their defaults and are accepted (learning/original_config.py), its deployment fields arrive as `get_config` reported
them and are ignored, the retrieval experiment fields arrive as reported and are left to their own routes, and what
the client's shape cannot say (this pipeline's own fields, further extractors of a kind) keeps its stored value.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends
from fastapi.responses import JSONResponse

from reflexio_pipelines.lake import experiments
from reflexio_pipelines.learning.config import ConfigError, ExtractionConfig
from reflexio_pipelines.learning.config_loading import parse_extraction_config, resolve_extraction_config
from reflexio_pipelines.learning.config_shapes import patched, reported, reported_idle_timeout, with_stored
from reflexio_pipelines.learning.extract import describe_extractor
from reflexio_pipelines.storage import write_bytes
from serving.deps import ServiceDep, service
from serving.errors import error
from serving.models.acks import MsgResponse
from serving.models.config import GetConfigResponse, MyConfigResponse, VersionResponse, WhoAmIResponse
from serving.state import ServiceState

router = APIRouter()
Config = Annotated[dict[str, Any], Body()]

API_VERSION = "v1"
SERVER_VERSION = "0.1.0"
#: Fields of the original's Config that are deployment settings here (environment / config file, where secrets
#: belong); `set_config` ignores them (and says so when they differ from what `get_config` reports), never stores
#: them; `get_config` reports the non-secret part.
DEPLOYMENT_FIELDS = ("storage_config", "storage_config_test", "api_key_config", "llm_config")
#: Owned by the retrieval experiment routes (serving/routers/experiments.py), as in the original: a config write
#: may repeat what get_config reported, never change it (409).
EXPERIMENT_FIELDS = ("retrieval_experiment_config", "retrieval_experiment_history")
EXPERIMENT_CONFLICT = "Retrieval experiments must be changed through the /api/retrieval_experiments lifecycle endpoints"


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


def _reported_experiments(state: ServiceState) -> dict[str, Any]:
    """The experiment fields as the original's Config holds them: the active one and every one started."""
    listing = experiments.listing(state.lake)
    active = listing["active_experiment"]
    return {
        "retrieval_experiment_config": (
            {k: active[k] for k in ("experiment_id", "holdout_percentage")} if active else None
        ),
        "retrieval_experiment_history": listing["experiments"],
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
def whoami(state: ServiceDep) -> dict:
    """The organisation the caller's key belongs to and where its data lives (path masked)."""
    return {
        "success": True,
        "org_id": state.org_id,
        "storage_type": "lake",
        "storage_label": f"lake:…/{state.lake.root.name}",
        "storage_configured": True,
        "message": "",
    }


# The organisation's state is looked up though unused: an unknown organisation still fails like every other call.
@router.get("/api/my_config", response_model=MyConfigResponse, dependencies=[Depends(service)])
def my_config() -> MyConfigResponse:
    """Disabled, always: the original hands out the organisation's raw storage credentials here. The lake's
    location and credentials are deployment settings of this service and never leave it."""
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
def get_config(state: ServiceDep) -> dict:
    """The effective extraction config in both of the original's shapes (batch_size and window_size, the lists of
    extractors and the singular fields), the experiment fields, and the models in use. API keys are never
    returned."""
    config = reported(_config(state).model_dump(mode="json", exclude_none=True))
    # The original's idle timeout is the quiet period in force (learning/config_shapes.py IDLE_NAMES).
    config["extraction_idle_timeout_seconds"] = _reported_idle_timeout(state)
    return {**config, **_reported_experiments(state), **_reported_deployment(state)}


def _reported_idle_timeout(state: ServiceState) -> int:
    return reported_idle_timeout(_config(state).quiet_period(bool(state.settings.llm.model.strip())))


def _without_echoed_idle_timeout(state: ServiceState, body: dict[str, Any]) -> dict[str, Any]:
    """A body holding the idle timeout get_config reported (an echoed get_config, its quiet period edited or not)
    without it: it says nothing new, like an unchanged deployment field, and taken as a setting it would turn the
    default quiet period (0 s for the built-in extractor, reported as 1) into an explicit 1 s."""
    if body.get("extraction_idle_timeout_seconds") == _reported_idle_timeout(state):
        return {k: v for k, v in body.items() if k != "extraction_idle_timeout_seconds"}
    return body


def _save(state: ServiceState, body: dict[str, Any], complete: Any, what: str) -> MsgResponse | JSONResponse:
    """Validate `complete(body without deployment and experiment fields, stored config)` and store it: nothing is
    saved when any field is invalid (422 naming it) or the body changes an experiment (409)."""
    reported_now = _reported_deployment(state)
    ignored = [n for n in DEPLOYMENT_FIELDS if n in body and not _unchanged(body[n], reported_now.get(n))]
    current = _reported_experiments(state)
    if any(name in body and body[name] != current[name] for name in EXPERIMENT_FIELDS):
        return error(409, EXPERIMENT_CONFLICT)
    body = _without_echoed_idle_timeout(state, body)
    data = {k: v for k, v in body.items() if k not in DEPLOYMENT_FIELDS and k not in EXPERIMENT_FIELDS}
    stored = _config(state).model_dump(mode="json", exclude_none=True)
    try:
        config = parse_extraction_config(complete(data, stored), f"{what} body")
    except ConfigError as exc:
        return error(422, str(exc))
    write_bytes(state.lake.extraction_config_path, config.to_json().encode())
    state.policy.refresh()  # the holdout and outcome settings apply to the very next search
    note = f"; ignored deployment fields {ignored} (set them in the environment or config file)" if ignored else ""
    return MsgResponse(success=True, msg=f"config saved; the next pipeline run uses it{note}")


@router.post("/api/set_config", response_model=MsgResponse)
def set_config(state: ServiceDep, body: Config) -> MsgResponse | JSONResponse:
    """Validate and store the organisation's whole extraction config, in either of the original's shapes; the next
    pipeline run uses it. Deployment fields (storage, API keys, models) are not settable here and are never stored;
    the message names those the body tried to change."""
    return _save(state, body, with_stored, "set_config")


@router.post("/api/update_config", response_model=MsgResponse)
def update_config(state: ServiceDep, body: Config) -> MsgResponse | JSONResponse:
    """The original's partial update: the body's top-level fields (either shape) replace the stored ones, nested
    objects wholesale (an extractor is sent whole, as in the original); everything else keeps its value."""
    return _save(state, body, patched, "update_config")
