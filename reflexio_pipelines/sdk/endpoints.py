"""Every REST call the SDK makes, described once: path, body, headers, retry safety and how to read the answer.

The sync and async clients differ only in how they send a `Call` (see `client.py`, `aclient.py`); their public
methods are these builders bound by `sync_method` / `async_method`, so a request is never built in two places.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

import httpx
from pydantic import BaseModel

from reflexio_pipelines.sdk.context import render_context
from reflexio_pipelines.sdk.errors import OperationFailedError, ReflexioError, error_from_response
from reflexio_pipelines.sdk.models import (
    Ack,
    AgentPlaybook,
    AggregationResult,
    CancelResult,
    EraseResult,
    Erasures,
    ExportFormat,
    Health,
    Interaction,
    InteractionData,
    OperationStatus,
    PlaybookStatus,
    Profile,
    PublishResult,
    SearchMode,
    SearchResult,
    StatusUpdateResult,
    UserPlaybook,
    WhoAmI,
)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
P = ParamSpec("P")


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request, ready to send (and to send again on a retry, unchanged — idempotency key included)."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    json: Any = None
    params: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    #: Repeating it cannot apply it twice (reads, PUT/DELETE, publishes carrying an Idempotency-Key).
    idempotent: bool = True
    #: Seconds; None = the client's default timeout.
    timeout: float | None = None

    def request_kwargs(self) -> dict[str, Any]:
        """Arguments for `httpx.Client.request` / `httpx.AsyncClient.request`."""
        kwargs: dict[str, Any] = {"method": self.method, "url": self.path, "headers": self.headers}
        if self.json is not None:
            kwargs["json"] = self.json
        if self.params:
            kwargs["params"] = self.params
        if self.timeout is not None:
            kwargs["timeout"] = self.timeout
        return kwargs


def settle(call: Call[T], response: httpx.Response) -> T:
    """The call's result from the service's answer, or the ReflexioError it amounts to."""
    if response.status_code >= 400:
        raise error_from_response(response)
    if "json" in response.headers.get("content-type", ""):
        body = response.json()
        if isinstance(body, dict) and body.get("success") is False:
            message = body.get("message") or body.get("msg") or f"{call.method} {call.path} did not succeed"
            raise OperationFailedError(message, status_code=response.status_code, body=body, url=str(response.url))
    try:
        return call.parse(response)
    except ValueError as exc:  # not JSON, or not the expected shape (pydantic's ValidationError is a ValueError)
        raise ReflexioError(
            f"unexpected answer from {response.url} (HTTP {response.status_code}): {exc}",
            status_code=response.status_code,
            body=response.text[:500],
            url=str(response.url),
        ) from exc


def _model(model: type[M]) -> Callable[[httpx.Response], M]:
    return lambda response: model.model_validate(response.json())


def _items(key: str, model: type[M]) -> Callable[[httpx.Response], list[M]]:
    return lambda response: [model.model_validate(item) for item in response.json().get(key) or []]


def _drop_none(**fields: Any) -> dict[str, Any]:
    """A request body without the fields left unset, so the service's defaults apply."""
    return {key: value for key, value in fields.items() if value is not None}


def _add(entities: str, **item: Any) -> Call[Ack]:
    """A manual add of one item (its unset fields left out) to `POST /api/add_<entity>`, whose body lists the items
    under `entities`. Not repeated after a lost answer: an add is not idempotent."""
    path = "/api/add_" + entities.removesuffix("s")
    return Call("POST", path, _model(Ack), json={entities: [_drop_none(**item)]}, idempotent=False)


def _turn(turn: InteractionData | dict[str, Any]) -> dict[str, Any]:
    return turn.model_dump(exclude_none=True) if isinstance(turn, BaseModel) else dict(turn)


def _operation_status(response: httpx.Response) -> OperationStatus | None:
    status = response.json().get("operation_status")
    return OperationStatus.model_validate(status) if status else None


def _export(response: httpx.Response) -> dict[str, Any] | bytes:
    return response.json() if "json" in response.headers.get("content-type", "") else response.content


class RequestBuilder:
    """Builds the `Call` for each SDK method. `run_timeout` bounds calls that wait for a pipeline run."""

    def __init__(self, run_timeout: float) -> None:
        self.run_timeout = run_timeout

    def publish(
        self,
        user_id: str,
        interactions: Sequence[InteractionData | dict[str, Any]],
        *,
        agent_version: str = "",
        session_id: str | None = None,
        source: str = "",
        wait: bool = False,
        idempotency_key: str | None = None,
    ) -> Call[PublishResult]:
        """Publish conversation turns of `user_id`; answered once they are durable.

        `interactions` are dicts (`{"role", "content", ...}`) or `InteractionData`. With `wait=True` the call
        returns only after the pipeline learned from the turns and the index serving the result is live. Every
        publish carries an `Idempotency-Key` (generated unless given), so a retry after a lost answer lands once.
        """
        body = _drop_none(
            user_id=user_id,
            interaction_data_list=[_turn(t) for t in interactions],
            agent_version=agent_version,
            session_id=session_id,
            source=source,
        )
        return Call(
            "POST",
            "/api/publish_interaction",
            _model(PublishResult),
            json=body,
            params={"wait_for_response": "true"} if wait else None,
            headers={"Idempotency-Key": idempotency_key or uuid.uuid4().hex},
            timeout=self.run_timeout if wait else None,
        )

    def search(
        self,
        query: str,
        *,
        user_id: str | None = None,
        agent_version: str | None = None,
        playbook_name: str | None = None,
        top_k: int = 5,
        threshold: float = 0.3,
        search_mode: SearchMode = "hybrid",
        session_id: str | None = None,
    ) -> Call[SearchResult]:
        """Hybrid search: the profiles and user playbooks of `user_id` and the approved agent playbooks; without
        `user_id` the approved agent playbooks only (no user's items). `session_id` names
        the session the answer is for (the outcome counters join it with what happened next); a user in the holdout
        control group gets an empty result with `holdout=True`."""
        body = _drop_none(
            query=query,
            user_id=user_id,
            agent_version=agent_version,
            playbook_name=playbook_name,
            top_k=top_k,
            threshold=threshold,
            search_mode=search_mode,
            session_id=session_id,
        )
        return Call("POST", "/api/search", _model(SearchResult), json=body)

    def context(
        self,
        query: str,
        *,
        user_id: str | None = None,
        agent_version: str | None = None,
        top_k: int = 5,
        max_chars: int = 4000,
        session_id: str | None = None,
    ) -> Call[str]:
        """A prompt block for a system prompt: what was learned that is relevant to `query` (see `render_context`);
        "" when nothing is (also for a user in the holdout control group). Searches with the service's default
        threshold and mode; `session_id` as in `search`. Pass `user_id`: without it the block holds approved agent
        playbooks only, never a user's profiles or playbooks."""
        search = self.search(query, user_id=user_id, agent_version=agent_version, top_k=top_k, session_id=session_id)
        return Call(search.method, search.path, lambda r: render_context(search.parse(r), max_chars), json=search.json)

    def get_profiles(
        self,
        user_id: str,
        *,
        top_k: int | None = None,
        start_time: int | None = None,
        end_time: int | None = None,
        status_filter: list[str | None] | None = None,
    ) -> Call[list[Profile]]:
        """The user's profiles, newest first (current ones unless `status_filter` says e.g. `["archived"]`)."""
        body = _drop_none(
            user_id=user_id, top_k=top_k, start_time=start_time, end_time=end_time, status_filter=status_filter
        )
        return Call("POST", "/api/get_profiles", _items("user_profiles", Profile), json=body)

    def get_user_playbooks(
        self,
        *,
        user_id: str | None = None,
        agent_version: str | None = None,
        playbook_name: str | None = None,
        limit: int | None = None,
        status_filter: list[str | None] | None = None,
    ) -> Call[list[UserPlaybook]]:
        """User playbooks, optionally of one user / agent version / playbook name."""
        body = _drop_none(
            user_id=user_id,
            agent_version=agent_version,
            playbook_name=playbook_name,
            limit=limit,
            status_filter=status_filter,
        )
        return Call("POST", "/api/get_user_playbooks", _items("user_playbooks", UserPlaybook), json=body)

    def get_agent_playbooks(
        self,
        *,
        agent_version: str | None = None,
        playbook_name: str | None = None,
        playbook_status: PlaybookStatus | None = None,
        limit: int | None = None,
        status_filter: list[str | None] | None = None,
    ) -> Call[list[AgentPlaybook]]:
        """Agent playbooks with their approval status (`playbook_status` filters on it), supporters and flag reason:
        `get_agent_playbooks(playbook_status="pending")` is the approval queue."""
        body = _drop_none(
            agent_version=agent_version,
            playbook_name=playbook_name,
            limit=limit,
            playbook_status_filter=playbook_status,
            status_filter=status_filter,
        )
        return Call("POST", "/api/get_agent_playbooks", _items("agent_playbooks", AgentPlaybook), json=body)

    def get_all_profiles(self, *, limit: int | None = None, status: str | None = None) -> Call[list[Profile]]:
        """Every user's profiles, newest first, in one lifecycle status (default current)."""
        params = _drop_none(limit=limit, status_filter=status)
        return Call("GET", "/api/get_all_profiles", _items("user_profiles", Profile), params=params)

    def search_profiles(
        self, user_id: str, query: str, *, top_k: int | None = None, threshold: float | None = None
    ) -> Call[list[Profile]]:
        """One user's profiles matching `query` (hybrid search), best first."""
        body = _drop_none(user_id=user_id, query=query, top_k=top_k, threshold=threshold)
        return Call("POST", "/api/search_profiles", _items("user_profiles", Profile), json=body)

    def search_user_playbooks(
        self,
        query: str,
        *,
        user_id: str,
        agent_version: str | None = None,
        playbook_name: str | None = None,
        top_k: int | None = None,
        threshold: float | None = None,
    ) -> Call[list[UserPlaybook]]:
        """One user's playbooks matching `query`, best first (current ones). A search serves no one else's:
        `get_user_playbooks` lists every user's."""
        body = _drop_none(
            query=query,
            user_id=user_id,
            agent_version=agent_version,
            playbook_name=playbook_name,
            top_k=top_k,
            threshold=threshold,
        )
        return Call("POST", "/api/search_user_playbooks", _items("user_playbooks", UserPlaybook), json=body)

    def search_agent_playbooks(
        self,
        query: str,
        *,
        agent_version: str | None = None,
        playbook_name: str | None = None,
        playbook_status: PlaybookStatus | None = None,
        top_k: int | None = None,
        threshold: float | None = None,
    ) -> Call[list[AgentPlaybook]]:
        """Agent playbooks matching `query`, best first (approved ones unless `playbook_status` names another)."""
        body = _drop_none(
            query=query,
            agent_version=agent_version,
            playbook_name=playbook_name,
            playbook_status_filter=playbook_status,
            top_k=top_k,
            threshold=threshold,
        )
        return Call("POST", "/api/search_agent_playbooks", _items("agent_playbooks", AgentPlaybook), json=body)

    def add_user_profile(self, user_id: str, content: str, *, source: str | None = None) -> Call[Ack]:
        """Store a fact about a user as given (no LLM); searchable by the next search."""
        return _add("user_profiles", user_id=user_id, content=content, source=source)

    def add_user_playbook(
        self,
        user_id: str,
        content: str,
        *,
        agent_version: str | None = None,
        playbook_name: str | None = None,
        trigger: str | None = None,
        rationale: str | None = None,
    ) -> Call[Ack]:
        """Store a behaviour rule for a user as given (no LLM); searchable by the next search."""
        return _add(
            "user_playbooks",
            user_id=user_id,
            content=content,
            agent_version=agent_version,
            playbook_name=playbook_name,
            trigger=trigger,
            rationale=rationale,
        )

    def add_agent_playbook(
        self,
        content: str,
        agent_version: str,
        *,
        playbook_name: str | None = None,
        trigger: str | None = None,
        rationale: str | None = None,
        playbook_status: PlaybookStatus = "pending",
    ) -> Call[Ack]:
        """Store a shared rule as given, outside aggregation; listed, approvable and searchable at once."""
        return _add(
            "agent_playbooks",
            content=content,
            agent_version=agent_version,
            playbook_name=playbook_name,
            trigger=trigger,
            rationale=rationale,
            playbook_status=playbook_status,
        )

    def update_agent_playbook(
        self,
        agent_playbook_id: int,
        *,
        content: str | None = None,
        playbook_name: str | None = None,
        trigger: str | None = None,
        rationale: str | None = None,
    ) -> Call[Ack]:
        """Edit an agent playbook's text (re-embedded and re-indexed)."""
        body = _drop_none(
            agent_playbook_id=agent_playbook_id,
            content=content,
            playbook_name=playbook_name,
            trigger=trigger,
            rationale=rationale,
        )
        return Call("PUT", "/api/update_agent_playbook", _model(Ack), json=body)

    def delete_agent_playbook(self, agent_playbook_id: int) -> Call[Ack]:
        """Delete an agent playbook (it leaves search at once; aggregation does not bring it back)."""
        return Call("DELETE", "/api/delete_agent_playbook", _model(Ack), json={"agent_playbook_id": agent_playbook_id})

    def request(self, method: str, path: str, body: Any = None) -> Call[Any]:
        """Any REST call, answered with the decoded JSON (the CLI's `api` escape hatch). Repeated on a transient
        failure only when it is a read."""
        return Call(
            method.upper(),
            path,
            lambda response: response.json(),
            json=body,
            idempotent=method.upper() in ("GET", "HEAD"),
        )

    def get_interactions(
        self,
        user_id: str,
        *,
        top_k: int | None = None,
        start_time: int | None = None,
        end_time: int | None = None,
    ) -> Call[list[Interaction]]:
        """The user's stored turns, newest first."""
        body = _drop_none(user_id=user_id, top_k=top_k, start_time=start_time, end_time=end_time)
        return Call("POST", "/api/get_interactions", _items("interactions", Interaction), json=body)

    def set_agent_playbook_status(self, agent_playbook_id: int, status: PlaybookStatus) -> Call[StatusUpdateResult]:
        """Approve, reject or reset to pending; applies to search at once."""
        body = {"agent_playbook_id": agent_playbook_id, "playbook_status": status}
        return Call("PUT", "/api/update_agent_playbook_status", _model(StatusUpdateResult), json=body)

    def approve_agent_playbook(self, agent_playbook_id: int) -> Call[StatusUpdateResult]:
        """Approve an agent playbook."""
        return self.set_agent_playbook_status(agent_playbook_id, "approved")

    def reject_agent_playbook(self, agent_playbook_id: int) -> Call[StatusUpdateResult]:
        """Reject an agent playbook: it is no longer served, and later aggregation runs keep it rejected."""
        return self.set_agent_playbook_status(agent_playbook_id, "rejected")

    def run_aggregation(
        self, agent_version: str | None = None, playbook_name: str | None = None
    ) -> Call[AggregationResult]:
        """Cluster user playbooks into agent playbooks now (a Dagster run); returns when the new index is served.

        Not repeated after a timeout (the run may be going on); repeated when the service refused it (503, 429).
        """
        body = _drop_none(agent_version=agent_version, playbook_name=playbook_name)
        return Call(
            "POST",
            "/api/run_playbook_aggregation",
            _model(AggregationResult),
            json=body,
            idempotent=False,
            timeout=self.run_timeout,
        )

    def get_operation_status(self, service_name: str = "profile_generation") -> Call[OperationStatus | None]:
        """Progress of the last `profile_generation` or `playbook_generation` operation; None if none ran."""
        return Call("GET", "/api/get_operation_status", _operation_status, params={"service_name": service_name})

    def cancel_operation(self, service_name: str | None = None, *, force: bool = False) -> Call[CancelResult]:
        """Stop the running rerun of `service_name` (None = both) before its next user; `force` clears it at once
        (a hung rerun). A rerun whose process died needs neither: it is reported as interrupted by itself."""
        body = _drop_none(service_name=service_name, force=force or None)
        return Call("POST", "/api/cancel_operation", _model(CancelResult), json=body)

    def export(self, user_id: str, format: ExportFormat = "json") -> Call[dict[str, Any] | bytes]:
        """Everything stored about `user_id`: a JSON document (dict), or with `format="parquet"` the bytes of a zip
        of Parquet files."""
        body = {"user_id": user_id, "format": format}
        return Call("POST", "/api/export_user_data", _export, json=body, timeout=self.run_timeout)

    def erase(self, user_id: str) -> Call[EraseResult]:
        """Erase everything stored about `user_id` (turns, profiles, playbooks) from the lake and the index."""
        return Call(
            "DELETE", "/api/erase_user_data", _model(EraseResult), json={"user_id": user_id}, timeout=self.run_timeout
        )

    def erasures(self) -> Call[Erasures]:
        """Every erasure request of the organisation (in progress ones are finished by the service's next start)."""
        return Call("GET", "/api/erasures", _model(Erasures))

    def health(self) -> Call[Health]:
        """Liveness and the index version being served."""
        return Call("GET", "/health", _model(Health))

    def whoami(self) -> Call[WhoAmI]:
        """Who the service takes the caller for (organisation), from the API key."""
        return Call("GET", "/api/whoami", _model(WhoAmI))


def sync_method(build: Callable[Concatenate[RequestBuilder, P], Call[T]]) -> Callable[Concatenate[Any, P], T]:
    """A client method that builds the call with `build` and sends it with the client's `_execute`."""

    @functools.wraps(build)
    def method(self: Any, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._execute(build(self._builder, *args, **kwargs))

    return method


def async_method(
    build: Callable[Concatenate[RequestBuilder, P], Call[T]],
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]:
    """The async twin of `sync_method`."""

    @functools.wraps(build)
    async def method(self: Any, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._execute(build(self._builder, *args, **kwargs))

    return method
