"""Python SDK of the Reflexio-on-a-lake service: `ReflexioClient` (sync) and `AsyncReflexioClient` (asyncio).

    from reflexio_pipelines.sdk import ReflexioClient

    with ReflexioClient() as client:                      # $REFLEXIO_API_URL, else http://127.0.0.1:8081
        client.publish("alice", [{"role": "user", "content": "Always use us-west-2."}], wait=True)
        system_prompt += client.context("deploy the api", user_id="alice")

See docs/sdk.md.
"""

from reflexio_pipelines.sdk.aclient import AsyncReflexioClient
from reflexio_pipelines.sdk.client import ReflexioClient
from reflexio_pipelines.sdk.context import render_context
from reflexio_pipelines.sdk.errors import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    ConflictError,
    NotFoundError,
    OperationFailedError,
    RateLimitError,
    ReflexioError,
    ServerError,
    ValidationError,
)
from reflexio_pipelines.sdk.models import (
    Ack,
    AgentPlaybook,
    AggregationResult,
    CancelResult,
    EraseResult,
    Health,
    Interaction,
    InteractionData,
    OperationStatus,
    Profile,
    PublishResult,
    SearchResult,
    StatusUpdateResult,
    ToolUsed,
    UserPlaybook,
    WhoAmI,
)
from reflexio_pipelines.sdk.retry import RetryPolicy

__all__ = [
    "APIConnectionError",
    "Ack",
    "APITimeoutError",
    "AgentPlaybook",
    "AggregationResult",
    "CancelResult",
    "AsyncReflexioClient",
    "AuthenticationError",
    "ConflictError",
    "EraseResult",
    "Health",
    "Interaction",
    "InteractionData",
    "NotFoundError",
    "OperationFailedError",
    "OperationStatus",
    "Profile",
    "PublishResult",
    "RateLimitError",
    "ReflexioClient",
    "ReflexioError",
    "RetryPolicy",
    "SearchResult",
    "ServerError",
    "StatusUpdateResult",
    "ToolUsed",
    "UserPlaybook",
    "ValidationError",
    "WhoAmI",
    "render_context",
]
