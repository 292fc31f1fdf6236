"""Request-scoped look-ups shared by the routers, as FastAPI dependencies (a route takes `state: ServiceDep`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from starlette.concurrency import run_in_threadpool

from serving.state import ServiceState


def state_of(request: Request) -> ServiceState:
    """The service state (lake, writer, index, overlays) of the organisation this request is authenticated for
    (set by the app's guard middleware; open mode has the one `default` organisation); created from the lake on the
    organisation's first request, so call it from a worker thread (a plain `def` route), never the event loop."""
    return request.app.state.tenants.state(request.state.org_id)


async def service(request: Request) -> ServiceState:
    """`state_of` as a dependency. A coroutine: as a plain function FastAPI ran it in the thread pool, one more hop
    between the event loop and a worker thread per request beside the route's own. Only an organisation's first
    request, which creates its state from the lake, takes the pool."""
    found = request.app.state.tenants.loaded(request.state.org_id)
    return found if found is not None else await run_in_threadpool(state_of, request)


ServiceDep = Annotated[ServiceState, Depends(service)]
