"""The one entry point through which anything outside the code location starts pipeline runs.

Used by `python -m reflexio_pipelines materialize`, by the service for `wait_for_response=true`, by the demo and by
tests. Runs execute in-process but are real Dagster runs recorded in the instance at $DAGSTER_HOME, so they show up
in the Dagster UI next to the runs the sensor launches.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import dagster as dg

from reflexio_pipelines.jobs import MAX_NEW_TURNS_PER_BUILD, learning_run_config
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.pending import pending_windows, unindexed_turn_files
from reflexio_pipelines.settings import Settings, load_settings

DEFAULT_DAGSTER_HOME = ".dagster_home"
_DAGSTER_YAML = "telemetry:\n  enabled: false\n"

# One in-process launch at a time per lake: concurrent wait_for_response publishes of one organisation queue here
# instead of racing, while another organisation's runs (its own lake) go on in parallel.
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()

# Step-by-step DEBUG events belong in the Dagster UI's run view, not on the caller's console.
_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def _no_logging_reset_per_run() -> None:
    """Stop Dagster re-running `logging.config.dictConfig` at the start of every run when `dagster.yaml` names no
    Python log handlers.

    Dagster (1.13) calls it whenever the instance has any settings, only to collect the handlers `python_logs`
    configures. The call holds the logging module's lock while it flushes and closes every handler of the process,
    so a run starting in one thread deadlocks with a run logging in another (two organisations learning in
    parallel, or one's wait_for_response publish beside another's sensor pass). With no handlers configured it
    collects none: answer that without the call. A configured `dagster_handler_config` keeps Dagster's behaviour.
    """
    try:
        from dagster._core.instance.methods.event_methods import EventMethods
    except ImportError:  # another Dagster layout: nothing to patch
        return
    original = EventMethods.get_yaml_python_handlers
    if getattr(original, "_reflexio_patched", False):
        return

    def get_yaml_python_handlers(self) -> list:
        if not (self.get_python_log_dagster_handler_config() or {}).get("handlers"):
            return []
        return original(self)

    get_yaml_python_handlers._reflexio_patched = True  # type: ignore[attr-defined]
    EventMethods.get_yaml_python_handlers = get_yaml_python_handlers  # type: ignore[method-assign]


_no_logging_reset_per_run()


def _lake_lock(lake_root: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(str(lake_root), threading.Lock())


@contextmanager
def exclusive(lake_root: str) -> Iterator[None]:
    """Hold off every in-process run of this process on the lake at `lake_root` (erasure: no run may read the lake
    before and write after)."""
    with _lake_lock(lake_root):
        yield


@dataclass
class LaunchResult:
    """What a launch did: the windows it processed and the Dagster run ids, in order."""

    partition_keys: list[str] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    success: bool = True
    index_version: str | None = None


def ensure_dagster_home(path: str | Path | None = None) -> Path:
    """Make sure $DAGSTER_HOME exists with telemetry off; default `./.dagster_home`. Returns the directory."""
    home = Path(path or os.environ.get("DAGSTER_HOME") or DEFAULT_DAGSTER_HOME).expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text(_DAGSTER_YAML)
    os.environ["DAGSTER_HOME"] = str(home)
    return home


#: Opening the instance creates its SQLite storage on first use; two threads doing that at once (two organisations'
#: first runs) race on `CREATE TABLE` and one run fails. One opening at a time.
_instance_guard = threading.Lock()


#: In-process runs record no stdout/stderr capture ("compute logs"). Dagster captures a run's output by swapping the
#: process's file descriptors 1 and 2, and in the service one process runs every organisation's runs side by side
#: with its own log lines: one organisation's run would record what every other thread printed meanwhile, another
#: organisation's errors included. Their run logs are the event log (per run: steps, materialisations, errors);
#: runs the Dagster daemon launches, one process each, keep the configured capture.
IN_PROCESS_OVERRIDES = {
    "compute_logs": {"module": "dagster._core.storage.noop_compute_log_manager", "class": "NoOpComputeLogManager"}
}


def default_instance() -> dg.DagsterInstance:
    """The persistent instance at $DAGSTER_HOME (shared with `dagster dev`, so runs are visible in the UI), as
    in-process runs use it (`IN_PROCESS_OVERRIDES`)."""
    from dagster._core.instance.ref import InstanceRef

    with _instance_guard:
        home = ensure_dagster_home()
        return dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home), overrides=IN_PROCESS_OVERRIDES))


def launch(
    partition_keys: list[str] | None = None,
    *,
    settings: Settings | None = None,
    instance: dg.DagsterInstance | None = None,
    rebuild_index: bool = True,
    flush: Literal["all", "due"] = "all",
    flush_users: list[str] | tuple[str, ...] = (),
) -> LaunchResult:
    """Materialise the given windows (default: every pending one), then rebuild and publish the index.

    Each window is one `extract_job` run; the index is rebuilt once at the end by `index_job` (also when nothing
    was pending but no index has been published yet). `flush="all"` extracts every new turn (a deliberate run);
    `"due"` holds back incomplete windows of active sessions as the sensor's runs do, except `flush_users`' turns
    (`wait_for_response`). Raises `dg.DagsterError` subclasses on failure after recording the failed run.
    """
    from reflexio_pipelines.definitions import build_definitions
    from reflexio_pipelines.search.versions import current_version

    settings = settings or load_settings()
    defs = build_definitions(settings)
    lake = Lake.at(settings.lake)
    with _lake_lock(str(lake.root)):
        instance = instance or default_instance()
        keys = (
            partition_keys
            if partition_keys is not None
            else [p.partition_key for p in pending_windows(lake, GRANULARITY)]
        )
        result = LaunchResult(partition_keys=list(keys))
        run_config = {**_RUN_CONFIG, **learning_run_config(flush, flush_users)}
        for key in keys:
            result.run_ids.append(_extract(defs, settings, instance, key, run_config))
        # Every build takes in the turns published since the served version: without it a wait_for_response or CLI
        # build indexed learned items only and left every landing file to serving's per-query fallback (272 files of
        # a long-conversation benchmark stayed unindexed, 129 ms mean search and growing with the backlog).
        if rebuild_index and (keys or current_version(lake.index_root) is None or unindexed_turn_files(lake)):
            result.run_ids.append(_rebuild_index(defs, instance, index_turns=True))
        result.index_version = current_version(lake.index_root)
        return result


def _extract(
    defs: dg.Definitions, settings: Settings, instance: dg.DagsterInstance, partition_key: str, run_config: dict
) -> str:
    """One `extract_job` run of a window; its run id. Raises as `execute_in_process` does when the run fails.

    Unsharded, in this process. With `learning_shards` > 1, through the definitions' multiprocess executor, so
    that the shards learn in parallel processes. Those load the code location as the daemon's runs do: from the
    environment and config file, with this launch's lake and shard count."""
    if settings.learning_shards <= 1:
        job = defs.resolve_job_def("extract_job")
        return job.execute_in_process(partition_key=partition_key, instance=instance, run_config=run_config).run_id
    job = dg.build_reconstructable_job(
        __name__,
        extract_job.__name__,
        reconstructable_kwargs={"lake": str(Lake.at(settings.lake).root), "learning_shards": settings.learning_shards},
    )
    with dg.execute_job(
        job, instance=instance, run_config=run_config, tags={"dagster/partition": partition_key}, raise_on_error=True
    ) as run:
        return run.run_id


def extract_job(lake: str, learning_shards: int) -> dg.JobDefinition:
    """`extract_job` of the code location the environment configures, on `lake` with `learning_shards` (what the
    processes of a fanned-out run load: a reconstructable job is named by a module-level function)."""
    from reflexio_pipelines.definitions import build_definitions

    settings = load_settings({"lake": lake, "learning_shards": learning_shards})
    return build_definitions(settings).resolve_job_def("extract_job")


#: job name -> the op whose config and output an operation uses
_OPERATION_OPS = {"rerun_job": "rerun_extraction", "lifecycle_job": "change_lifecycle_status"}


def run_operation(
    job_name: str,
    config: dict,
    *,
    settings: Settings | None = None,
    instance: dg.DagsterInstance | None = None,
) -> dict:
    """Run a lifecycle operation job (`rerun_job` or `lifecycle_job`) with `config`, then rebuild and publish the
    index so serving reflects the change. Returns the op's result (counts)."""
    from reflexio_pipelines.definitions import build_definitions

    settings = settings or load_settings()
    defs = build_definitions(settings)
    op_name = _OPERATION_OPS[job_name]
    with _lake_lock(str(Lake.at(settings.lake).root)):
        instance = instance or default_instance()
        run = defs.resolve_job_def(job_name).execute_in_process(
            run_config={"ops": {op_name: {"config": config}}, **_RUN_CONFIG}, instance=instance
        )
        output = run.output_for_node(op_name)
        _rebuild_index(defs, instance)
        return output


def run_aggregation(
    config: dict,
    *,
    settings: Settings | None = None,
    instance: dg.DagsterInstance | None = None,
) -> dict:
    """Run `aggregation_job` (embed, cluster, consolidate, re-index) with `config` (AggregationConfig fields).
    Returns the run id, its status and the agent_playbooks materialisation's counts."""
    from reflexio_pipelines.definitions import build_definitions

    settings = settings or load_settings()
    defs = build_definitions(settings)
    with _lake_lock(str(Lake.at(settings.lake).root)):
        instance = instance or default_instance()
        run = defs.resolve_job_def("aggregation_job").execute_in_process(
            run_config={"ops": {"agent_playbook_aggregation": {"config": config}}, **_RUN_CONFIG}, instance=instance
        )
    (materialization,) = [
        m
        for m in run.asset_materializations_for_node("agent_playbook_aggregation")
        if m.asset_key.path[-1] == "agent_playbooks"
    ]
    counts = {k: v.value for k, v in materialization.metadata.items() if isinstance(v.value, int)}
    return {"run_id": run.run_id, "success": run.success, **counts}


def run_evaluation(
    now: int | None = None,
    *,
    sessions: list[str] | None = None,
    settings: Settings | None = None,
    instance: dg.DagsterInstance | None = None,
) -> dict:
    """Run `evaluation_job`: judge the sampled sessions closed by `now` (default: the current time), or exactly the
    named `sessions` (grade on demand), refresh impact metrics. Returns the run id and the session_evaluations
    counts."""
    from reflexio_pipelines.definitions import build_definitions

    settings = settings or load_settings()
    defs = build_definitions(settings)
    with _lake_lock(str(Lake.at(settings.lake).root)):
        instance = instance or default_instance()
        run = defs.resolve_job_def("evaluation_job").execute_in_process(
            run_config={
                "ops": {
                    "session_evaluation": {"config": {"now": now, "sessions": sorted(set(sessions or ()))}},
                    "learned_item_outcomes": {"config": {"now": now}},
                },
                **_RUN_CONFIG,
            },
            instance=instance,
        )
    (materialization,) = [
        m
        for m in run.asset_materializations_for_node("session_evaluation")
        if m.asset_key.path[-1] == "session_evaluations"
    ]
    counts = {k: v.value for k, v in materialization.metadata.items() if isinstance(v.value, (int, float))}
    return {"run_id": run.run_id, "success": run.success, **counts}


def rebuild_index(
    *,
    settings: Settings | None = None,
    instance: dg.DagsterInstance | None = None,
    compact: bool = False,
    index_turns: bool = True,
) -> str:
    """Run `index_job` (index everything live, incl. manual curation, and publish it): a delta on the current
    version, or with `compact` a full rebuild (a new base); with `index_turns` it also takes in the turns published
    since the current version. Returns the run id."""
    from reflexio_pipelines.definitions import build_definitions

    settings = settings or load_settings()
    defs = build_definitions(settings)
    with _lake_lock(str(Lake.at(settings.lake).root)):
        return _rebuild_index(defs, instance or default_instance(), compact=compact, index_turns=index_turns)


def _rebuild_index(
    defs: dg.Definitions, instance: dg.DagsterInstance, *, compact: bool = False, index_turns: bool = True
) -> str:
    config = {"compact": compact, "index_turns": index_turns, "max_new_turns": MAX_NEW_TURNS_PER_BUILD}
    run_config = {**_RUN_CONFIG, "ops": {"search_index": {"config": config}}}
    run = defs.resolve_job_def("index_job").execute_in_process(instance=instance, run_config=run_config)
    return run.run_id
