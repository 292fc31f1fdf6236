"""Commands that call the service through the SDK: publish, search, context, profiles, playbooks, aggregate, export,
erase, erasures, operations."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

from reflexio_pipelines.cli.app import JsonFlag, app, client, operations_app, output, playbooks_app, profiles_app
from reflexio_pipelines.cli.output import EXIT_USAGE, Output
from reflexio_pipelines.cli.payload import PayloadError, parse_batches, publishes, send
from reflexio_pipelines.sdk import AgentPlaybook, OperationStatus, PublishResult, SearchResult, UserPlaybook

UserOpt = Annotated[str | None, typer.Option("--user-id", "-u", envvar="REFLEXIO_USER_ID", help="The user.")]
AgentVersionOpt = Annotated[
    str | None, typer.Option("--agent-version", envvar="REFLEXIO_AGENT_VERSION", help="The agent version.")
]
TopKOpt = Annotated[int, typer.Option("--top-k", min=1, max=100, help="Results per kind.")]


def _read_input(out: Output, data: str | None, file: Path | None, stdin: bool) -> str:
    sources = [
        name for name, given in (("DATA", data is not None), ("--file", file is not None), ("--stdin", stdin)) if given
    ]
    if len(sources) != 1:
        out.fail(
            "give the turns exactly one way: inline DATA, --file PATH or --stdin"
            + (f" (got {', '.join(sources)})" if sources else ""),
            'e.g. reflexio-lake publish --user-id alice \'[{"role": "user", "content": "hi"}]\'',
            EXIT_USAGE,
        )
    if file is not None:
        return file.read_text(encoding="utf-8")
    return sys.stdin.read() if stdin else str(data)


@app.command()
def publish(
    ctx: typer.Context,
    data: Annotated[
        str | None,
        typer.Argument(help='Turns as JSON: [{role, content}, ...] or {"interactions": [...], "user_id": ...}.'),
    ] = None,
    file: Annotated[
        Path | None,
        typer.Option("--file", "-f", exists=True, dir_okay=False, help="A .json or .jsonl file of turns or payloads."),
    ] = None,
    stdin: Annotated[bool, typer.Option("--stdin", help="Read JSON or JSONL from standard input.")] = False,
    user_id: UserOpt = None,
    agent_version: AgentVersionOpt = None,
    session_id: Annotated[str | None, typer.Option("--session-id", help="Groups the turns into a session.")] = None,
    source: Annotated[str, typer.Option("--source", help="Where the turns come from.")] = "cli",
    wait: Annotated[
        bool,
        typer.Option("--wait", help="Return only when the turns were learned from and what was learned is searchable."),
    ] = False,
    json_mode: JsonFlag = False,
) -> None:
    """Publish conversation turns (a payload's own user_id / session_id / agent_version win over the options)."""
    out = output(ctx, json_mode)
    try:
        batches = parse_batches(_read_input(out, data, file, stdin))
    except PayloadError as exc:
        out.fail(
            f"cannot read the turns: {exc}", "see `reflexio-lake publish --help` for the accepted shapes", EXIT_USAGE
        )
    sends = publishes(batches, user_id=user_id, session_id=session_id, agent_version=agent_version or "", source=source)
    if any(not p["user_id"] for p in sends):
        out.fail("no user id", "pass --user-id (or REFLEXIO_USER_ID), or put user_id in the payload", EXIT_USAGE)
    results: list[PublishResult] = []
    with out.errors(), client(ctx) as api:
        for p in sends:
            label = f"publishing {len(p['turns'])} turn(s) for {p['user_id']}"
            with out.progress(label + (" and waiting for learning and indexing" if wait else "")):
                results.append(send(api, p, wait))

    def human() -> None:
        for p, r in zip(sends, results):
            learned = ""
            if wait and r.learned is False:  # stored, but nothing was learned from it: say so, not "searchable"
                learned = f"; {r.message.removeprefix('stored; ')}"
            elif wait:
                learned = (
                    f"; learned {r.profiles_added or 0} profile(s), {r.playbooks_added or 0} playbook(s), "
                    "searchable now"
                )
            out.out.print(
                f"✓ {len(p['turns'])} turn(s) for {p['user_id']} stored (request {r.request_id}){learned}", markup=False
            )
            for warning in r.warnings:
                out.note(f"  warning: {warning}")

    out.emit({"success": True, "published": results}, human)


def _search_tables(out: Output, result: SearchResult) -> None:
    out.table("Profiles", ["id", "content"], [(p.profile_id, p.content) for p in result.profiles])
    out.table(
        "User playbooks",
        ["id", "user", "trigger", "content"],
        [(p.user_playbook_id, p.user_id, p.trigger, p.content) for p in result.user_playbooks],
    )
    out.table(
        "Agent playbooks",
        ["id", "status", "trigger", "content"],
        [(p.agent_playbook_id, p.playbook_status, p.trigger, p.content) for p in result.agent_playbooks],
    )
    if result.msg:
        out.note(result.msg)


@app.command()
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for.")],
    user_id: UserOpt = None,
    agent_version: AgentVersionOpt = None,
    playbook_name: Annotated[str | None, typer.Option("--playbook-name")] = None,
    top_k: TopKOpt = 5,
    threshold: Annotated[
        float, typer.Option("--threshold", min=0.0, max=1.0, help="Minimum similarity for the vector leg.")
    ] = 0.3,
    mode: Annotated[Literal["hybrid", "vector", "fts"], typer.Option("--mode")] = "hybrid",
    json_mode: JsonFlag = False,
) -> None:
    """Hybrid search: with --user-id that user's profiles and playbooks and the approved agent playbooks; without
    it the approved agent playbooks only (no user's items)."""
    out = output(ctx, json_mode)
    with out.errors(), client(ctx) as api:
        result = api.search(
            query,
            user_id=user_id,
            agent_version=agent_version,
            playbook_name=playbook_name,
            top_k=top_k,
            threshold=threshold,
            search_mode=mode,
        )
    out.emit(result, lambda: _search_tables(out, result))


@app.command()
def context(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="The user's message or task.")],
    user_id: UserOpt = None,
    agent_version: AgentVersionOpt = None,
    top_k: TopKOpt = 5,
    max_chars: Annotated[int, typer.Option("--max-chars", min=200, help="Upper bound of the block's size.")] = 4000,
    json_mode: JsonFlag = False,
) -> None:
    """The prompt block to inject into a system prompt (empty when nothing learned is relevant). Without --user-id
    it holds approved agent playbooks only: pass the user for their own profiles and playbooks."""
    out = output(ctx, json_mode)
    with out.errors(), client(ctx) as api:
        block = api.context(query, user_id=user_id, agent_version=agent_version, top_k=top_k, max_chars=max_chars)

    def human() -> None:
        if block:
            typer.echo(block)  # verbatim: the block goes into prompts, so no rich markup processing
        else:
            out.note("nothing learned matches (no output)")

    out.emit({"context": block}, human)


@profiles_app.command("list")
def profiles_list(
    ctx: typer.Context,
    user_id: Annotated[str, typer.Option("--user-id", "-u", envvar="REFLEXIO_USER_ID", help="The user.")],
    limit: Annotated[int, typer.Option("--limit", min=1)] = 30,
    status: Annotated[Literal["current", "pending", "archived"], typer.Option("--status")] = "current",
    json_mode: JsonFlag = False,
) -> None:
    """A user's profiles, newest first."""
    out = output(ctx, json_mode)
    with out.errors(), client(ctx) as api:
        profiles = api.get_profiles(user_id, top_k=limit, status_filter=[None if status == "current" else status])
    out.emit(
        profiles,
        lambda: out.table(
            f"Profiles of {user_id}",
            ["id", "content", "status"],
            [(p.profile_id, p.content, p.status or "current") for p in profiles],
        ),
    )


@playbooks_app.command("list")
def playbooks_list(
    ctx: typer.Context,
    kind: Annotated[
        Literal["agent", "user"],
        typer.Option("--kind", help="Agent playbooks (shared, with approval) or user playbooks."),
    ] = "agent",
    user_id: UserOpt = None,
    agent_version: AgentVersionOpt = None,
    playbook_name: Annotated[str | None, typer.Option("--playbook-name")] = None,
    status: Annotated[
        Literal["pending", "approved", "rejected"] | None,
        typer.Option("--status", help="Approval status (agent playbooks)."),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1)] = 100,
    json_mode: JsonFlag = False,
) -> None:
    """List agent playbooks (default) or, with --kind user, user playbooks."""
    out = output(ctx, json_mode)
    if kind == "user" and status is not None:
        out.fail("--status is the approval status of agent playbooks", "drop --status or use --kind agent", EXIT_USAGE)
    with out.errors(), client(ctx) as api:
        playbooks: list[AgentPlaybook] | list[UserPlaybook]
        if kind == "agent":
            playbooks = api.get_agent_playbooks(
                agent_version=agent_version, playbook_name=playbook_name, playbook_status=status, limit=limit
            )
        else:
            playbooks = api.get_user_playbooks(
                user_id=user_id, agent_version=agent_version, playbook_name=playbook_name, limit=limit
            )

    def human() -> None:
        if kind == "agent":
            # A flagged rule says so in its status; its reason and supporters are in --json (and on the dashboard).
            out.table(
                "Agent playbooks",
                ["id", "status", "agent version", "trigger", "content"],
                [
                    (
                        p.agent_playbook_id,
                        f"{p.playbook_status} (flagged)" if p.flag_reason else p.playbook_status,
                        p.agent_version,
                        p.trigger,
                        p.content,
                    )
                    for p in playbooks
                ],
            )
        else:
            out.table(
                "User playbooks",
                ["id", "user", "agent version", "trigger", "content"],
                [(p.user_playbook_id, p.user_id, p.agent_version, p.trigger, p.content) for p in playbooks],
            )

    out.emit(playbooks, human)


def _decide(ctx: typer.Context, json_mode: bool, playbook_id: int, status: Literal["approved", "rejected"]) -> None:
    out = output(ctx, json_mode)
    with out.errors(), client(ctx) as api:
        result = api.set_agent_playbook_status(playbook_id, status)
    out.emit(result, lambda: out.out.print(f"✓ agent playbook {playbook_id} is now {status}", markup=False))


PlaybookId = Annotated[int, typer.Argument(min=1, help="The agent playbook's id (see `playbooks list`).")]


@playbooks_app.command("approve")
def playbooks_approve(ctx: typer.Context, playbook_id: PlaybookId, json_mode: JsonFlag = False) -> None:
    """Approve an agent playbook (served by search at once; until then it is not served)."""
    _decide(ctx, json_mode, playbook_id, "approved")


@playbooks_app.command("reject")
def playbooks_reject(ctx: typer.Context, playbook_id: PlaybookId, json_mode: JsonFlag = False) -> None:
    """Reject an agent playbook (no longer served, and later aggregation runs keep it rejected)."""
    _decide(ctx, json_mode, playbook_id, "rejected")


@app.command()
def aggregate(
    ctx: typer.Context,
    agent_version: AgentVersionOpt = None,
    playbook_name: Annotated[str | None, typer.Option("--playbook-name")] = None,
    json_mode: JsonFlag = False,
) -> None:
    """Cluster user playbooks into agent playbooks now (a Dagster run), then serve the new index."""
    out = output(ctx, json_mode)
    with out.errors(), client(ctx) as api, out.progress("aggregating (Dagster run)"):
        result = api.run_aggregation(agent_version=agent_version, playbook_name=playbook_name)
    out.emit(result, lambda: out.out.print(f"✓ {result.message}", markup=False))


@app.command()
def export(
    ctx: typer.Context,
    user_id: Annotated[str, typer.Option("--user-id", "-u", envvar="REFLEXIO_USER_ID", help="The user.")],
    format: Annotated[
        Literal["json", "parquet"], typer.Option("--format", help="One JSON document, or a zip of Parquet files.")
    ] = "json",
    out_path: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", dir_okay=False, help="Write here (parquet default: <user>-export.zip; json default: stdout)."
        ),
    ] = None,
    json_mode: JsonFlag = False,
) -> None:
    """Export everything stored about a user."""
    out = output(ctx, json_mode)
    with out.errors(), client(ctx) as api, out.progress(f"exporting {user_id}"):
        exported = api.export(user_id, format=format)
    if isinstance(exported, dict) and out_path is None:
        out.emit(exported)
        return
    target = out_path or Path(f"{user_id}-export.zip")
    content = exported if isinstance(exported, bytes) else json.dumps(exported, ensure_ascii=False, indent=2).encode()
    target.write_bytes(content)
    out.emit(
        {"success": True, "path": str(target), "bytes": len(content), "format": format},
        lambda: out.out.print(f"✓ wrote {len(content)} bytes to {target}", markup=False),
    )


@app.command()
def erase(
    ctx: typer.Context,
    user_id: Annotated[str, typer.Option("--user-id", "-u", help="The user whose data is erased.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    json_mode: JsonFlag = False,
) -> None:
    """Erase everything stored about a user (turns, profiles, playbooks, index entries). Cannot be undone."""
    out = output(ctx, json_mode)
    if not yes and not typer.confirm(f"Erase everything stored about {user_id!r}? This cannot be undone", err=True):
        out.fail("not erased", "pass --yes to erase without asking", 1)
    with out.errors(), client(ctx) as api, out.progress(f"erasing {user_id}"):
        result = api.erase(user_id)
    out.emit(result, lambda: out.out.print(f"✓ erased {user_id}: {result.message or 'done'}", markup=False))


@app.command()
def erasures(ctx: typer.Context, json_mode: JsonFlag = False) -> None:
    """List erasure requests by id (a salted hash, never the user id): in progress or completed, rows erased.
    One still in progress was interrupted and is finished by the service's next start (or by erasing again)."""
    out = output(ctx, json_mode)
    with out.errors(), client(ctx) as api:
        result = api.erasures()
    out.emit(
        result,
        lambda: out.table(
            "Erasures",
            ["id", "status", "started", "completed", "rows"],
            [
                [
                    e.erasure_id[:16],
                    e.status or "",
                    str(e.started_at or ""),
                    str(e.completed_at or ""),
                    str(sum(e.erased.values())),
                ]
                for e in result.erasures
            ],
        ),
    )


#: The services whose background operations (reruns) have a status.
SERVICES = ("profile_generation", "playbook_generation")
ServiceOpt = Annotated[
    Literal["profile_generation", "playbook_generation"] | None,
    typer.Option("--service", help="One service (default: both)."),
]


@operations_app.command("status")
def operations_status(ctx: typer.Context, service: ServiceOpt = None, json_mode: JsonFlag = False) -> None:
    """The last rerun of each service: in_progress, completed, failed (interrupted: its process died) or cancelled."""
    out = output(ctx, json_mode)
    with out.errors(), client(ctx) as api:
        statuses: dict[str, OperationStatus | None] = {
            name: api.get_operation_status(name) for name in ([service] if service else SERVICES)
        }

    def human() -> None:
        out.table(
            "Operations",
            ["service", "operation", "status", "progress", "message"],
            [
                [
                    name,
                    s.operation_id or "",
                    (s.status or "") + (" (interrupted)" if s.interrupted else ""),
                    f"{s.progress_percentage or 0:.0f}%",
                    s.error_message or "",
                ]
                if s
                else [name, "", "none ran", "", ""]
                for name, s in statuses.items()
            ],
        )

    out.emit({"success": True, "operations": statuses}, human)


@operations_app.command("cancel")
def operations_cancel(
    ctx: typer.Context,
    service: ServiceOpt = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Clear it now instead of stopping it before its next user (for a rerun that hangs)."
        ),
    ] = False,
    json_mode: JsonFlag = False,
) -> None:
    """Stop a running rerun (before its next user; nothing of it is written), or with --force clear its status at
    once. A rerun whose process died needs neither: `operations status` already shows it interrupted."""
    out = output(ctx, json_mode)
    with out.errors(), client(ctx) as api:
        result = api.cancel_operation(service, force=force)
    out.emit(result, lambda: out.out.print(f"✓ {result.msg}", markup=False))
