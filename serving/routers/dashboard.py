"""GET /dashboard: the impact dashboard, one page over the service's own JSON APIs.

The page (serving/static/dashboard.html) and its script and style sheet are served from this package and reference
nothing outside this origin: no CDN, no web fonts, charts are inline SVG drawn by the script. A Content-Security-
Policy header enforces that, so the page works on an offline machine and cannot leak requests elsewhere.

APIs it reads and writes (same origin): GET /api/impact_metrics, POST /api/get_dashboard_stats,
GET /api/llm_usage, POST /api/get_agent_playbooks, PUT /api/update_agent_playbook_status and GET
/api/quarantine.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from serving.errors import error

router = APIRouter()

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"

#: The only files served from STATIC_DIR, with their media types (nothing else under it is reachable).
ASSETS: dict[str, str] = {
    "dashboard.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
}

CSP = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)

HEADERS = {
    "Content-Security-Policy": CSP,
    "Cache-Control": "no-cache",  # small files; always revalidate so a deploy is seen at once
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _read(name: str) -> bytes:
    return (STATIC_DIR / name).read_bytes()


@router.get("/dashboard", include_in_schema=False, response_class=HTMLResponse)
def dashboard() -> Response:
    """The impact dashboard: success rate per agent version, shadow win rate, corrections, LLM usage per 1k turns,
    and the approval queue."""
    return Response(_read("dashboard.html"), media_type="text/html; charset=utf-8", headers=HEADERS)


@router.get(
    "/dashboard/static/{name}",
    include_in_schema=False,
    response_class=Response,
    responses={200: {"content": {media_type.split(";")[0]: {} for media_type in ASSETS.values()}}},
)
def dashboard_asset(name: str) -> Response:
    """The dashboard's script and style sheet."""
    media_type = ASSETS.get(name)
    if media_type is None:
        return error(404, f"no dashboard asset {name!r}")
    return Response(_read(name), media_type=media_type, headers=HEADERS)
