"""`reflexio-lake setup claude-code`: install (or `--uninstall`) Reflexio's Claude Code hooks in a settings file.

The hooks run `python -m reflexio_pipelines.integrations.claude_code.hooks` with this interpreter (the project's
environment, where reflexio-lake is installed): UserPromptSubmit puts the learned context next to the prompt,
Stop and SessionEnd publish the session transcript. See docs/integrations.md#claude-code.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from reflexio_pipelines.cli.app import JsonFlag, app, output
from reflexio_pipelines.cli.output import EXIT_USAGE
from reflexio_pipelines.integrations.claude_code import settings as cc

setup_app = typer.Typer(
    help="Connect coding agents to Reflexio (writes their hook configuration).", no_args_is_help=True
)
app.add_typer(setup_app, name="setup")


def _explicit_server_url(ctx: typer.Context) -> str | None:
    """The global `--server-url` when it was given on the command line (written into the hooks), else None: the
    hooks then read $REFLEXIO_API_URL when they run, as Claude Code passes its environment on."""
    source = ctx.find_root().get_parameter_source("server_url")
    if getattr(source, "name", None) != "COMMANDLINE":  # by name: typer may bring its own copy of click's enum
        return None
    return ctx.obj.server_url


@setup_app.command("claude-code")
def claude_code(
    ctx: typer.Context,
    project_dir: Annotated[
        Path,
        typer.Option(
            "--project-dir", help="The project whose .claude/settings.json to edit (default: the current directory)."
        ),
    ] = Path("."),
    global_: Annotated[
        bool, typer.Option("--global", help="Edit ~/.claude/settings.json (every project) instead.")
    ] = False,
    uninstall: Annotated[
        bool, typer.Option("--uninstall", help="Remove Reflexio's hooks, keep everything else.")
    ] = False,
    user_id: Annotated[
        str | None,
        typer.Option(
            "--user-id",
            help="Reflexio user of the sessions (default at hook time: $REFLEXIO_USER_ID, else the login name).",
        ),
    ] = None,
    agent_version: Annotated[
        str | None,
        typer.Option("--agent-version", help="Agent version to publish and search under (default: claude-code)."),
    ] = None,
    python: Annotated[
        str | None,
        typer.Option(
            "--python",
            help="Interpreter the hooks run with (default: this one, the environment reflexio-lake is installed in).",
        ),
    ] = None,
    json_mode: JsonFlag = False,
) -> None:
    """Write the Claude Code hooks (UserPromptSubmit → context, Stop/SessionEnd → publish the transcript) into
    .claude/settings.json; idempotent, other settings kept; `--uninstall` removes exactly these hooks."""
    out = output(ctx, json_mode)
    path = ((Path.home() if global_ else project_dir.expanduser()) / ".claude" / "settings.json").absolute()
    if not global_ and not project_dir.is_dir():
        out.fail(f"no such project directory: {project_dir}", "pass --project-dir DIR", EXIT_USAGE)
    try:
        current = cc.read_settings(path)
    except cc.SettingsError as exc:
        out.fail(str(exc), "the file was left unchanged", EXIT_USAGE)
    if uninstall:
        updated = cc.uninstalled(current)
        commands: dict[str, str] = {}
    else:
        interpreter = python or str(Path(sys.executable).absolute())
        options = {"server-url": _explicit_server_url(ctx), "user-id": user_id, "agent-version": agent_version}
        commands = cc.commands_for(interpreter, options)
        updated = cc.installed(current, commands)
    changed = updated != current
    if changed and uninstall and not updated:  # the file held nothing but the hooks: remove it (and an empty .claude)
        path.unlink()
        if not any(path.parent.iterdir()):
            path.parent.rmdir()
    elif changed:
        cc.write_settings(path, updated)
    action = ("uninstalled" if uninstall else "installed") if changed else "unchanged"
    result = {"settings": str(path), "action": action, "hooks": cc.reflexio_hooks(updated)}

    def human() -> None:
        if uninstall:
            out.note(
                f"✓ Reflexio's Claude Code hooks removed from {path}"
                if changed
                else f"no Reflexio hooks in {path}: nothing to remove"
            )
            return
        verb = "installed in" if changed else "already up to date in"
        out.note(f"✓ Reflexio's Claude Code hooks {verb} {path}")
        for event, event_commands in result["hooks"].items():
            out.note(f"  {event}: {event_commands[0]}")
        out.note("  the service key is read from $REFLEXIO_API_KEY when the hooks run (never stored in the file)")

    out.emit(result, human)
