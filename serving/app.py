"""create_app(): the FastAPI application with its routers and the lifespan that owns the service state."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from reflexio_pipelines.settings import Settings, load_settings
from serving.routers import (
    config,
    curation,
    dashboard,
    evaluation,
    health,
    lifecycle,
    playbooks,
    privacy,
    publish,
    reads,
    search,
)
from serving.autolearn import AutoLearner
from serving.bodylimit import BodySizeLimit
from serving.ratelimit import RateLimiter, route_class
from serving.state import Launcher
from serving.tenancy import DEFAULT_ORG, Tenants

MAX_BODY_BYTES = 8 * 1024 * 1024

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None, launcher: Launcher | None = None) -> FastAPI:
    """The service for `settings` (default: config file + environment)."""
    settings = settings or load_settings()
    tenants = Tenants(settings, launcher)
    limiter = RateLimiter()
    learner = AutoLearner(tenants, settings.org_learn_interval_s)
    learn = tenants.keyed and settings.org_learn_interval_s > 0

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        tenants.start()
        if learn:
            learner.start()
        try:
            yield
        finally:
            learner.close()
            tenants.close()

    app = FastAPI(title="Reflexio on a lake", version="0.1.0", lifespan=lifespan)
    app.state.tenants = tenants
    app.state.learner = learner
    # Open mode's one organisation, created up front (tests and the dashboard reach it directly).
    app.state.svc = None if tenants.keyed else tenants.state(DEFAULT_ORG)
    app.include_router(health.router)
    app.include_router(publish.router)
    app.include_router(search.router)
    app.include_router(lifecycle.router)
    app.include_router(playbooks.router)
    app.include_router(evaluation.router)
    app.include_router(dashboard.router)
    app.include_router(privacy.router)
    app.include_router(reads.router)
    app.include_router(curation.router)
    app.include_router(config.router)

    @app.middleware("http")
    async def guard(request: Request, call_next):
        """(Keyed mode, /api/ paths) the caller's key and its rate limit, before any handler."""
        request.state.org_id = DEFAULT_ORG
        if tenants.keyed and request.url.path.startswith("/api/"):
            scheme, _, token = request.headers.get("authorization", "").partition(" ")
            key = tenants.keys.verify(token.strip()) if scheme.lower() == "bearer" else None
            if key is None:
                return JSONResponse(status_code=401, headers={"WWW-Authenticate": "Bearer"}, content={
                    "success": False, "message": "missing or invalid API key: send 'Authorization: Bearer <key>'"})  # fmt: skip
            cls = route_class(request.url.path)
            wait = limiter.allow(f"{key.key_id}:{cls}", key.limit(cls))
            if wait is not None:
                return JSONResponse(status_code=429, headers={"Retry-After": str(max(1, round(wait)))}, content={
                    "success": False, "message": f"rate limit of {key.limit(cls)} {cls} requests per minute "
                                                 f"reached; retry in {wait:.1f} s"})  # fmt: skip
            request.state.org_id = key.org_id
        return await call_next(request)

    app.add_middleware(BodySizeLimit, max_bytes=MAX_BODY_BYTES)  # outermost: runs before the guard

    @app.exception_handler(lifecycle.OperationFailed)
    async def operation_failed(request: Request, exc: lifecycle.OperationFailed) -> JSONResponse:
        return JSONResponse(status_code=503, content={"success": False,
                                                      "message": f"lifecycle run failed ({exc}); see the Dagster UI, "
                                                                 "then retry"})  # fmt: skip

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]}
            for e in exc.errors()
        ]
        summary = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors)
        return JSONResponse(status_code=422, content={"success": False, "message": summary, "detail": errors})

    return app
