"""The `reflexio` commands: the original CLI's names and flags for the loop, each a call through the SDK.

publish / interactions publish, search, context, user-profiles (also `profiles`) list/search/add, user-playbooks
list/search/add, agent-playbooks list/search/add/update/update-status/approve/reject/delete/aggregate, status
check/whoami, and `api` (any REST call). The original's other commands either have a REST call (`reflexio api ...`
does it) or belong to its own deployment (services, auth, config, setup); they exit 2 and say what to use instead.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from reflexio_pipelines.cli.original.agent_playbooks import agent_playbooks_app
from reflexio_pipelines.cli.original.app import app, client, output, unsupported, unsupported_group, usage
from reflexio_pipelines.cli.original.options import (
    AgentOpt,
    LifecycleOpt,
    LimitOpt,
    PlaybookNameOpt,
    Table,
    UserOpt,
    listed,
    note,
    read_data,
    via_api,
)
from reflexio_pipelines.cli.payload import Batch, PayloadError, parse_batches, publishes, send
from reflexio_pipelines.sdk import Profile, ReflexioClient, UserPlaybook, render_context

interactions_app = typer.Typer(help="Manage interactions (conversations).", no_args_is_help=True)
profiles_app = typer.Typer(help="Manage user profiles.", no_args_is_help=True)
user_playbooks_app = typer.Typer(help="Manage user playbooks.", no_args_is_help=True)
status_app = typer.Typer(help="Server health and status.", no_args_is_help=True)
app.add_typer(interactions_app, name="interactions")
app.add_typer(profiles_app, name="user-profiles")
app.add_typer(profiles_app, name="profiles", help="Manage user profiles (same as user-profiles).")
app.add_typer(user_playbooks_app, name="user-playbooks")
app.add_typer(agent_playbooks_app, name="agent-playbooks")
app.add_typer(status_app, name="status")


# -- publish ------------------------------------------------------------------------------------------------------


def publish(
    ctx: typer.Context,
    user_id: UserOpt = None,
    session_id: Annotated[str | None, typer.Option("--session-id", help="Session ID for grouping.")] = None,
    source: Annotated[str, typer.Option("--source", help="Source tag.")] = "cli",
    agent_version: AgentOpt = None,
    wait: Annotated[bool, typer.Option("--wait", help="Return once learned from and searchable.")] = False,
    user_message: Annotated[str | None, typer.Option("--user-message", help="Single-turn user message.")] = None,
    agent_response: Annotated[str | None, typer.Option("--agent-response", help="Single-turn agent response.")] = None,
    data: Annotated[str | None, typer.Option("--data", help="JSON string or @filepath.")] = None,
    file: Annotated[Path | None, typer.Option("--file", help="Path to a JSON/JSONL file.")] = None,
    stdin: Annotated[bool, typer.Option("--stdin", help="Read JSON data from stdin.")] = False,
    skip_aggregation: Annotated[
        bool, typer.Option("--skip-aggregation", help="Accepted; aggregation runs on its schedule or on demand here.")
    ] = False,
    force_extraction: Annotated[
        bool, typer.Option("--force-extraction", help="Accepted; every turn is extracted here, no stride is skipped.")
    ] = False,
) -> None:
    """Publish interactions: --user-message + --agent-response, or a JSON/JSONL payload (--data, --file, --stdin)
    of `{"interactions": [...], "user_id": ..., ...}` objects (or bare turns)."""
    out = output(ctx)
    if user_message is not None:
        if agent_response is None:
            usage(ctx, "--agent-response is required with --user-message")
        batches = [
            Batch(turns=[{"role": "user", "content": user_message}, {"role": "assistant", "content": agent_response}])
        ]
    else:
        if data is not None:
            raw = read_data(ctx, data)
        elif file is not None:
            if not file.is_file():
                usage(ctx, f"File not found: {file}")
            raw = file.read_text(encoding="utf-8")
        elif stdin:
            raw = sys.stdin.read()
        else:
            usage(ctx, "Specify --user-message/--agent-response, --file, --stdin, or --data")
        try:
            batches = parse_batches(raw)
        except PayloadError as exc:
            usage(ctx, f"Invalid payload: {exc}")
    sends = publishes(batches, user_id=user_id, session_id=session_id, agent_version=agent_version or "", source=source)
    if any(not p["user_id"] for p in sends):
        usage(ctx, "--user-id is required (or include 'user_id' in the JSON payload, or set REFLEXIO_USER_ID)")
    with out.errors(), client(ctx) as api:
        results = [send(api, p, wait) for p in sends]

    def human() -> None:
        for p, result in zip(sends, results):
            note(f"Published ({p['user_id']}): {len(p['turns'])} turn(s), request {result.request_id}")
            if wait:
                note(
                    f"  Extraction: {result.profiles_added or 0} profile(s) added, "
                    f"{result.playbooks_added or 0} playbook(s) added"
                )
            for warning in result.warnings:
                note(f"  Warning: {warning}")

    out.emit(results[0] if len(results) == 1 else results, human)


app.command("publish")(publish)
interactions_app.command("publish")(publish)


@interactions_app.command("list")
def interactions_list(ctx: typer.Context, user_id: UserOpt = None, limit: LimitOpt = 20) -> None:
    """A user's interactions, newest first."""
    if not user_id:
        usage(ctx, "--user-id is required here", via_api("GET /api/get_all_interactions") + " lists every user's")
    listed(
        ctx,
        lambda api: api.get_interactions(user_id, top_k=limit),
        limit,
        Table(f"Interactions of {user_id}", ["id", "role", "content"], lambda t: (t.interaction_id, t.role, t.content)),
    )


for _name, _calls in (
    ("search", ["POST /api/search_interactions --data '{...}'"]),
    ("delete", ["DELETE /api/delete_interaction --data '{...}'"]),
    ("delete-all", ["DELETE /api/delete_all_interactions"]),
):
    unsupported(interactions_app, _name, via_api(*_calls))


# -- search, context ----------------------------------------------------------------------------------------------


@app.command()
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="Search query text.")],
    top_k: Annotated[int, typer.Option("--top-k", min=1, max=100, help="Max results per type.")] = 5,
    threshold: Annotated[float, typer.Option("--threshold", min=0.0, max=1.0, help="Similarity threshold.")] = 0.4,
    user_id: Annotated[str | None, typer.Option("--user-id", help="Filter by user ID.")] = None,
    agent_version: Annotated[str | None, typer.Option("--agent-version", help="Filter by agent version.")] = None,
) -> None:
    """Unified search across profiles and playbooks; prints the context block to inject into a prompt. Without
    --user-id only approved agent playbooks (no user's items)."""
    out = output(ctx)
    with out.errors(), client(ctx) as api:
        result = api.search(query, user_id=user_id, agent_version=agent_version, top_k=top_k, threshold=threshold)

    def human() -> None:
        block = render_context(result)
        if block:
            typer.echo(block)  # verbatim: hooks inject stdout into the agent's prompt
        note(
            f"Found {len(result.profiles)} profiles, {len(result.agent_playbooks)} agent playbooks, "
            f"{len(result.user_playbooks)} user playbooks"
        )

    out.emit(result, human)


@app.command()
def context(
    ctx: typer.Context,
    user_id: UserOpt = None,
    agent_version: AgentOpt = None,
    query: Annotated[str, typer.Option("--query", help="Search query.")] = "general preferences",
) -> None:
    """Formatted context for agent bootstrap injection (a user's profiles and the agent version's playbooks)."""
    if not (user_id and agent_version):
        usage(ctx, "--user-id and --agent-version are required for context bootstrap")
    out = output(ctx)
    with out.errors(), client(ctx) as api:
        block = api.context(query, user_id=user_id, agent_version=agent_version)
    out.emit({"context": block}, lambda: typer.echo(block) if block else note("Nothing learned matches"))


# -- user profiles ------------------------------------------------------------------------------------------------


@profiles_app.command("list")
def profiles_list(
    ctx: typer.Context, user_id: UserOpt = None, limit: LimitOpt = 20, status: LifecycleOpt = None
) -> None:
    """Profiles of a user (every user's without --user-id), newest first."""

    def fetch(api: ReflexioClient) -> list[Profile]:
        if user_id:
            return api.get_profiles(
                user_id, top_k=limit, status_filter=[None if status in (None, "current") else status]
            )
        return api.get_all_profiles(limit=limit, status=status)

    listed(
        ctx,
        fetch,
        limit,
        Table(
            "User profiles",
            ["id", "user", "content", "status"],
            lambda p: (p.profile_id, p.user_id, p.content, p.status or "current"),
        ),
    )


@profiles_app.command("search")
def profiles_search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="Semantic search query for profiles.")],
    user_id: UserOpt = None,
    limit: LimitOpt = 10,
    threshold: Annotated[float | None, typer.Option("--threshold", min=0.0, max=1.0)] = None,
) -> None:
    """A user's profiles matching a query."""
    if not user_id:
        usage(ctx, "--user-id is required: profiles are searched per user here")
    listed(
        ctx,
        lambda api: api.search_profiles(user_id, query, top_k=limit, threshold=threshold),
        limit,
        Table(f"Profiles of {user_id}", ["id", "content"], lambda p: (p.profile_id, p.content)),
    )


@profiles_app.command("add")
def profiles_add(
    ctx: typer.Context,
    user_id: UserOpt = None,
    content: Annotated[str, typer.Option("--content", help="Profile content text.")] = "",
) -> None:
    """Add a profile directly (no extraction); searchable at once."""
    if not (user_id and content.strip()):
        usage(ctx, "--user-id and --content are required")
    out = output(ctx)
    with out.errors(), client(ctx) as api:
        result = api.add_user_profile(user_id, content, source="cli-manual")
    out.emit(result, lambda: note(f"Profile added for {user_id}: {content[:80]}"))


for _name, _calls in (
    ("delete", ["DELETE /api/delete_profile --data '{...}'"]),
    ("delete-all", ["DELETE /api/delete_all_profiles"]),
    ("regenerate", ["POST /api/rerun_profile_generation --data '{...}'", "POST /api/upgrade_all_profiles --data '{}'"]),
):
    unsupported(profiles_app, _name, via_api(*_calls))


# -- user playbooks -----------------------------------------------------------------------------------------------


@user_playbooks_app.command("list")
def user_playbooks_list(
    ctx: typer.Context,
    user_id: UserOpt = None,
    limit: LimitOpt = 20,
    playbook_name: PlaybookNameOpt = None,
    agent_version: AgentOpt = None,
    status: LifecycleOpt = None,
) -> None:
    """User playbooks, newest first."""
    status_filter = None if status is None else [None if status == "current" else status]
    listed(
        ctx,
        lambda api: api.get_user_playbooks(
            user_id=user_id,
            agent_version=agent_version,
            playbook_name=playbook_name,
            limit=limit,
            status_filter=status_filter,
        ),
        limit,
        USER_PLAYBOOKS,
    )


USER_PLAYBOOKS: Table[UserPlaybook] = Table(
    "User playbooks",
    ["id", "user", "agent version", "trigger", "content"],
    lambda p: (p.user_playbook_id, p.user_id, p.agent_version, p.trigger, p.content),
)


@user_playbooks_app.command("search")
def user_playbooks_search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="Search query.")],
    limit: LimitOpt = 10,
    agent_version: AgentOpt = None,
    user_id: UserOpt = None,
) -> None:
    """One user's playbooks matching a query (a search serves no one else's; `list` shows every user's)."""
    if not user_id:
        usage(
            ctx,
            "--user-id is required: a search serves one user's playbooks",
            "`reflexio user-playbooks list` shows every user's",
        )
    listed(
        ctx,
        lambda api: api.search_user_playbooks(query, user_id=user_id, agent_version=agent_version, top_k=limit),
        limit,
        USER_PLAYBOOKS,
    )


@user_playbooks_app.command("add")
def user_playbooks_add(
    ctx: typer.Context,
    content: Annotated[str, typer.Option("--content", help="Playbook content text.")] = "",
    playbook_name: Annotated[str, typer.Option("--playbook-name", help="Playbook name.")] = "agent_corrections",
    trigger: Annotated[str | None, typer.Option("--trigger", help="When this playbook applies.")] = None,
    rationale: Annotated[str | None, typer.Option("--rationale", help="Why this playbook matters.")] = None,
    agent_version: Annotated[str | None, typer.Option("--agent-version", help="Agent version (default cli).")] = None,
    instruction: Annotated[
        str, typer.Option("--instruction", help="Older name of the content (used when --content is empty).")
    ] = "",
    pitfall: Annotated[str, typer.Option("--pitfall", help="What to avoid; appended to the content.")] = "",
    user_id: UserOpt = None,
) -> None:
    """Add a user playbook directly (no extraction); searchable at once. Needs the user it belongs to.

    `--instruction` / `--pitfall` are the original's older playbook fields (its OpenClaw skill still passes them);
    its v4 prompt folded both into `content`, the one actionable text, and so does this command."""
    content = " ".join(
        part
        for part in (content.strip() or instruction.strip(), f"Avoid: {pitfall.strip()}" if pitfall.strip() else "")
        if part
    )
    if not content:
        usage(ctx, "--content (or --instruction) is required")
    if not user_id:
        usage(ctx, "--user-id is required: a user playbook belongs to a user here (or set REFLEXIO_USER_ID)")
    out = output(ctx)
    with out.errors(), client(ctx) as api:
        result = api.add_user_playbook(
            user_id,
            content,
            agent_version=agent_version or "cli",
            playbook_name=playbook_name,
            trigger=trigger,
            rationale=rationale,
        )
    out.emit(result, lambda: note(f"User playbook added: {content[:80]}"))


for _name, _calls in (
    ("update", ["PUT /api/update_user_playbook --data '{...}'"]),
    ("delete", ["DELETE /api/delete_user_playbook --data '{...}'"]),
    ("delete-all", ["DELETE /api/delete_all_user_playbooks"]),
    (
        "regenerate",
        ["POST /api/rerun_playbook_generation --data '{...}'", "POST /api/upgrade_all_user_playbooks --data '{}'"],
    ),
):
    unsupported(user_playbooks_app, _name, via_api(*_calls))


# -- status, api ----------------------------------------------------------------------------------------------------


@status_app.command("check")
def status_check(ctx: typer.Context) -> None:
    """Check that the service is reachable and healthy."""
    out = output(ctx)
    with out.errors(), client(ctx) as api:
        health = api.health()
    data = {"status": health.status, "url": out.server_url, "index_version": health.index_version}
    out.emit(data, lambda: typer.echo(f"Connected to {out.server_url} ({health.status})"))


@status_app.command("whoami")
def status_whoami(ctx: typer.Context) -> None:
    """The organisation the API key belongs to, and where its data lives (masked)."""
    out = output(ctx)
    with out.errors(), client(ctx) as api:
        me = api.whoami()
    out.emit(
        me,
        lambda: typer.echo(
            f"Endpoint: {out.server_url}\nOrg: {me.org_id}\nStorage: {me.storage_type} → {me.storage_label}"
        ),
    )


@app.command("api")
def api_call(
    ctx: typer.Context,
    method: Annotated[str, typer.Argument(help="HTTP method (GET, POST, PUT, DELETE).")],
    path: Annotated[str, typer.Argument(help="API path, e.g. /api/get_agent_playbooks.")],
    data: Annotated[str | None, typer.Option("--data", help="JSON body string or @filepath.")] = None,
) -> None:
    """Call any REST endpoint directly (docs/api.md)."""
    if method.upper() not in ("GET", "POST", "PUT", "DELETE"):
        usage(ctx, f"unsupported method {method!r}: use GET, POST, PUT or DELETE")
    try:
        body = json.loads(read_data(ctx, data)) if data is not None else None
    except json.JSONDecodeError as exc:
        usage(ctx, f"--data is not valid JSON: {exc}")
    out = output(ctx)
    with out.errors(), client(ctx) as api:
        answer = api.request(method, path if path.startswith("/") else "/" + path, body)
    out.emit(answer, lambda: typer.echo(json.dumps(answer, ensure_ascii=False, indent=2)))


# -- the original's commands for its own deployment ---------------------------------------------------------------

unsupported_group("services", "run the service with `reflexio-lake serve` (and the Dagster UI with `reflexio-lake ui`)")
unsupported_group(
    "auth",
    "pass --api-key / REFLEXIO_API_KEY and --server-url / REFLEXIO_URL; keys are created with "
    "`python -m serving keys create --org ID`",
)
unsupported_group(
    "config",
    via_api("GET /api/get_config") + " or `reflexio api POST /api/set_config --data @config.json`;"
    " storage and models are deployment settings (docs/configuration.md)",
)
unsupported_group("doctor", "use `reflexio-lake doctor`")
unsupported_group("setup", "the integrations are in reflexio_pipelines.integrations (docs/integrations.md)")
