"""Organisation identity and configuration, and the service's version."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class MyConfigResponse(BaseModel):
    """GET /api/my_config: always `success: false` here (the original hands out storage credentials)."""

    success: bool
    storage_config: dict[str, Any] | None = None
    storage_type: str | None = None
    message: str = ""


class GetConfigResponse(BaseModel):
    """GET /api/get_config: the extraction config in force (the fields of `reflexio_pipelines/learning/config.py`,
    unset ones left out) and the deployment fields as reported, never a secret."""

    model_config = ConfigDict(extra="allow")  # the extraction config's fields, whatever its version holds
    storage_config: None
    llm_config: dict[str, Any]


class WhoAmIResponse(BaseModel):
    """GET /api/whoami."""

    success: bool
    org_id: str
    storage_type: str
    storage_label: str
    storage_configured: bool
    message: str


class VersionResponse(BaseModel):
    """GET /meta/version."""

    server_version: str
    api_version: str
    min_client_version: str
