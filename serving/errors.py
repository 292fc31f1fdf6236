"""The one shape of an error answer: a real HTTP status and `{"success": false, <key>: message}`.

`key` is `msg` or `message`, whichever the original's response model for that route carries, so its client (which
parses error bodies of 2xx-less answers the same way it parses successes) finds the text where it looks.
"""

from __future__ import annotations

from fastapi.responses import JSONResponse


def error(status_code: int, message: str, key: str = "msg") -> JSONResponse:
    """An error answer with `status_code` and `message` under `key`."""
    return JSONResponse(status_code=status_code, content={"success": False, key: message})


def not_found(what: str, key: str = "msg") -> JSONResponse:
    """404 for an id that does not exist in the caller's organisation."""
    return error(404, f"{what} not found", key)
