"""Racing and repeated runs leave the lake consistent: real Dagster materialisations in separate processes (each
with its own instance, as a sensor run and a service run would be) against one lake on disk.

- two runs of the same partition started together commit one after the other and leave exactly what one run
  leaves (no duplicate rows, same content);
- two backfills of the same three partitions racing each other, and a backfill re-run afterwards, give the same
  tables as one sequential backfill, ignoring `run_id` (tests/test_pipeline.py covers re-materialising one
  partition in-process).
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
import pytest

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.windows import window_of_key
from reflexio_pipelines.partitions import GRANULARITY
from tests.support.conversations import conversation
from tests.support.landing import land_hourly

T0 = datetime(2026, 11, 5, 8, 20, tzinfo=timezone.utc)
TABLES = {
    "turns": ("window", "turn_id"),
    "user_profiles": ("window", "profile_id"),
    "user_playbooks": ("window", "user_playbook_id"),
    "change_log": ("window", "entity", "item_id", "change"),
    "extraction_bookmarks": ("window", "user_id", "extractor"),
}
#: run-scoped columns (and the landing file a turn was compacted from, identical anyway): ignored when comparing
RUN_COLUMNS = {"run_id"}
START_TIMEOUT_S = 120
RUN_TIMEOUT_S = 600


HOURS = [
    [
        conversation(
            "ana", "a1", ("user", "Hi, I live in London and I prefer short answers."), ("assistant", "Noted.")
        ),
        conversation(
            "ben",
            "b1",
            ("user", "Deploy the api."),
            ("assistant", "Deploying to us-east-1."),
            ("user", "No — we never deploy to us-east-1, always use us-west-2."),
        ),
    ],
    [
        conversation("ana", "a2", ("user", "Quick update: I moved to Berlin last month."), ("assistant", "Thanks!")),
        conversation("cy", "c1", ("user", "My timezone is CET."), ("assistant", "Got it.")),
    ],
    [
        conversation(
            "ben",
            "b2",
            ("user", "Deploy the worker."),
            ("assistant", "Deploying to us-east-1."),
            ("user", "No — we never deploy to us-east-1, always use us-west-2."),
        ),
        conversation("cy", "c2", ("user", "My timezone is PST now."), ("assistant", "Updated.")),
    ],
]


def materialize_partitions(lake_root: str, keys: list[str], rendezvous: str, name: str) -> None:
    """Child process: wait for the start signal, then materialise `turns` + `user_learning` for each key in order
    (one Dagster run per key, like extract_job)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from reflexio_pipelines.assets.learning import user_learning
    from reflexio_pipelines.assets.turns import turns
    from reflexio_pipelines.definitions import build_resources
    from reflexio_pipelines.settings import Settings

    resources = build_resources(Settings(lake=lake_root))
    Path(rendezvous, f"{name}.ready").touch()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not Path(rendezvous, "go").exists():  # both children start their runs at the same moment
        if time.monotonic() > deadline:
            raise SystemExit("no start signal")
        time.sleep(0.01)
    with dg.DagsterInstance.ephemeral() as instance:
        for key in keys:
            result = dg.materialize([turns, user_learning], partition_key=key, resources=resources, instance=instance)
            if not result.success:
                raise SystemExit(f"run for {key} failed")


def _race(lake: Lake, tmp_path: Path, key_lists: list[list[str]]) -> None:
    rendezvous = tmp_path / f"rendezvous-{time.monotonic_ns()}"
    rendezvous.mkdir()
    context = multiprocessing.get_context("spawn")
    children = [
        context.Process(target=materialize_partitions, args=(str(lake.root), keys, str(rendezvous), f"run{i}"))
        for i, keys in enumerate(key_lists)
    ]
    for child in children:
        child.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while len(list(rendezvous.glob("*.ready"))) < len(children):
            assert time.monotonic() < deadline and all(c.is_alive() for c in children), "a child did not start"
            time.sleep(0.05)
        (rendezvous / "go").touch()
        for child in children:
            child.join(RUN_TIMEOUT_S)
            assert child.exitcode == 0, f"racing run exited with {child.exitcode}"
    finally:
        for child in children:
            if child.is_alive():
                child.kill()


def _snapshot(lake: Lake) -> dict[str, list[dict]]:
    out = {}
    for name, key_columns in TABLES.items():
        rows = [{k: v for k, v in r.items() if k not in RUN_COLUMNS} for r in lake.read_table(name).to_pylist()]
        keys = [tuple(r[c] for c in key_columns) for r in rows]
        assert len(keys) == len(set(keys)), f"duplicate rows in {name}"
        out[name] = sorted(rows, key=repr)
    return out


@pytest.fixture
def lakes(lake: Lake, tmp_path: Path, settings, instance) -> tuple[Lake, Lake, list[str]]:
    """The test lake with three hours landed, and a reference lake with the same landing files learned by one
    sequential backfill (in-process, one run per partition)."""
    from reflexio_pipelines.assets.learning import user_learning
    from reflexio_pipelines.assets.turns import turns
    from reflexio_pipelines.definitions import build_resources
    from reflexio_pipelines.settings import Settings

    keys = land_hourly(lake, HOURS, T0)
    reference = Lake.at(tmp_path / "reference")
    shutil.copytree(lake.landing_turns, reference.landing_turns)
    resources = build_resources(Settings(lake=str(reference.root)))
    for key in keys:
        assert dg.materialize([turns, user_learning], partition_key=key, resources=resources, instance=instance).success
    return lake, reference, keys


def test_two_runs_of_one_partition_racing_leave_what_one_run_leaves(lakes, tmp_path):
    lake, reference, keys = lakes
    _race(lake, tmp_path, [keys[:1], keys[:1]])
    window = window_of_key(keys[0], GRANULARITY)
    expected = {name: [r for r in rows if r["window"] == window] for name, rows in _snapshot(reference).items()}
    assert _snapshot(lake) == expected
    assert any("us-west-2" in r["content"] for r in _snapshot(lake)["user_playbooks"])


def test_racing_backfills_and_a_rerun_match_one_sequential_backfill(lakes, tmp_path):
    lake, reference, keys = lakes
    _race(lake, tmp_path, [keys, keys])
    expected = _snapshot(reference)
    assert _snapshot(lake) == expected
    # the reference carries lineage across windows (cy's later timezone supersedes the earlier one, whatever the
    # extractor's wording), so the race had cross-window state to get wrong
    (cet,) = [r for r in expected["user_profiles"] if r["user_id"] == "cy" and "CET" in r["content"]]
    (pst,) = [r for r in expected["user_profiles"] if r["user_id"] == "cy" and "PST" in r["content"]]
    assert pst["supersedes"] == [cet["profile_id"]] and pst["window"] > cet["window"]
    _race(lake, tmp_path, [keys])  # the backfill again, alone: identical outputs ignoring run_id
    assert _snapshot(lake) == expected
