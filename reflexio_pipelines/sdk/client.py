"""`ReflexioClient`: the synchronous client (httpx)."""

from __future__ import annotations

import itertools
import time
from types import TracebackType
from typing import TypeVar

import httpx

from reflexio_pipelines.sdk.base import Backoff, ClientBase
from reflexio_pipelines.sdk.endpoints import Call, RequestBuilder, sync_method

T = TypeVar("T")


class ReflexioClient(ClientBase):
    """Synchronous client of the Reflexio-on-a-lake service. Use as a context manager, or call `close()`.

    with ReflexioClient() as client:
        client.publish("alice", [{"role": "user", "content": "Never deploy to us-east-1."}], wait=True)
        prompt_block = client.context("deploy the api", user_id="alice")
    """

    _http_class = httpx.Client
    _http: httpx.Client

    def _execute(self, call: Call[T]) -> T:
        for attempt in itertools.count():
            try:
                response: httpx.Response | httpx.TransportError = self._http.request(**call.request_kwargs())
            except httpx.TransportError as exc:
                response = exc
            outcome = self._outcome(call, attempt, response)
            if not isinstance(outcome, Backoff):
                return outcome
            time.sleep(outcome.seconds)
        raise AssertionError("unreachable")  # itertools.count() never ends

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> ReflexioClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    publish = sync_method(RequestBuilder.publish)
    search = sync_method(RequestBuilder.search)
    context = sync_method(RequestBuilder.context)
    get_profiles = sync_method(RequestBuilder.get_profiles)
    get_user_playbooks = sync_method(RequestBuilder.get_user_playbooks)
    get_agent_playbooks = sync_method(RequestBuilder.get_agent_playbooks)
    get_interactions = sync_method(RequestBuilder.get_interactions)
    get_all_profiles = sync_method(RequestBuilder.get_all_profiles)
    search_profiles = sync_method(RequestBuilder.search_profiles)
    search_user_playbooks = sync_method(RequestBuilder.search_user_playbooks)
    search_agent_playbooks = sync_method(RequestBuilder.search_agent_playbooks)
    add_user_profile = sync_method(RequestBuilder.add_user_profile)
    add_user_playbook = sync_method(RequestBuilder.add_user_playbook)
    add_agent_playbook = sync_method(RequestBuilder.add_agent_playbook)
    update_agent_playbook = sync_method(RequestBuilder.update_agent_playbook)
    delete_agent_playbook = sync_method(RequestBuilder.delete_agent_playbook)
    request = sync_method(RequestBuilder.request)
    set_agent_playbook_status = sync_method(RequestBuilder.set_agent_playbook_status)
    approve_agent_playbook = sync_method(RequestBuilder.approve_agent_playbook)
    reject_agent_playbook = sync_method(RequestBuilder.reject_agent_playbook)
    run_aggregation = sync_method(RequestBuilder.run_aggregation)
    get_operation_status = sync_method(RequestBuilder.get_operation_status)
    cancel_operation = sync_method(RequestBuilder.cancel_operation)
    export = sync_method(RequestBuilder.export)
    erase = sync_method(RequestBuilder.erase)
    erasures = sync_method(RequestBuilder.erasures)
    health = sync_method(RequestBuilder.health)
    whoami = sync_method(RequestBuilder.whoami)
