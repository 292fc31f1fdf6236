"""Request-scoped look-ups shared by the routers, as FastAPI dependencies (a route takes `state: ServiceDep`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from serving.state import ServiceState


def service(request: Request) -> ServiceState:
    """The service state (lake, writer, index, overlays) of the organisation this request is authenticated for
    (set by the app's guard middleware; open mode has the one `default` organisation)."""
    return request.app.state.tenants.state(request.state.org_id)


ServiceDep = Annotated[ServiceState, Depends(service)]
