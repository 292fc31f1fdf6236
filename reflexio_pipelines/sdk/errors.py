"""The SDK's exceptions: one base class, one subclass per way a call can fail, and the mapping from a response."""

from __future__ import annotations

from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

import httpx


class ReflexioError(Exception):
    """Base of every error the SDK raises. `status_code` is None when no HTTP response was received."""

    def __init__(self, message: str, *, status_code: int | None = None, body: Any = None, url: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.body = body
        self.url = url


class APIConnectionError(ReflexioError):
    """No HTTP answer: the service could not be reached, or the connection broke before it answered.

    `request_sent` is False when the request certainly never reached the service (connection refused, connect
    timeout), so even a non-idempotent call may be repeated safely.
    """

    def __init__(self, message: str, *, request_sent: bool = True, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.request_sent = request_sent


class APITimeoutError(APIConnectionError):
    """No answer within the timeout. The request may or may not have been processed."""


class AuthenticationError(ReflexioError):
    """401 or 403: no API key, a wrong one, or one without access to this resource."""


class NotFoundError(ReflexioError):
    """404: the path or the addressed item does not exist."""


class ConflictError(ReflexioError):
    """409: the operation conflicts with the current state (e.g. a rerun already in progress)."""


class ValidationError(ReflexioError):
    """422 (or 400/413): the request was rejected as invalid. `message` names the field; `errors` has the details."""

    def __init__(self, message: str, *, errors: list[dict[str, Any]] | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.errors = errors or []


class RateLimitError(ReflexioError):
    """429: too many requests. `retry_after` is the server's hint in seconds, if it gave one."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class ServerError(ReflexioError):
    """5xx: the service failed or is temporarily unavailable."""


class OperationFailedError(ReflexioError):
    """The service answered 2xx but with `success: false` (the original API reports many failures this way)."""


def _message(body: Any, fallback: str) -> str:
    if isinstance(body, dict):
        for key in ("message", "msg", "detail"):
            value = body.get(key)
            if isinstance(value, str) and value:
                return value
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return fallback


def _body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return max(0.0, (moment - datetime.now(timezone.utc)).total_seconds())


def error_from_response(response: httpx.Response) -> ReflexioError:
    """The exception for an HTTP error response (status >= 400), carrying the server's message."""
    status = response.status_code
    body = _body(response)
    url = str(response.request.url) if response.request is not None else ""
    message = _message(body, f"HTTP {status} from {url}")
    common: dict[str, Any] = {"status_code": status, "body": body, "url": url}
    if status in (401, 403):
        return AuthenticationError(message, **common)
    if status == 404:
        if body == {"detail": "Not Found"}:  # FastAPI's answer for an unknown path, not for a missing item
            message = f"{response.request.method} {response.request.url.path} does not exist on this service"
        return NotFoundError(message, **common)
    if status == 409:
        return ConflictError(message, **common)
    if status in (400, 413, 422):
        details = body.get("detail") if isinstance(body, dict) else None
        return ValidationError(message, errors=details if isinstance(details, list) else None, **common)
    if status == 429:
        return RateLimitError(message, retry_after=parse_retry_after(response.headers.get("retry-after")), **common)
    if status >= 500:
        return ServerError(message, **common)
    return ReflexioError(message, **common)


def error_from_transport(exc: httpx.TransportError, url: str) -> APIConnectionError:
    """The exception for a request that got no HTTP response."""
    sent = not isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout))
    if isinstance(exc, httpx.TimeoutException):
        return APITimeoutError(
            f"no answer from {url} within the timeout ({type(exc).__name__})", url=url, request_sent=sent
        )
    return APIConnectionError(f"cannot reach {url}: {exc or type(exc).__name__}", url=url, request_sent=sent)
