"""The one shape of an error answer: a real HTTP status and `{"success": false, <key>: message}`.

`key` is `msg` or `message`, whichever the original's response model for that route carries, so its client (which
parses error bodies of 2xx-less answers the same way it parses successes) finds the text where it looks. Answers
that no route produced (unknown path, wrong method, Host not allowed, body too large, rate limit, an unexpected
exception) use `message`. Every error answer of the service is built here (`tests/test_api.py` walks the routes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi.responses import JSONResponse


def error(
    status_code: int,
    message: str,
    key: str = "msg",
    *,
    headers: Mapping[str, str] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> JSONResponse:
    """An error answer with `status_code` and `message` under `key`; `extra` adds fields (e.g. a 422's per-field
    `detail` list, which the SDK reads), `headers` e.g. `Retry-After`."""
    return JSONResponse(
        status_code=status_code, headers=dict(headers or {}), content={**(extra or {}), "success": False, key: message}
    )


def not_found(what: str, key: str = "msg") -> JSONResponse:
    """404 for an id that does not exist in the caller's organisation."""
    return error(404, f"{what} not found", key)
