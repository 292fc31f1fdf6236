"""The typer application, its global options and what every command needs from them (an Output and a client)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

from reflexio_pipelines.cli.output import Output
from reflexio_pipelines.sdk import ReflexioClient
from reflexio_pipelines.sdk.base import DEFAULT_BASE_URL

app = typer.Typer(
    name="reflexio-lake",
    help="Publish conversations, search what was learned, review playbooks, and run the service, UI and demo.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
profiles_app = typer.Typer(help="User profiles (facts about users).", no_args_is_help=True)
playbooks_app = typer.Typer(help="Playbooks (behaviour rules) and their approval.", no_args_is_help=True)
operations_app = typer.Typer(
    help="Background operations (reruns): status, and cancel (--force clears a hung one).", no_args_is_help=True
)
app.add_typer(profiles_app, name="profiles")
app.add_typer(playbooks_app, name="playbooks")
app.add_typer(operations_app, name="operations")

#: `--json` on every command (also accepted before the command name).
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one machine-readable JSON document on stdout.")]


@dataclass
class Globals:
    server_url: str
    api_key: str | None
    json_mode: bool


@app.callback()
def configure(
    ctx: typer.Context,
    server_url: Annotated[
        str, typer.Option("--server-url", envvar="REFLEXIO_API_URL", help="The service's base URL.")
    ] = DEFAULT_BASE_URL,
    api_key: Annotated[
        str | None, typer.Option("--api-key", envvar="REFLEXIO_API_KEY", help="API key, sent as a Bearer token.")
    ] = None,
    json_mode: JsonFlag = False,
) -> None:
    """Global options."""
    ctx.obj = Globals(server_url=server_url.rstrip("/"), api_key=api_key, json_mode=json_mode)


def output(ctx: typer.Context, json_mode: bool) -> Output:
    """The command's Output: JSON if `--json` was given globally or to the command."""
    g: Globals = ctx.obj
    return Output(json_mode or g.json_mode, g.server_url)


def client(ctx: typer.Context) -> ReflexioClient:
    """An SDK client for the configured service."""
    g: Globals = ctx.obj
    return ReflexioClient(base_url=g.server_url, api_key=g.api_key)
