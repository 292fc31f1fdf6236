"""Retrieval experiments (the original's `/api/retrieval_experiments`): one active user-level holdout experiment per
organisation, its history kept. An experiment is this project's holdout (learning/holdout.py) with a name and a
period: starting one sets the stored config's holdout to the experiment's share for every agent version (what the
search router and the outcome counters already apply), stopping it restores the holdout it replaced. The record
lives in `state/retrieval_experiments.json` (no user data); results: learning/experiment_results.py.
"""

from __future__ import annotations

import json
import time
from typing import Any

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.reported_outcomes import outcomes
from reflexio_pipelines.learning.config import ExtractionConfig, HoldoutSettings
from reflexio_pipelines.learning.config_loading import resolve_extraction_config
from reflexio_pipelines.learning.experiment_results import experiment_results
from reflexio_pipelines.storage import LakePath, write_bytes


class ExperimentConflict(ValueError):
    """Refused: another experiment is active (start), or the named one is not the active one (stop)."""


def _path(lake: Lake) -> LakePath:
    return lake.root / "state" / "retrieval_experiments.json"


def _read(lake: Lake) -> dict[str, Any]:
    path = _path(lake)
    return json.loads(path.read_text()) if path.exists() else {"active": None, "history": [], "replaced": None}


def _write(lake: Lake, state: dict[str, Any]) -> None:
    write_bytes(_path(lake), json.dumps(state, sort_keys=True).encode())


def _public(record: dict[str, Any]) -> dict[str, Any]:
    return {k: record[k] for k in ("experiment_id", "holdout_percentage", "started_at", "ended_at")}


def listing(lake: Lake) -> dict[str, Any]:
    """The original's RetrievalExperimentListResponse: the active experiment and every one ever started."""
    state = _read(lake)
    active = next((r for r in state["history"] if r["experiment_id"] == state["active"]), None)
    return {
        "active_experiment": _public(active) if active else None,
        "experiments": list(map(_public, state["history"])),
    }


def _store_holdout(lake: Lake, fallback: str | None, holdout: HoldoutSettings) -> None:
    config: ExtractionConfig = resolve_extraction_config(lake.extraction_config(fallback))
    write_bytes(lake.extraction_config_path, config.model_copy(update={"holdout": holdout}).to_json().encode())


def start(lake: Lake, fallback: str | None, experiment_id: str, holdout_percentage: float) -> dict[str, Any]:
    """Start the organisation's only active experiment (ids are never reused); its share applies to the next
    search."""
    with lake.lock("retrieval-experiments", timeout_s=30):
        state = _read(lake)
        if state["active"] is not None:
            raise ExperimentConflict(f"experiment {state['active']!r} is active; stop it first")
        if any(r["experiment_id"] == experiment_id for r in state["history"]):
            raise ExperimentConflict(f"experiment {experiment_id!r} already ran; use a new experiment_id")
        current = resolve_extraction_config(lake.extraction_config(fallback)).holdout
        record = {
            "experiment_id": experiment_id,
            "holdout_percentage": holdout_percentage,
            "started_at": int(time.time()),
            "ended_at": None,
        }
        state = {
            "active": experiment_id,
            "history": [*state["history"], record],
            "replaced": current.model_dump(mode="json"),
        }
        _store_holdout(lake, fallback, HoldoutSettings(share=holdout_percentage / 100, agent_versions={}))
        _write(lake, state)
    return listing(lake)


def stop(lake: Lake, fallback: str | None, experiment_id: str) -> dict[str, Any]:
    """Stop the active experiment (it must be `experiment_id`) and restore the holdout it replaced."""
    with lake.lock("retrieval-experiments", timeout_s=30):
        state = _read(lake)
        if state["active"] != experiment_id:
            raise ExperimentConflict(f"experiment {experiment_id!r} is not the active experiment")
        now = int(time.time())
        history = [dict(r, ended_at=now) if r["experiment_id"] == experiment_id else r for r in state["history"]]
        _store_holdout(lake, fallback, HoldoutSettings.model_validate(state["replaced"] or {}))
        _write(lake, {"active": None, "history": history, "replaced": None})
    return listing(lake)


def results(lake: Lake, experiment_id: str) -> dict[str, Any] | None:
    """Both arms' metrics for the experiment, or None if it never ran (learning/experiment_results.py)."""
    record = next((r for r in _read(lake)["history"] if r["experiment_id"] == experiment_id), None)
    if record is None:
        return None
    sessions = lake.read_table("session_outcomes").to_pylist()
    ids = [s["session_id"] for s in sessions]
    verdicts = {row["session_id"]: row for row in outcomes(lake, ids)} if ids else {}
    evaluations = {
        row["session_id"]: row
        for row in sorted(lake.read_table("session_evaluations").to_pylist(), key=lambda r: r["created_at"] or 0)
    }
    return experiment_results(_public(record), sessions, verdicts, evaluations)
