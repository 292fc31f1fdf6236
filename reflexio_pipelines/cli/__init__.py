"""`reflexio-lake`: the command line (typer + rich). Every command that talks to the service does so through the
SDK (`reflexio_pipelines.sdk`). See docs/cli.md."""

from __future__ import annotations

from reflexio_pipelines.cli import commands, doctor, local, setup  # noqa: F401  (registers the commands on `app`)
from reflexio_pipelines.cli.app import app


def main() -> None:
    """Console-script entry point (`reflexio-lake`, `python -m reflexio_pipelines.cli`)."""
    app()


__all__ = ["app", "main"]
