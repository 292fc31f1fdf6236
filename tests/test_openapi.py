"""The OpenAPI document describes every answer, and routers stay independent of each other."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from fastapi.responses import JSONResponse
from pydantic import BaseModel

from reflexio_pipelines.settings import Settings
from serving.app import create_app
from tests.support.routes import api_routes

ROUTERS = Path(__file__).resolve().parent.parent / "serving" / "routers"


def test_every_documented_operation_has_a_response_schema(tmp_path: Path) -> None:
    document = create_app(Settings(lake=str(tmp_path / "lake"))).openapi()
    operations = [(method.upper(), path, op) for path, ops in document["paths"].items() for method, op in ops.items()]
    undescribed = [
        f"{method} {path}"
        for method, path, op in operations
        if not any(
            code.startswith("2") and any(media.get("schema") for media in answer.get("content", {}).values())
            for code, answer in op["responses"].items()
        )
    ]
    assert len(operations) > 60
    assert not undescribed, undescribed


def test_every_route_declares_its_response(tmp_path: Path) -> None:
    """A response model for JSON answers, a response class for the others (pages, files): also on routes the
    document leaves out."""
    routes = api_routes(create_app(Settings(lake=str(tmp_path / "lake"))).routes)
    # FastAPI wraps the default response class (JSONResponse) in a placeholder holding it as `value`
    json_routes = [r for r in routes if issubclass(getattr(r.response_class, "value", r.response_class), JSONResponse)]
    undeclared = [
        route.path
        for route in json_routes
        if not (inspect.isclass(route.response_model) and issubclass(route.response_model, BaseModel))
    ]
    assert len(routes) > 60 and len(json_routes) < len(routes)
    assert not undeclared, undeclared


def _imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, and every name it imports from a module as if it were one (`from a import b`
    may import the module `a.b`); relative imports resolved against serving.routers."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(filter(None, ["serving.routers" if node.level else None, node.module]))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def test_no_router_imports_another_router() -> None:
    routers = {f"serving.routers.{p.stem}" for p in ROUTERS.glob("*.py") if p.stem != "__init__"}
    assert len(routers) > 5
    crossing = {
        p.stem: sorted(_imported_modules(p) & (routers - {f"serving.routers.{p.stem}"})) for p in ROUTERS.glob("*.py")
    }
    assert not {name: found for name, found in crossing.items() if found}
