"""`reflexio agent-playbooks`: list, search, add, update, approve, reject, delete and aggregate agent playbooks."""

from __future__ import annotations

from typing import Annotated, Literal

import typer

from reflexio_pipelines.cli.original.app import client, output, unsupported, usage
from reflexio_pipelines.cli.original.options import (
    AgentOpt,
    ApprovalOpt,
    LimitOpt,
    PlaybookIdOpt,
    PlaybookNameOpt,
    Table,
    listed,
    note,
    via_api,
)
from reflexio_pipelines.sdk import AgentPlaybook

agent_playbooks_app = typer.Typer(help="Manage agent playbooks.", no_args_is_help=True)


AGENT_PLAYBOOKS: Table[AgentPlaybook] = Table(
    "Agent playbooks",
    ["id", "status", "agent version", "trigger", "content"],
    lambda p: (p.agent_playbook_id, p.playbook_status, p.agent_version, p.trigger, p.content),
)


@agent_playbooks_app.command("list")
def agent_playbooks_list(
    ctx: typer.Context,
    limit: LimitOpt = 20,
    playbook_name: PlaybookNameOpt = None,
    agent_version: AgentOpt = None,
    playbook_status: ApprovalOpt = None,
) -> None:
    """Agent playbooks (aggregated and added) with their approval status."""
    listed(
        ctx,
        lambda api: api.get_agent_playbooks(
            agent_version=agent_version, playbook_name=playbook_name, playbook_status=playbook_status, limit=limit
        ),
        limit,
        AGENT_PLAYBOOKS,
    )


@agent_playbooks_app.command("search")
def agent_playbooks_search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="Search query.")],
    limit: LimitOpt = 10,
    agent_version: AgentOpt = None,
    playbook_status: ApprovalOpt = None,
) -> None:
    """Agent playbooks matching a query (approved ones unless --playbook-status names another)."""
    listed(
        ctx,
        lambda api: api.search_agent_playbooks(
            query, agent_version=agent_version, playbook_status=playbook_status, top_k=limit
        ),
        limit,
        AGENT_PLAYBOOKS,
    )


@agent_playbooks_app.command("add")
def agent_playbooks_add(
    ctx: typer.Context,
    content: Annotated[str, typer.Option("--content", help="Playbook content text.")] = "",
    agent_version: AgentOpt = None,
    playbook_name: Annotated[str, typer.Option("--playbook-name", help="Playbook name.")] = "agent_corrections",
    playbook_status: Annotated[
        Literal["pending", "approved", "rejected"], typer.Option("--playbook-status", help="Approval status.")
    ] = "pending",
    trigger: Annotated[str | None, typer.Option("--trigger", help="When this playbook applies.")] = None,
    rationale: Annotated[str | None, typer.Option("--rationale", help="Why this playbook matters.")] = None,
) -> None:
    """Add an agent playbook directly, outside aggregation; listed, approvable and searchable at once."""
    if not (content.strip() and agent_version):
        usage(ctx, "--content and --agent-version are required")
    out = output(ctx)
    with out.errors(), client(ctx) as api:
        result = api.add_agent_playbook(
            content,
            agent_version,
            playbook_name=playbook_name,
            trigger=trigger,
            rationale=rationale,
            playbook_status=playbook_status,
        )
    out.emit(result, lambda: note(f"Agent playbook added: {content[:80]}"))


@agent_playbooks_app.command("update")
def agent_playbooks_update(
    ctx: typer.Context,
    playbook_id: PlaybookIdOpt,
    content: Annotated[str | None, typer.Option("--content", help="New content text.")] = None,
    playbook_name: PlaybookNameOpt = None,
) -> None:
    """Edit an agent playbook's content or name (re-indexed); the approval status: update-status."""
    if content is None and playbook_name is None:
        usage(ctx, "Pass at least one of --content/--playbook-name to update.")
    out = output(ctx)
    with out.errors(), client(ctx) as api:
        result = api.update_agent_playbook(playbook_id, content=content, playbook_name=playbook_name)
    out.emit(result, lambda: note(f"Agent playbook {playbook_id} updated"))


def _set_status(ctx: typer.Context, playbook_id: int, status: str) -> None:
    out = output(ctx)
    with out.errors(), client(ctx) as api:
        result = api.set_agent_playbook_status(playbook_id, status)
    out.emit(result, lambda: note(f"Agent playbook {playbook_id} status set to {status}"))


@agent_playbooks_app.command("update-status")
def agent_playbooks_update_status(
    ctx: typer.Context,
    playbook_id: PlaybookIdOpt,
    status: Annotated[
        Literal["pending", "approved", "rejected"], typer.Option("--status", help="New approval status.")
    ],
) -> None:
    """Approve, reject, or mark pending an agent playbook; applies to search at once."""
    _set_status(ctx, playbook_id, status)


PositionalId = Annotated[int | None, typer.Argument(min=1, help="Agent playbook ID (or --playbook-id).")]
OptionalIdOpt = Annotated[int | None, typer.Option("--playbook-id", min=1, help="Agent playbook ID.")]


def _one_id(ctx: typer.Context, positional: int | None, option: int | None) -> int:
    if (positional is None) == (option is None):
        usage(ctx, "give the agent playbook ID once: as an argument or with --playbook-id")
    return positional if positional is not None else option


@agent_playbooks_app.command("approve")
def agent_playbooks_approve(
    ctx: typer.Context, playbook_id: PositionalId = None, id_option: OptionalIdOpt = None
) -> None:
    """Approve an agent playbook (update-status --status approved)."""
    _set_status(ctx, _one_id(ctx, playbook_id, id_option), "approved")


@agent_playbooks_app.command("reject")
def agent_playbooks_reject(
    ctx: typer.Context, playbook_id: PositionalId = None, id_option: OptionalIdOpt = None
) -> None:
    """Reject an agent playbook: it leaves search at once and later aggregations keep it rejected."""
    _set_status(ctx, _one_id(ctx, playbook_id, id_option), "rejected")


@agent_playbooks_app.command("delete")
def agent_playbooks_delete(ctx: typer.Context, playbook_id: PlaybookIdOpt) -> None:
    """Delete an agent playbook by ID."""
    out = output(ctx)
    with out.errors(), client(ctx) as api:
        result = api.delete_agent_playbook(playbook_id)
    out.emit(result, lambda: note(f"Deleted agent playbook {playbook_id}"))


@agent_playbooks_app.command("aggregate")
def agent_playbooks_aggregate(
    ctx: typer.Context,
    wait: Annotated[bool, typer.Option("--wait", help="Accepted: the call always returns after the run.")] = False,
    agent_version: Annotated[str | None, typer.Option("--agent-version", help="Agent version (default: all).")] = None,
    playbook_name: Annotated[str | None, typer.Option("--playbook-name", help="Playbook name (default: all).")] = None,
) -> None:
    """Cluster user playbooks into agent playbooks now: a Dagster aggregation run; returns when it is served."""
    out = output(ctx)
    scope = f"agent_version={agent_version or 'all'}, playbook_name={playbook_name or 'all'}"
    with out.errors(), client(ctx) as api, out.progress(f"aggregating ({scope})"):
        result = api.run_aggregation(agent_version=agent_version, playbook_name=playbook_name)
    out.emit(result, lambda: note(f"Aggregated ({scope}): {result.message}"))


unsupported(agent_playbooks_app, "delete-all", via_api("DELETE /api/delete_all_agent_playbooks"))
