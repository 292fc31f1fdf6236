"""The option types and helpers the `reflexio` commands share."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Generic, Literal, NamedTuple, TypeVar

import typer

from reflexio_pipelines.cli.original.app import client, output, usage
from reflexio_pipelines.sdk import ReflexioClient

T = TypeVar("T")

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


class Table(NamedTuple, Generic[T]):
    """How a list command shows its items: a titled table, one `row` per item."""

    title: str
    columns: Sequence[str]
    row: Callable[[T], Sequence[Any]]


def listed(ctx: typer.Context, fetch: Callable[[ReflexioClient], list[T]], limit: int, table: Table[T]) -> None:
    """A list command's answer: `fetch` the items, then their table, or with --json the envelope with the
    original's pagination meta."""
    out = output(ctx)
    with out.errors(), client(ctx) as api:
        items = fetch(api)
    out.emit(
        items, lambda: out.table(table.title, table.columns, [table.row(i) for i in items]), meta=page(items, limit)
    )
