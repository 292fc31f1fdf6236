"""`AsyncReflexioClient`: the asyncio client (httpx.AsyncClient), same methods as `ReflexioClient`, awaitable."""

from __future__ import annotations

import asyncio
import itertools
from types import TracebackType
from typing import TypeVar

import httpx

from reflexio_pipelines.sdk.base import Backoff, ClientBase
from reflexio_pipelines.sdk.endpoints import Call, RequestBuilder, async_method

T = TypeVar("T")


class AsyncReflexioClient(ClientBase):
    """Asynchronous client. Use `async with AsyncReflexioClient() as client:`, or `await client.aclose()`."""

    _http_class = httpx.AsyncClient
    _http: httpx.AsyncClient

    async def _execute(self, call: Call[T]) -> T:
        for attempt in itertools.count():
            try:
                response: httpx.Response | httpx.TransportError = await self._http.request(**call.request_kwargs())
            except httpx.TransportError as exc:
                response = exc
            outcome = self._outcome(call, attempt, response)
            if not isinstance(outcome, Backoff):
                return outcome
            await asyncio.sleep(outcome.seconds)
        raise AssertionError("unreachable")  # itertools.count() never ends

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncReflexioClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    publish = async_method(RequestBuilder.publish)
    search = async_method(RequestBuilder.search)
    context = async_method(RequestBuilder.context)
    get_profiles = async_method(RequestBuilder.get_profiles)
    get_user_playbooks = async_method(RequestBuilder.get_user_playbooks)
    get_agent_playbooks = async_method(RequestBuilder.get_agent_playbooks)
    get_interactions = async_method(RequestBuilder.get_interactions)
    get_all_profiles = async_method(RequestBuilder.get_all_profiles)
    search_profiles = async_method(RequestBuilder.search_profiles)
    search_user_playbooks = async_method(RequestBuilder.search_user_playbooks)
    search_agent_playbooks = async_method(RequestBuilder.search_agent_playbooks)
    add_user_profile = async_method(RequestBuilder.add_user_profile)
    add_user_playbook = async_method(RequestBuilder.add_user_playbook)
    add_agent_playbook = async_method(RequestBuilder.add_agent_playbook)
    update_agent_playbook = async_method(RequestBuilder.update_agent_playbook)
    delete_agent_playbook = async_method(RequestBuilder.delete_agent_playbook)
    request = async_method(RequestBuilder.request)
    set_agent_playbook_status = async_method(RequestBuilder.set_agent_playbook_status)
    approve_agent_playbook = async_method(RequestBuilder.approve_agent_playbook)
    reject_agent_playbook = async_method(RequestBuilder.reject_agent_playbook)
    run_aggregation = async_method(RequestBuilder.run_aggregation)
    get_operation_status = async_method(RequestBuilder.get_operation_status)
    cancel_operation = async_method(RequestBuilder.cancel_operation)
    export = async_method(RequestBuilder.export)
    erase = async_method(RequestBuilder.erase)
    erasures = async_method(RequestBuilder.erasures)
    health = async_method(RequestBuilder.health)
    whoami = async_method(RequestBuilder.whoami)
