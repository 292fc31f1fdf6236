"""create_app(): the FastAPI application with its routers and the lifespan that owns the service state."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from reflexio_pipelines.settings import Settings, load_settings
from serving.routers import dashboard, evaluation, health, lifecycle, playbooks, privacy, publish, search
from serving.state import Launcher, ServiceState

MAX_BODY_BYTES = 8 * 1024 * 1024

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None, launcher: Launcher | None = None) -> FastAPI:
    """The service for `settings` (default: config file + environment)."""
    settings = settings or load_settings()
    state = ServiceState.create(settings, launcher)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        state.start()
        try:
            yield
        finally:
            state.close()

    app = FastAPI(title="Reflexio on a lake", version="0.1.0", lifespan=lifespan)
    app.state.svc = state
    app.include_router(health.router)
    app.include_router(publish.router)
    app.include_router(search.router)
    app.include_router(lifecycle.router)
    app.include_router(playbooks.router)
    app.include_router(evaluation.router)
    app.include_router(dashboard.router)
    app.include_router(privacy.router)

    @app.middleware("http")
    async def limit_body_size(request: Request, call_next):
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            return JSONResponse(
                status_code=413,
                content={"success": False, "message": f"request body larger than {MAX_BODY_BYTES} bytes"},
            )
        return await call_next(request)

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
