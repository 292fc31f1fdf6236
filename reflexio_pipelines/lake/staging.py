"""Staged shard outputs of a fanned-out learning run (assets/learning_shards.py), kept in the lake until the run's
commit step folds them into the window's tables.

Under `state/staging/learning/<window>/<run_id>/`: `plan.json` (how the run paces the window, the users of each
shard, the stamp of what was committed when it planned) and one `shard-<k>.json` per shard (a `LearnOutput`).
They go through the lake, not Dagster's IO manager, because they hold users' words: Dagster's run storage would
keep them out of erasure's reach. The commit deletes its run's staging; erasure deletes all of it (with what a killed run left) (a run whose
staging vanished learns its window again at its commit, see `learning_shards.commit_shards`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.learning.batch import Failure, LearnOutput, LearnStats
from reflexio_pipelines.learning.llm_failures import FailureSummary
from reflexio_pipelines.learning.windows import Pace
from reflexio_pipelines.storage import LakePath, remove_tree, write_bytes


@dataclass(frozen=True)
class ShardPlan:
    """How one fanned-out run learns a window: the pace every shard applies (fixed once, so every shard decides
    alike what is due), the window's users in learning order, their shard, and the window's stamp at planning."""

    window: str
    run_id: str
    count: int
    pace: Pace
    rebuild: bool
    users: tuple[str, ...]
    shards: tuple[int, ...]  # shards[i] is the shard of users[i]
    stamp: str

    def users_of(self, shard: int) -> list[str]:
        """The users of `shard`, in the window's learning order."""
        return [u for u, s in zip(self.users, self.shards, strict=True) if s == shard]

    def active_shards(self) -> list[int]:
        """The shards holding at least one user (an empty window has none)."""
        return sorted(set(self.shards))


def staging_root(lake: Lake) -> LakePath:
    """Where every fanned-out run stages its shards."""
    return lake.root / "state" / "staging" / "learning"


def run_dir(lake: Lake, window: str, run_id: str) -> LakePath:
    """The staging directory of one run of one window."""
    return staging_root(lake) / window / run_id


def write_plan(lake: Lake, plan: ShardPlan) -> None:
    """Stage the run's plan (before any shard starts)."""
    doc = dataclasses.asdict(plan)
    doc["pace"]["flush_users"] = sorted(plan.pace.flush_users)
    write_bytes(run_dir(lake, plan.window, plan.run_id) / "plan.json", json.dumps(doc).encode())


def read_plan(lake: Lake, window: str, run_id: str) -> ShardPlan | None:
    """The run's plan, None when it is gone (erased, or the window's staging was dropped)."""
    path = run_dir(lake, window, run_id) / "plan.json"
    if not path.exists():
        return None
    raw = json.loads(path.read_bytes())
    pace = Pace(**{**raw["pace"], "flush_users": frozenset(raw["pace"]["flush_users"])})
    return ShardPlan(**{**raw, "pace": pace, "users": tuple(raw["users"]), "shards": tuple(raw["shards"])})


def _shard_path(lake: Lake, window: str, run_id: str, shard: int) -> LakePath:
    return run_dir(lake, window, run_id) / f"shard-{shard}.json"


def write_shard(lake: Lake, window: str, run_id: str, shard: int, output: LearnOutput) -> None:
    """Stage one shard's output."""
    doc = {
        "profiles": output.profiles,
        "playbooks": output.playbooks,
        "change_log": output.change_log,
        "bookmarks": output.bookmarks,
        "stats": {**dataclasses.asdict(output.stats), "extractors": sorted(output.stats.extractors)},
        "failures": [dataclasses.asdict(f) for f in output.failures],
        "learned_users": sorted(output.learned_users),
    }
    write_bytes(_shard_path(lake, window, run_id, shard), json.dumps(doc).encode())


def read_shard(lake: Lake, window: str, run_id: str, shard: int) -> LearnOutput | None:
    """One shard's staged output, None when it is gone."""
    path = _shard_path(lake, window, run_id, shard)
    if not path.exists():
        return None
    doc: dict[str, Any] = json.loads(path.read_bytes())
    stats = LearnStats(**{**doc["stats"], "extractors": set(doc["stats"]["extractors"])})
    failures = [Failure(**{**f, "summary": FailureSummary(**f["summary"])}) for f in doc["failures"]]
    return LearnOutput(
        doc["profiles"],
        doc["playbooks"],
        doc["change_log"],
        doc["bookmarks"],
        stats,
        failures,
        set(doc["learned_users"]),
    )


def drop_run(lake: Lake, window: str, run_id: str) -> None:
    """Delete one run's staging of `window` (after its commit)."""
    remove_tree(run_dir(lake, window, run_id))


def drop_all(lake: Lake) -> None:
    """Delete every staged shard of every window (erasure: staged outputs hold users' words)."""
    remove_tree(staging_root(lake))
