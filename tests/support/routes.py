"""The routes a FastAPI app serves, for the tests that walk every operation."""

from __future__ import annotations

from fastapi.routing import APIRoute


def api_routes(routes: list) -> list[APIRoute]:
    """Every APIRoute, looking inside included routers (FastAPI wraps each in an object holding the original)."""
    found = []
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            found.extend(api_routes(inner.routes))
        elif isinstance(route, APIRoute):
            found.append(route)
    return found
