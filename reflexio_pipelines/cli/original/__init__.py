"""`reflexio`: the original Reflexio CLI's command names and flags for the loop, on this service's SDK, so the
original's integrations (hooks and skills that shell out to `reflexio search ...`, `reflexio publish ...`,
`reflexio agent-playbooks aggregate ...`) work unchanged. See docs/cli.md."""

from __future__ import annotations

from reflexio_pipelines.cli.original import commands  # noqa: F401  (registers the commands on `app`)
from reflexio_pipelines.cli.original.app import app


def main() -> None:
    """Console-script entry point (`reflexio`, `python -m reflexio_pipelines.cli.original`)."""
    app()


__all__ = ["app", "main"]
