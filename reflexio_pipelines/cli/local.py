"""Commands that run things on this machine: the service, the Dagster UI and the demo. Each replaces the CLI
process with the real program (exec), so signals, exit codes and logs are that program's own."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from reflexio_pipelines.cli.app import JsonFlag, app, output
from reflexio_pipelines.cli.output import Output

HostOpt = Annotated[str, typer.Option("--host", help="Interface to listen on (loopback by default).")]


def _exec(out: Output, argv: list[str], env: dict[str, str] | None = None) -> NoReturn:
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(argv[0], argv, env if env is not None else dict(os.environ))
    except OSError as exc:
        out.fail(f"cannot start {argv[0]}: {exc}", "reinstall the project: `pip install -e '.[dev]'`")
    raise AssertionError("unreachable")  # execvpe does not return


@app.command()
def serve(
    ctx: typer.Context,
    host: HostOpt = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535)] = 8081,
    lake: Annotated[Path | None, typer.Option("--lake", help="Lake root (default: $REFLEXIO_LAKE or ./lake).")] = None,
    log_level: Annotated[str, typer.Option("--log-level")] = "info",
    no_daemon: Annotated[
        bool, typer.Option("--no-daemon", help="Do not start the Dagster daemon (it runs elsewhere).")
    ] = False,
    json_mode: JsonFlag = False,
) -> None:
    """Run the service (`python -m serving`) and its Dagster daemon in the foreground; Ctrl-C stops both."""
    out = output(ctx, json_mode)
    argv = [sys.executable, "-m", "serving", "--host", host, "--port", str(port), "--log-level", log_level]
    if lake is not None:
        argv += ["--lake", str(lake)]
    if no_daemon:
        argv.append("--no-daemon")
    url = f"http://{host}:{port}"
    out.emit({"service": url, "argv": argv}, lambda: out.note(f"service starting on {url} (docs at {url}/docs)"))
    _exec(out, argv)


def _workspace_args() -> list[str]:
    """`-w workspace.yaml` from the working directory or the project checkout, else the installed code location."""
    for candidate in (Path("workspace.yaml"), Path(__file__).resolve().parents[2] / "workspace.yaml"):
        if candidate.is_file():
            return ["-w", str(candidate)]
    return ["-m", "reflexio_pipelines.definitions"]


@app.command()
def ui(
    ctx: typer.Context,
    host: HostOpt = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535)] = 3000,
    json_mode: JsonFlag = False,
) -> None:
    """Run the Dagster UI (`dagster dev`) with DAGSTER_HOME defaulting to ./.dagster_home, shared with the service."""
    from reflexio_pipelines.runs import ensure_dagster_home  # imports dagster: only for this command

    out = output(ctx, json_mode)
    home = ensure_dagster_home()
    dagster = Path(sys.executable).with_name("dagster")
    program = str(dagster) if dagster.exists() else (shutil.which("dagster") or "dagster")
    argv = [program, "dev", *_workspace_args(), "-h", host, "-p", str(port)]
    url = f"http://{host}:{port}"
    out.emit(
        {"ui": url, "dagster_home": str(home), "argv": argv},
        lambda: out.note(f"Dagster UI starting on {url} (DAGSTER_HOME={home})"),
    )
    _exec(out, argv, dict(os.environ, DAGSTER_HOME=str(home)))


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True}, add_help_option=False)
def demo(ctx: typer.Context) -> None:
    """Run the end-to-end demo (`python -m reflexio_pipelines demo`); every argument is passed through
    (e.g. `--once`, `--api-port`, `--ui-port`, `--help`)."""
    _exec(output(ctx, False), [sys.executable, "-m", "reflexio_pipelines", "demo", *ctx.args])
