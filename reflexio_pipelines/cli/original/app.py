"""The `reflexio` typer application: the original CLI's global options, its output conventions and exit codes.

Output as the original's: results on stdout, notes on stderr; with `--json` one envelope `{"ok": true, "data": ...,
"meta": ...}` on stdout, and errors as `{"ok": false, "error": {"type", "message", "hint"}}` on stderr. An error is one
line (`Error: <what> — <what to do>`), never a traceback. Exit codes are the original's: 0 ok, 1 failed, 2 usage or
validation (also: a command of the original that has no counterpart here), 3 not authorised, 4 service unreachable.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, NoReturn

import typer

from reflexio_pipelines.cli.output import Output, explain, plain
from reflexio_pipelines.sdk import (
    APIConnectionError,
    AuthenticationError,
    ReflexioClient,
    ReflexioError,
    ValidationError,
)
from reflexio_pipelines.sdk.base import DEFAULT_BASE_URL

EXIT_FAILED, EXIT_USAGE, EXIT_AUTH, EXIT_NETWORK = 1, 2, 3, 4
VERSION = "0.1.0"

app = typer.Typer(
    name="reflexio",
    help="The original Reflexio CLI's commands for the loop (publish, search, profiles, playbooks, status) on this "
    "service. Everything else: `reflexio-lake --help`.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@dataclass
class State:
    server_url: str
    api_key: str | None
    json_mode: bool


def _version(value: bool) -> None:
    if value:
        typer.echo(f"reflexio {VERSION} (reflexio-lake)")
        raise typer.Exit


@app.callback()
def configure(
    ctx: typer.Context,
    json_mode: Annotated[bool, typer.Option("--json", help="Output structured JSON envelopes.")] = False,
    server_url: Annotated[
        str, typer.Option("--server-url", envvar=["REFLEXIO_URL", "REFLEXIO_API_URL"], help="The service's base URL.")
    ] = DEFAULT_BASE_URL,
    api_key: Annotated[
        str | None, typer.Option("--api-key", envvar="REFLEXIO_API_KEY", help="API key, sent as a Bearer token.")
    ] = None,
    _: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Show version.")] = False,
) -> None:
    """Global options (as the original's)."""
    ctx.obj = State(server_url=server_url.rstrip("/"), api_key=api_key, json_mode=json_mode)


def _exit_code(error: ReflexioError) -> int:
    if isinstance(error, APIConnectionError):
        return EXIT_NETWORK
    if isinstance(error, AuthenticationError):
        return EXIT_AUTH
    if isinstance(error, ValidationError):
        return EXIT_USAGE
    return EXIT_FAILED


class Envelopes(Output):
    """`Output` with the original CLI's envelopes, one-line errors and exit codes."""

    def emit(self, data: Any, human: Callable[[], None] | None = None, meta: dict[str, Any] | None = None) -> None:
        if self.json_mode or human is None:
            envelope = {"ok": True, "data": plain(data), **({"meta": meta} if meta else {})}
            typer.echo(json.dumps(envelope, ensure_ascii=False, indent=2, default=str))
        else:
            human()

    def fail(self, message: str, hint: str = "", code: int = EXIT_FAILED, kind: str = "general") -> NoReturn:
        if self.json_mode:
            error = {"type": kind, "message": message, **({"hint": hint} if hint else {})}
            print(json.dumps({"ok": False, "error": error}, ensure_ascii=False), file=sys.stderr)
        else:
            print(f"Error: {message}" + (f" — {hint}" if hint else ""), file=sys.stderr)
        raise typer.Exit(code)

    def report(self, error: ReflexioError) -> NoReturn:
        message, hint, _ = explain(error, self.server_url)
        kind = {EXIT_NETWORK: "network", EXIT_AUTH: "auth", EXIT_USAGE: "validation"}.get(_exit_code(error), "api")
        self.fail(message, hint, _exit_code(error), kind)


def output(ctx: typer.Context) -> Envelopes:
    state: State = ctx.obj
    return Envelopes(state.json_mode, state.server_url)


def client(ctx: typer.Context) -> ReflexioClient:
    state: State = ctx.obj
    # One retry, not the SDK's three: the original's hooks run `reflexio search` before every prompt, and a stopped
    # service must cost the agent a moment, not seconds of backoff.
    return ReflexioClient(base_url=state.server_url, api_key=state.api_key, max_retries=1)


def usage(ctx: typer.Context, message: str, hint: str = "") -> NoReturn:
    """Exit 2 (the original's validation exit code) with a one-line message."""
    output(ctx).fail(message, hint, EXIT_USAGE, "validation")


#: Accept whatever options the original took, so the message below is what the caller sees (not a usage error).
_ANY_ARGS = {"allow_extra_args": True, "ignore_unknown_options": True}


def unsupported(group: typer.Typer, name: str, instead: str) -> None:
    """Register the original's command `name` on `group` as one that has no counterpart here: it exits 2 and says
    what to use instead."""

    @group.command(name, context_settings=_ANY_ARGS, add_help_option=False, help=f"Not available here: {instead}")
    def command(ctx: typer.Context) -> None:
        usage(ctx, f"`{ctx.command_path}` is not available with this service", instead)


def unsupported_group(name: str, instead: str) -> None:
    """Register the original's command group `name` (every subcommand) as one that has no counterpart here."""
    unsupported(app, name, instead)
