"""POST /api/publish_interaction: validate, make durable, acknowledge; optionally wait for the loop to close."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import uuid
from datetime import datetime, timezone

from fastapi import APIRouter, BackgroundTasks, Header, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from reflexio_pipelines.lake.windows import key_of_moment, window_of_key
from reflexio_pipelines.learning.types import stable_int_id
from reflexio_pipelines.partitions import GRANULARITY
from serving.deps import ServiceDep
from serving.erasures import RETRY_AFTER_S
from serving.errors import error
from serving.landing import IdempotencyConflict, UserBeingErased
from serving.models.fields import MAX_ID
from serving.models.publish import PublishUserInteractionRequest, PublishUserInteractionResponse
from serving.session_learning import learn_now, session_windows
from serving.state import ServiceState

router = APIRouter()
log = logging.getLogger(__name__)

DEFAULT_AGENT_VERSION = "agent-v0"


def landing_rows(body: PublishUserInteractionRequest, request_id: str) -> list[dict]:
    """The landing-file rows for one publish (the writer adds ingested_at_us and idempotency_key at commit)."""
    now = int(time.time())
    rows = []
    for index, turn in enumerate(body.interaction_data_list):
        turn_id = f"{request_id}:{index}"
        rows.append(
            {
                "turn_id": turn_id,
                "interaction_id": stable_int_id(turn_id),
                "request_id": request_id,
                "turn_index": index,
                "user_id": body.user_id,
                "session_id": body.session_id,
                "source": body.source,
                "agent_version": body.agent_version or DEFAULT_AGENT_VERSION,
                "role": turn.role,
                "content": turn.content,
                "user_action": turn.user_action,
                "user_action_description": turn.user_action_description,
                "tools_used": json.dumps([t.model_dump() for t in turn.tools_used], sort_keys=True),
                "expert_content": turn.expert_content,
                "shadow_content": turn.shadow_content,
                "interacted_image_url": turn.interacted_image_url,
                "created_at": turn.created_at if turn.created_at is not None else now,
            }
        )
    return rows


def body_digest(body: PublishUserInteractionRequest) -> str:
    """sha256 of the publish as validated, without its idempotency key: what a key is bound to (a retry sends the
    same body; anything else under the same key is another publish)."""
    canonical = json.dumps(body.model_dump(mode="json", exclude={"idempotency_key"}), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


@router.post(
    "/api/publish_interaction",
    response_model=PublishUserInteractionResponse,
    response_model_exclude_none=True,
    responses={
        409: {
            "description": "not stored: the user is being erased (retry after Retry-After seconds), or the user "
            "already used the idempotency key for a different body"
        },
        413: {"description": "body too large"},
        422: {"description": "invalid field"},
        503: {"description": "not stored"},
    },
)
async def publish_interaction(
    body: PublishUserInteractionRequest,
    state: ServiceDep,
    background: BackgroundTasks,
    wait_for_response: bool = Query(False, description="return only after the turns are learned from and indexed"),
    idempotency_key: str | None = Header(None, alias="Idempotency-Key", max_length=MAX_ID),
) -> PublishUserInteractionResponse | JSONResponse:
    """Store the turns durably (acknowledged only after fsync), then optionally run the loop for their window."""
    key = idempotency_key or body.idempotency_key
    request_id = str(uuid.uuid4())
    try:
        rows = landing_rows(body, request_id)
        receipt = await asyncio.wrap_future(state.writer.submit(request_id, rows, key, body_digest(body)))
    except IdempotencyConflict as conflict:
        return error(
            409,
            f"Idempotency-Key {conflict.key!r} was already used by user {body.user_id!r} for a different body: "
            "these turns were not stored; send new turns under a new key (a retry must repeat the body exactly)",
            "message",
        )
    except UserBeingErased:
        return error(
            409,
            "this user is being erased: the turns were not stored; publish again once the erasure has completed",
            "message",
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )
    except Exception:
        log.exception("publish not stored")
        return error(503, "turns were not stored; retry", "message")
    state.recent_turns.landed(receipt.landing_file)  # searchable by this replica's very next search
    response = PublishUserInteractionResponse(
        success=True,
        request_id=receipt.request_id,
        storage_label="lake",
        message="duplicate publish: already stored under this idempotency key" if receipt.duplicate else "stored",
    )
    if not receipt.duplicate:
        record_injected(state, body, rows, receipt.request_id)
    keys = [key_of_moment(datetime.fromtimestamp(receipt.ingested_at_us / 1_000_000, tz=timezone.utc), GRANULARITY)]
    if body.session_finished and body.session_id:  # the session's earlier windows too (finalize_session's hint)
        earlier = await run_in_threadpool(session_windows, state, body.user_id, body.session_id)
        keys = sorted(set(keys) | set(earlier))
    if wait_for_response:
        await _close_the_loop(state, keys, receipt.request_id, body.user_id, response)
    else:
        response.learning_status = "deferred"
        if body.session_finished:
            background.add_task(learn_now, state, keys, body.user_id)
    return response


def record_injected(
    state: ServiceState, body: PublishUserInteractionRequest, rows: list[dict], request_id: str
) -> None:
    """The learned items the turns name as injected or cited (`retrieved_learnings`, `citations`), each turn's as one
    serve in the retrieval log at that turn's time, in its session: the outcome counters then count what followed,
    as for items this service's search served. The user's holdout arm is recorded as for a search; a user the
    holdout would have held out was served by the caller anyway, which is recorded as an override."""
    decision = state.policy.holdout(body.user_id, body.agent_version or DEFAULT_AGENT_VERSION, None)
    for turn, row in zip(body.interaction_data_list, rows):
        items = turn.served_items()
        if not items or decision is None:
            continue
        results = {
            "profiles": [{"profile_id": i} for e, i in items if e == "profile"],
            "user_playbooks": [{"user_playbook_id": int(i)} for e, i in items if e == "user_playbook"],
            "agent_playbooks": [{"agent_playbook_id": int(i)} for e, i in items if e == "agent_playbook"],
        }
        state.retrievals.searched(
            user_id=body.user_id,
            session_id=body.session_id or request_id,
            agent_version=row["agent_version"],
            arm=decision.arm,
            holdout=False,
            override=decision.held_out,
            results=results,
            index_version=state.index.version,
            served_at_us=row["created_at"] * 1_000_000,
        )


async def _close_the_loop(state: ServiceState, keys: list[str], request_id: str, user_id: str, response) -> None:
    """Materialise the publish's window (and with `session_finished` the session's earlier ones) through Dagster,
    publish the index, and swap it in before answering.

    The run forces this user's turns through at once; other users' incomplete windows wait as in the sensor's
    runs, so a publish that waits costs its own extraction, not everybody's. A run that could not learn the user's
    batch (the LLM down, answers it kept rejecting) records it in `extraction_failures` and still succeeds: the
    answer then says learning failed, and why, instead of "learned"."""
    key = keys[-1]  # the publish's own window: the newest
    try:
        await run_in_threadpool(state.launcher, keys, flush="due", flush_users=[user_id])
    except Exception as exc:  # the turns are durable; learning failed and will be retried by the sensor
        log.exception("wait_for_response run failed")
        response.warnings.append(f"learning run for window {key} failed: {type(exc).__name__}")
        response.message = "stored; learning failed (will be retried)"
        response.learned = False
        return
    await run_in_threadpool(state.index.refresh)
    window = window_of_key(key, GRANULARITY)
    profiles = state.lake.read_table("user_profiles", window).to_pylist()
    playbooks = state.lake.read_table("user_playbooks", window).to_pylist()
    response.profiles_added = sum(
        1 for r in profiles if r["generated_from_request_id"] == request_id and r["status"] != "forgotten"
    )  # a forget tombstone adds nothing
    response.playbooks_added = sum(1 for r in playbooks if r["request_id"] == request_id)
    failures = unlearned(state, window, user_id)
    if failures:
        response.learned = False
        response.message = f"stored; learning failed ({failures[0]}); the window is retried by a later run"
        response.warnings.extend(f"not learned: {reason}" for reason in failures)
        return
    response.learned = True
    response.message = "stored, learned and indexed"


def unlearned(state: ServiceState, window: str, user_id: str) -> list[str]:
    """Why the user's batch of `window` is still unlearned: its unresolved `extraction_failures` rows as
    "<error class>: <fixed description>" (never provider text, so no key or prompt can leak), or [] if learned."""
    rows = state.lake.read_table("extraction_failures", window, filters=[("user_id", "=", user_id)]).to_pylist()
    reasons = (f"{r['error_class']}: {r['error_message']}" for r in rows if r["resolved_by_run"] is None)
    return list(dict.fromkeys(reasons))
