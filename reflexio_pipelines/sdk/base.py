"""What the sync and async clients share: configuration from arguments and environment, and the retry loop's
single step (send once, settle the answer or decide how long to wait)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import ClassVar, TypeVar

import httpx

from reflexio_pipelines.sdk.endpoints import Call, RequestBuilder, settle
from reflexio_pipelines.sdk.errors import ReflexioError, error_from_transport
from reflexio_pipelines.sdk.retry import RetryPolicy

T = TypeVar("T")

DEFAULT_BASE_URL = "http://127.0.0.1:8081"
#: Calls that wait for a pipeline run (publish with wait=True, aggregation, export, erase) get this long.
DEFAULT_RUN_TIMEOUT = 900.0
USER_AGENT = "reflexio-lake-sdk/0.1"

log = logging.getLogger("reflexio_pipelines.sdk")


@dataclass(frozen=True)
class Backoff:
    """Wait this long, then send the call again."""

    seconds: float


class ClientBase:
    """Settings shared by `ReflexioClient` and `AsyncReflexioClient`.

    base_url: default `$REFLEXIO_API_URL`, else http://127.0.0.1:8081. api_key: default `$REFLEXIO_API_KEY`; sent
    as `Authorization: Bearer <key>`. timeout: seconds per attempt. max_retries: repeats of a transiently failed
    call (connection errors, timeouts, 429, 502/503/504), with exponential backoff and jitter.
    """

    #: httpx.Client or httpx.AsyncClient, set by the subclass.
    _http_class: ClassVar[type[httpx.Client] | type[httpx.AsyncClient]]

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        *,
        run_timeout: float = DEFAULT_RUN_TIMEOUT,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.base_url = (base_url or os.environ.get("REFLEXIO_API_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("REFLEXIO_API_KEY", "")
        self.timeout = timeout
        self.retry = retry or RetryPolicy(max_retries=max_retries)
        self._builder = RequestBuilder(run_timeout=max(run_timeout, timeout))
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        self._http = self._http_class(base_url=self.base_url, headers=headers, timeout=timeout)

    def _outcome(self, call: Call[T], attempt: int, response: httpx.Response | httpx.TransportError) -> T | Backoff:
        """The result of one attempt, or the seconds to wait before the next one; raises when giving up."""
        try:
            if isinstance(response, httpx.TransportError):
                raise error_from_transport(response, f"{self.base_url}{call.path}") from response
            return settle(call, response)
        except ReflexioError as error:
            wait = self.retry.delay(error, attempt, call.idempotent)
            if wait is None:
                raise
            log.info("%s %s failed (%s); retry %d in %.2fs", call.method, call.path, error.message, attempt + 1, wait)
            return Backoff(wait)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r})"
