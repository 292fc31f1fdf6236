"""create_app(): the FastAPI application with its routers and the lifespan that owns the service state."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from reflexio_pipelines.settings import Settings, load_settings
from serving import hosts
from serving.bodylimit import BodySizeLimit
from serving.errors import error
from serving.guard import KeyGuard
from serving.ratelimit import RateLimiter
from serving.routers import (
    admin,
    aggregation_operations,
    config,
    curation,
    dashboard,
    evaluation,
    evaluation_jobs,
    evaluation_results,
    experiments,
    health,
    lifecycle,
    not_enabled,
    playbooks,
    privacy,
    provenance,
    publish,
    quarantine,
    reads,
    review,
    search,
    sessions,
    shadow_comparisons,
    user_data,
)
from serving.state import Launcher
from serving.tenancy import DEFAULT_ORG, Tenants

MAX_BODY_BYTES = 8 * 1024 * 1024

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None, launcher: Launcher | None = None) -> FastAPI:
    """The service for `settings` (default: config file + environment)."""
    settings = settings or load_settings()
    tenants = Tenants(settings, launcher)
    limiter = RateLimiter()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        tenants.start()
        try:
            yield
        finally:
            tenants.close()

    app = FastAPI(title="Reflexio on a lake", version="0.1.0", lifespan=lifespan)
    app.state.tenants = tenants
    # Open mode's one organisation, created up front (tests and the dashboard reach it directly).
    app.state.svc = None if tenants.keyed else tenants.state(DEFAULT_ORG)
    # Matched in order, one path pattern at a time: the agents' hot paths first (publish, the searches and reads,
    # ~1 ms of route matching a request otherwise behind the 20 other routers).
    app.include_router(health.router)
    app.include_router(publish.router)
    app.include_router(search.router)
    app.include_router(reads.router)
    app.include_router(lifecycle.router)
    app.include_router(playbooks.router)
    app.include_router(evaluation.router)
    app.include_router(dashboard.router)
    app.include_router(privacy.router)
    app.include_router(curation.router)
    app.include_router(config.router)
    app.include_router(sessions.router)
    app.include_router(aggregation_operations.router)
    app.include_router(user_data.router)
    app.include_router(experiments.router)
    app.include_router(evaluation_results.router)
    app.include_router(evaluation_jobs.router)
    app.include_router(admin.router)
    app.include_router(review.router)
    app.include_router(provenance.router)
    app.include_router(shadow_comparisons.router)
    app.include_router(not_enabled.router)
    app.include_router(quarantine.router)

    app.add_middleware(KeyGuard, tenants=tenants, limiter=limiter)
    app.add_middleware(BodySizeLimit, max_bytes=MAX_BODY_BYTES)  # runs before the guard
    allowed = hosts.allowed_hosts_for(tenants.keyed, settings.allowed_hosts)
    if allowed is not None:  # outermost: a request from a rebinding page is refused before its body is read
        app.add_middleware(hosts.HostAllowList, allowed_hosts=allowed)
    _error_handlers(app)
    return app


def _error_handlers(app: FastAPI) -> None:
    """Every error FastAPI or Starlette would answer themselves (`{"detail": ...}` or plain text) in the service's
    one error shape instead."""

    @app.exception_handler(lifecycle.OperationFailed)
    async def operation_failed(request: Request, exc: lifecycle.OperationFailed) -> JSONResponse:
        return error(503, f"lifecycle run failed ({exc}); see the Dagster UI, then retry", "message")

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        summary = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors)
        # `detail` keeps the per-field list (the SDK's ValidationError.errors); the message is the summary
        return error(422, summary, "message", extra={"detail": errors})

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """Unknown paths (404), wrong methods (405, with `Allow`) and any HTTPException a dependency raises."""
        method, path = request.method, request.url.path
        if exc.status_code == 404 and exc.detail == "Not Found":
            message = f"{method} {path} does not exist on this service (see /docs)"
        elif exc.status_code == 405:
            allow = (exc.headers or {}).get("Allow") or (exc.headers or {}).get("allow") or ""
            message = f"{method} is not allowed on {path}" + (f"; use {allow}" if allow else "")
        else:
            message = str(exc.detail)
        return error(exc.status_code, message, "message", headers=exc.headers)

    @app.exception_handler(Exception)
    async def server_error(request: Request, exc: Exception) -> JSONResponse:
        """A bug: logged with its traceback by Starlette; the caller gets the shape, never the exception's text."""
        log.error("unhandled %s in %s %s", type(exc).__name__, request.method, request.url.path)
        return error(500, "internal error; the service logged it", "message")
