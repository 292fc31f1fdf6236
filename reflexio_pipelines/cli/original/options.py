"""The option types and helpers the `reflexio` commands share."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from reflexio_pipelines.cli.original.app import usage

UserOpt = Annotated[str | None, typer.Option("--user-id", envvar="REFLEXIO_USER_ID", help="User identifier.")]
AgentOpt = Annotated[
    str | None, typer.Option("--agent-version", envvar="REFLEXIO_AGENT_VERSION", help="Agent version.")
]
LimitOpt = Annotated[int, typer.Option("--limit", min=1, help="Maximum number of results.")]
LifecycleOpt = Annotated[
    Literal["current", "pending", "archived"] | None,
    typer.Option("--status", help="Status filter (current/pending/archived)."),
]
ApprovalOpt = Annotated[
    Literal["pending", "approved", "rejected"] | None,
    typer.Option("--playbook-status", help="Approval status (pending/approved/rejected)."),
]
PlaybookNameOpt = Annotated[str | None, typer.Option("--playbook-name", help="Playbook name.")]
PlaybookIdOpt = Annotated[int, typer.Option("--playbook-id", min=1, help="Playbook ID.")]


def via_api(*calls: str) -> str:
    """What to run instead of a command of the original that has no counterpart here but a REST call."""
    return "use " + ", then ".join(f"`reflexio api {call}`" for call in calls) + " (request bodies: docs/api.md)"


def note(message: str) -> None:
    print(message, file=sys.stderr)


def read_data(ctx: typer.Context, data: str) -> str:
    """Inline JSON, or the contents of the file an `@path` names (the original's `--data`)."""
    if not data.startswith("@"):
        return data
    path = Path(data[1:])
    if not path.is_file():
        usage(ctx, f"File not found: {path}")
    return path.read_text(encoding="utf-8")


def page(items: list[Any], limit: int) -> dict[str, Any]:
    """The original's pagination meta of a list envelope."""
    return {"count": len(items), "limit": limit, "has_more": len(items) == limit}
