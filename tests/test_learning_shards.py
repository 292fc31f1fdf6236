"""A window's learning fanned out over shards of its users (assets/learning_shards.py): the rows of one pass, in
process and with the multiprocess executor; a commit that finds the window changed learns it again; staging is
gone after the commit. Built-in extractor (the fan-out is plumbing: which extractor runs does not matter here)."""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg
import pytest

from reflexio_pipelines import window_pass
from reflexio_pipelines.assets import learning_shards
from reflexio_pipelines.assets.learning import user_learning
from reflexio_pipelines.assets.learning_shards import sharded_user_learning
from reflexio_pipelines.assets.turns import turns
from reflexio_pipelines.definitions import build_resources
from reflexio_pipelines.demo.run import sample_conversations
from reflexio_pipelines.lake import staging
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.windows import key_of_moment, window_of_key
from reflexio_pipelines.learning.carry import WINDOW_TABLES
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.runs import launch
from reflexio_pipelines.settings import Settings
from reflexio_pipelines.window_pass import shard_users
from tests.support.landing import land

SHARDS = 4
AT = datetime(2026, 11, 30, 9, 30, tzinfo=timezone.utc)
KEY = key_of_moment(AT, GRANULARITY)
WINDOW = window_of_key(KEY, GRANULARITY)


def _conversations(copies: int = 4) -> list[dict]:
    """The demo's conversations for `copies` x 5 users (different ids, same words), spread over every shard."""
    out = []
    for i in range(copies):
        for conversation in sample_conversations():
            suffix = f"-{i}"
            out.append(
                {
                    **conversation,
                    "id": conversation["id"] + suffix,
                    "user_id": conversation["user_id"] + suffix,
                    "session_id": conversation["session_id"] + suffix,
                }
            )
    return out


def _tables(lake: Lake) -> dict[str, list[dict]]:
    """The window's learned tables without the run id (two runs differ only there)."""
    out = {}
    for name in WINDOW_TABLES:
        rows = [{k: v for k, v in r.items() if k != "run_id"} for r in lake.read_table(name, WINDOW).to_pylist()]
        out[name] = rows
    return out


@pytest.fixture(scope="module")
def source_lake(tmp_path_factory) -> Path:
    """One landing of the conversations; every test copies it, so all runs learn from the same turns."""
    lake = Lake.at(tmp_path_factory.mktemp("source") / "lake")
    land(lake, _conversations(), at=AT)
    return Path(lake.root)


@pytest.fixture
def copy_lake(tmp_path, source_lake) -> Callable[[str], tuple[Lake, Settings]]:
    def copy(name: str) -> tuple[Lake, Settings]:
        shutil.copytree(source_lake, tmp_path / name)
        return Lake.at(tmp_path / name), Settings(lake=str(tmp_path / name))

    return copy


def _materialize(asset: dg.AssetsDefinition, settings: Settings, instance, shards: int) -> dg.ExecuteInProcessResult:
    resources = build_resources(settings.model_copy(update={"learning_shards": shards}))
    return dg.materialize([turns, asset], partition_key=KEY, resources=resources, instance=instance)


@pytest.fixture
def one_pass(copy_lake, instance) -> dict[str, list[dict]]:
    lake, settings = copy_lake("one-pass")
    assert _materialize(user_learning, settings, instance, 1).success
    tables = _tables(lake)
    assert (
        tables["user_playbooks"]
        and tables["user_profiles"]
        and len(tables["extraction_bookmarks"]) == len({c["user_id"] for c in _conversations()})
    )
    return tables


def test_four_shards_write_the_rows_of_one_pass(copy_lake, instance, one_pass):
    lake, settings = copy_lake("sharded")
    users = sorted({c["user_id"] for c in _conversations()})
    assert sorted(Counter(shard_users(users, SHARDS)).values()) == [len(users) // SHARDS] * SHARDS  # equal shards
    result = _materialize(sharded_user_learning, settings, instance, SHARDS)
    assert result.success
    assert _tables(lake) == one_pass  # same rows, same order
    steps = {e.step_key for e in result.all_events if e.step_key}
    assert {f"user_learning.learn_shard[shard_{s}]" for s in range(SHARDS)} <= steps
    materialized = result.asset_materializations_for_node("user_learning")
    assert {m.asset_key.path[-1] for m in materialized} == set(WINDOW_TABLES)
    assert all(m.metadata["shards"].value == SHARDS for m in materialized)
    assert not staging.staging_root(lake).exists() or not any(staging.staging_root(lake).rglob("*.json"))


def test_a_commit_that_finds_the_window_changed_learns_it_again(copy_lake, instance, one_pass, monkeypatch):
    lake, settings = copy_lake("raced")
    stamps = iter(range(1000))
    # every stamp differs: as if another run committed the window between the plan and the commit
    # (the plan's stamp, taken by the asset, and the one its commit compares against, taken by window_pass)
    monkeypatch.setattr(learning_shards, "window_stamp", lambda previous: str(next(stamps)))
    monkeypatch.setattr(window_pass, "window_stamp", lambda previous: str(next(stamps)))
    result = _materialize(sharded_user_learning, settings, instance, SHARDS)
    assert result.success
    assert _tables(lake) == one_pass
    assert any("changed while its shards learned" in (r.user_message or "") for r in instance.all_logs(result.run_id))


def test_a_second_run_continues_from_what_the_first_committed(copy_lake, instance, one_pass):
    lake, settings = copy_lake("twice")
    assert _materialize(sharded_user_learning, settings, instance, SHARDS).success
    first = lake.read_table("extraction_bookmarks", WINDOW)
    result = _materialize(sharded_user_learning, settings, instance, SHARDS)
    assert result.success
    metadata = result.asset_materializations_for_node("user_learning")[0].metadata
    assert metadata["turns_extracted"].value == 0 and metadata["llm_calls"].value == 0
    assert _tables(lake) == one_pass
    assert lake.read_table("extraction_bookmarks", WINDOW).select(["user_id", "run_id"]) == first.select(
        ["user_id", "run_id"]
    )


@pytest.mark.e2e
def test_materialize_fans_the_window_out_over_processes(dagster_home, copy_lake, one_pass):
    # dagster_home: an instance on disk (DagsterInstance.get), which the multiprocess executor's children share.
    lake, settings = copy_lake("processes")
    with dg.DagsterInstance.get() as instance:
        result = launch([KEY], settings=settings.model_copy(update={"learning_shards": SHARDS}), instance=instance)
        assert _tables(lake) == one_pass
        run = instance.get_run_by_id(result.run_ids[0])
        assert run.status == dg.DagsterRunStatus.SUCCESS
        starts = [r for r in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_START)]
        pids = {r.dagster_event.pid for r in starts if r.step_key.startswith("user_learning.learn_shard")}
        assert len({r.step_key for r in starts if r.step_key.startswith("user_learning.learn_shard")}) == SHARDS
        assert len(pids) == SHARDS  # a process per shard
        assert result.index_version is not None


def test_shard_staging_round_trips_a_learn_output(copy_lake, instance):
    lake, settings = copy_lake("staged")
    assert _materialize(user_learning, settings, instance, 1).success
    from reflexio_pipelines.learning.windows import FLUSH_ALL
    from reflexio_pipelines.window_pass import Learner, learn_users, previous_rows

    resources = build_resources(settings)
    extractor, embedder = resources["extractor"], resources["embedder"]
    learner = Learner(extractor.get(), embedder.get(), extractor.dedup_judge_factory(), extractor.get_config())
    previous = previous_rows(lake, WINDOW, rebuild=True)
    output = learn_users(lake, WINDOW, learner, FLUSH_ALL, run_id="r", previous=previous)
    staging.write_shard(lake, WINDOW, "r", 2, output)
    assert staging.read_shard(lake, WINDOW, "r", 2) == output
    staging.drop_all(lake)
    assert staging.read_shard(lake, WINDOW, "r", 2) is None


def test_erasure_deletes_what_shards_staged(copy_lake, instance):
    from reflexio_pipelines.learning.windows import FLUSH_ALL
    from reflexio_pipelines.privacy.erasure import erase_user
    from reflexio_pipelines.window_pass import Learner, learn_users

    lake, settings = copy_lake("erased")
    assert dg.materialize([turns], partition_key=KEY, resources=build_resources(settings), instance=instance).success
    resources = build_resources(settings)
    extractor, embedder = resources["extractor"], resources["embedder"]
    learner = Learner(extractor.get(), embedder.get(), extractor.dedup_judge_factory(), extractor.get_config())
    output = learn_users(lake, WINDOW, learner, FLUSH_ALL, run_id="in-flight", previous={}, users=["alice-0"])
    staging.write_shard(lake, WINDOW, "in-flight", 0, output)
    assert "us-west-2" in (staging.run_dir(lake, WINDOW, "in-flight") / "shard-0.json").read_text()
    erase_user(lake, "alice-0", embedder.get())
    assert not any(p.is_file() for p in staging.staging_root(lake).rglob("*"))


def test_per_minute_limits_are_split_between_shards():
    from reflexio_pipelines.resources import ExtractorResource

    one = ExtractorResource(model="openai/x", rpm=600, tpm=90_000).llm_settings()
    four = ExtractorResource(model="openai/x", rpm=600, tpm=90_000, shards=4, llm_concurrency=8).llm_settings()
    assert (one.rpm, one.tpm) == (600, 90_000)
    assert (four.rpm, four.tpm, four.concurrency) == (150, 22_500, 8)  # calls in flight are per process
    assert ExtractorResource(model="openai/x", shards=4).llm_settings().rpm == 0  # unlimited stays unlimited
