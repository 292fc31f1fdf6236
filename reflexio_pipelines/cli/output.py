"""How the CLI talks to people and scripts: results on stdout (JSON with `--json`), progress and errors on stderr,
and one mapping from failures to a message, a next step and an exit code (0 ok, 1 operation failed, 2 usage)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table
from rich.text import Text

from reflexio_pipelines.sdk import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    NotFoundError,
    RateLimitError,
    ReflexioError,
    ServerError,
    ValidationError,
)

EXIT_FAILED = 1
EXIT_USAGE = 2


def plain(data: Any) -> Any:
    """`data` with pydantic models turned into JSON-ready dicts."""
    if isinstance(data, BaseModel):
        return data.model_dump(mode="json")
    if isinstance(data, dict):
        return {key: plain(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [plain(item) for item in data]
    return data


def explain(error: ReflexioError, server_url: str) -> tuple[str, str, int]:
    """(message, what to do next, exit code) for an SDK error."""
    if isinstance(error, APITimeoutError):
        return (
            f"no answer from {server_url} within the timeout",
            "the service may be busy with a run; retry, or look at its log",
            EXIT_FAILED,
        )
    if isinstance(error, APIConnectionError):
        return (
            f"service not reachable at {server_url}",
            "start it with `reflexio-lake serve`, or point --server-url / REFLEXIO_API_URL at it",
            EXIT_FAILED,
        )
    if isinstance(error, AuthenticationError):
        return (f"not authorised: {error.message}", "pass a valid key with --api-key or REFLEXIO_API_KEY", EXIT_FAILED)
    if isinstance(error, ValidationError):
        return f"rejected: {error.message}", "fix the field named above and try again", EXIT_USAGE
    if isinstance(error, NotFoundError):
        return error.message, "check the id or name (list them with `reflexio-lake playbooks list`)", EXIT_FAILED
    if isinstance(error, RateLimitError):
        wait = f" after {error.retry_after:.0f} s" if error.retry_after else " later"
        return f"rate limited: {error.message}", f"try again{wait}", EXIT_FAILED
    if isinstance(error, ServerError):
        return (
            f"the service failed: {error.message}",
            "see the service log, and failed runs in the Dagster UI (`reflexio-lake ui`)",
            EXIT_FAILED,
        )
    return error.message, "see the service log for details", EXIT_FAILED


class Output:
    """Where a command's results, progress and errors go. In JSON mode stdout carries exactly one JSON document."""

    def __init__(self, json_mode: bool, server_url: str) -> None:
        self.json_mode = json_mode
        self.server_url = server_url
        self.out = Console(highlight=False, soft_wrap=True)
        self.err = Console(stderr=True, highlight=False, soft_wrap=True)

    def emit(self, data: Any, human: Callable[[], None] | None = None) -> None:
        """The command's result: `data` as JSON in JSON mode, else whatever `human` prints (default: JSON)."""
        if self.json_mode or human is None:
            typer.echo(json.dumps(plain(data), ensure_ascii=False, indent=None if self.json_mode else 2))
        else:
            human()

    def note(self, message: str) -> None:
        """A remark for people (stderr, so stdout stays the result)."""
        self.err.print(Text(message))

    @contextmanager
    def progress(self, message: str) -> Iterator[None]:
        """A spinner on stderr while a long call runs."""
        with self.err.status(Text(message), spinner="dots"):
            yield

    def fail(self, message: str, hint: str = "", code: int = EXIT_FAILED) -> NoReturn:
        """Report a failure (stderr; also stdout in JSON mode) and exit with `code`."""
        if self.json_mode:
            typer.echo(json.dumps({"success": False, "error": message, "hint": hint, "exit_code": code}))
        self.err.print(Text("✗ ", style="bold red") + Text(message))
        if hint:
            self.err.print(Text("  → " + hint, style="yellow"))
        raise typer.Exit(code)

    @contextmanager
    def errors(self) -> Iterator[None]:
        """Turn SDK errors raised inside into a message, a next step and an exit code."""
        try:
            yield
        except ReflexioError as error:
            self.report(error)

    def report(self, error: ReflexioError) -> NoReturn:
        """Fail with what `explain` makes of an SDK error (the `reflexio` CLI reports it in its own shape)."""
        self.fail(*explain(error, self.server_url))

    def table(self, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """A table on stdout; cells are shown literally (learned text may contain brackets)."""
        if not rows:
            self.out.print(Text(f"{title}: none", style="dim"))
            return
        table = Table(title=title, title_justify="left", show_lines=False)
        for column in columns:
            table.add_column(column, overflow="fold", no_wrap=column == "id")  # ids are copied into other commands
        for row in rows:
            table.add_row(*(Text("" if cell is None else str(cell)) for cell in row))
        self.out.print(table)
