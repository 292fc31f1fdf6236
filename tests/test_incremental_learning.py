"""Each turn extracted once, whatever the run cadence: the learning asset materialised in-process with a partition
key, several times per window, against a real lake and (for the call counts) the OpenAI-compatible stub on
127.0.0.1. The stub answers by replaying the built-in rules: these tests count calls and compare rows (plumbing),
they say nothing about extraction quality."""

from __future__ import annotations

import shutil
import threading
import time
from datetime import datetime, timedelta, timezone

import dagster as dg
import pytest

from reflexio_pipelines.assets.learning import user_learning
from reflexio_pipelines.assets.turns import turns
from reflexio_pipelines.definitions import build_resources
from reflexio_pipelines.jobs import learning_run_config
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.windows import key_of_moment, window_of_key
from reflexio_pipelines.learning.types import Turn
from reflexio_pipelines.learning.windows import (
    FLUSH_ALL,
    Pace,
    plan_windows,
    ready_turns,
    session_breaks,
    window_bounds,
)
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.pending import pending_windows
from reflexio_pipelines.runs import exclusive, launch
from reflexio_pipelines.settings import LLMSettings, Settings
from tests.support.landing import land
from tests.support.openai_stub import is_dedup_prompt, make_openai_stub
from tests.support.servers import serve_app

# A fixed hour well in the past would be a closed window (everything flushes); the tests pick the clock instead.
START = datetime(2026, 6, 1, 10, 0, 5, tzinfo=timezone.utc)
KEY = key_of_moment(START, GRANULARITY)
WINDOW = window_of_key(KEY, GRANULARITY)
SECOND_US = 1_000_000


def _us(moment: datetime) -> int:
    return int(moment.timestamp() * SECOND_US)


def _turn(i: int, at_s: float, user: str = "u1") -> Turn:
    return Turn(
        turn_id=f"t{i:03d}",
        interaction_id=i,
        request_id=f"r{i:03d}",
        user_id=user,
        role="user",
        content=f"message {i}",
        created_at=1_000 + i,
        ingested_at_us=int(at_s * SECOND_US),
    )


# -- the pure planner ------------------------------------------------------------------------------------------


def test_session_breaks_and_bounds_start_a_chunk_at_every_quiet_gap() -> None:
    stream = [_turn(i, at) for i, at in enumerate([0, 1, 2, 40, 41, 100])]
    assert session_breaks(stream, 30 * SECOND_US) == [3, 5]
    assert session_breaks(stream, 0) == []  # no quiet period: no breaks
    assert window_bounds(0, 6, 10, 5, [3, 5]) == [(0, 3), (1, 5), (3, 6)]
    assert [len(w.turns) for w in plan_windows([], stream, 10, 5, 30 * SECOND_US)] == [3, 4, 3]


@pytest.mark.parametrize(
    ("arrivals", "now", "size", "ready"),
    [
        ([0, 1, 2], 10, 10, 0),  # an incomplete window of an active session waits
        ([0, 1, 2], 32, 10, 3),  # ... until the session has been quiet for the quiet period
        ([0] * 12, 5, 10, 10),  # a full window goes at once; the incomplete rest waits
        ([0, 1, 40, 41], 45, 10, 2),  # the session before a break goes; the active one waits
        ([0, 1, 40, 41], 80, 10, 4),
        ([0] * 25, 1, 10, 20),
    ],
)
def test_ready_turns_hold_back_only_an_incomplete_window_of_an_active_session(arrivals, now, size, ready) -> None:
    new = [_turn(i, at) for i, at in enumerate(arrivals)]
    go, held = ready_turns(new, size, Pace(quiet_us=30 * SECOND_US, now_us=now * SECOND_US, flush=False))
    assert [t.turn_id for t in go] == [t.turn_id for t in new[:ready]]
    assert [t.turn_id for t in held] == [t.turn_id for t in new[ready:]]


def test_flushing_lets_everything_through() -> None:
    new = [_turn(i, 0) for i in range(3)]
    active = Pace(quiet_us=30 * SECOND_US, now_us=SECOND_US, flush=False)
    assert ready_turns(new, 10, active) == ([], new)
    assert ready_turns(new, 10, Pace(active.quiet_us, active.now_us, False, frozenset({"u1"}))) == (new, [])
    assert ready_turns(new, 10, Pace(0, active.now_us, flush=False)) == (new, [])  # no quiet period: never wait
    assert ready_turns(new, 10, FLUSH_ALL) == (new, [])


@pytest.mark.parametrize("seed", range(20))
def test_the_chunks_do_not_depend_on_when_runs_happen(seed: int) -> None:
    """A stream learned by runs at random moments cuts exactly the chunks of one pass over the whole stream."""
    import random

    rng = random.Random(seed)
    at, stream = 0.0, []
    for i in range(rng.randint(5, 60)):
        at += rng.choice([0.2, 1, 3, 35, 90])
        stream.append(_turn(i, at))
    quiet, size = 30 * SECOND_US, rng.choice([3, 5, 10])
    one_pass = [w.window_id for w in plan_windows([], stream, size, min(size, 5), quiet)]
    done: list[Turn] = []
    runs: list[str] = []
    for now in sorted(rng.uniform(0, at + 60) for _ in range(rng.randint(1, 12))) + [at + 31]:
        visible = [t for t in stream if t.ingested_at_us <= now * SECOND_US and t not in done]
        go, _ = ready_turns(visible, size, Pace(quiet_us=quiet, now_us=int(now * SECOND_US), flush=False))
        runs += [w.window_id for w in plan_windows(done, go, size, min(size, 5), quiet)]
        done += go
    assert done == stream
    assert runs == one_pass


# -- the asset, run after run ----------------------------------------------------------------------------------


def _conversation(user: str, part: int) -> dict:
    lines = [
        [
            {"role": "user", "content": "Please deploy the payments service to production."},
            {"role": "assistant", "content": "Deploying the payments service to us-east-1 now."},
        ],
        [
            {"role": "user", "content": "No — we never deploy to us-east-1, always use us-west-2."},
            {"role": "assistant", "content": "Understood, us-west-2 it is."},
        ],
        [
            {
                "role": "user",
                "content": f"I'm a platform engineer at Company {user.upper()} and I prefer short answers.",
            },
            {"role": "assistant", "content": "Noted."},
        ],
    ]
    return {
        "id": f"{user}-{part}",
        "user_id": user,
        "session_id": f"{user}-s",
        "agent_version": "a1",
        "source": "t",
        "interactions": lines[part],
    }


USERS = [f"user{i:02d}" for i in range(8)]


def _materialise(
    lake: Lake, settings: Settings, instance, *, flush: str, now: datetime, **extra
) -> dg.ExecuteInProcessResult:
    config = learning_run_config(flush)
    config["ops"]["user_learning"]["config"].update(now_us=_us(now), **extra)
    result = dg.materialize(
        [turns, user_learning],
        partition_key=KEY,
        resources=build_resources(settings),
        instance=instance,
        run_config=config,
    )
    assert result.success
    return result


def _items(lake: Lake) -> tuple[set, set]:
    """What was learned, comparable across lakes (request ids differ per lake; evidence is compared by count)."""
    profiles = {
        (r["user_id"], r["content"], len(r["source_turn_ids"])) for r in lake.read_table("user_profiles").to_pylist()
    }
    playbooks = {
        (r["user_id"], r["trigger"], r["content"], len(r["source_turn_ids"]))
        for r in lake.read_table("user_playbooks").to_pylist()
    }
    return profiles, playbooks


def _calls(stub) -> tuple[int, int]:
    """(extraction calls, dedup judge calls) the stub answered."""
    dedup = sum(1 for r in stub.state.requests if is_dedup_prompt(r["body"]["messages"][-1]["content"]))
    return len(stub.state.requests) - dedup, dedup


@pytest.fixture
def stub_settings(tmp_path):
    stub = make_openai_stub()
    with serve_app(stub) as base_url:

        def settings_for(name: str, batch_size: int | None = None) -> Settings:
            config = None
            if batch_size is not None:  # smaller windows, so that full ones complete while the session goes on
                config = tmp_path / f"{name}-extraction.yaml"
                config.write_text(f"batch_size: {batch_size}\nbatch_interval: {batch_size // 2}\n")
            return Settings(
                lake=str(tmp_path / name),
                extraction_config=str(config) if config else None,
                llm=LLMSettings(model="openai/stub", api_base=f"{base_url}/v1", api_key="k"),
            )

        yield stub, settings_for


def _learn_in_rounds(settings: Settings, instance, rounds: int) -> Lake:
    """Every user publishes the three parts of a conversation a few seconds apart, `rounds` runs spread over them,
    then the sensor's run once the sessions are quiet."""
    lake = Lake.at(settings.lake)
    moments = [START + timedelta(seconds=2 * part) for part in range(3)]
    runs_at = {moments[min(2, i * 3 // rounds)] for i in range(rounds)} if rounds else set()
    for part, moment in enumerate(moments):
        land(lake, [_conversation(u, part) for u in USERS], at=moment)
        if moment in runs_at:
            _materialise(lake, settings, instance, flush="due", now=moment + timedelta(seconds=1))
    _materialise(lake, settings, instance, flush="due", now=moments[-1] + timedelta(seconds=31))
    return lake


@pytest.mark.parametrize(("rounds", "batch_size", "windows_per_user"), [(1, None, 1), (3, None, 1), (3, 4, 2)])
def test_runs_during_a_window_cost_the_calls_of_one_pass_and_learn_the_same_items(
    stub_settings, instance, rounds, batch_size, windows_per_user
):
    stub, settings_for = stub_settings
    one_pass = Lake.at(settings_for("one-pass", batch_size).lake)
    for part in range(3):
        land(one_pass, [_conversation(u, part) for u in USERS], at=START + timedelta(seconds=2 * part))
    _materialise(
        one_pass, settings_for("one-pass", batch_size), instance, flush="all", now=START + timedelta(seconds=5)
    )
    baseline = _calls(stub)
    assert baseline[0] == windows_per_user * len(USERS)  # 6 turns: one window of 10, or 4 + 2
    stub.state.requests.clear()

    incremental = _learn_in_rounds(settings_for(f"rounds-{rounds}", batch_size), instance, rounds)
    assert _calls(stub)[0] == baseline[0]
    assert sum(_calls(stub)) <= 1.05 * sum(baseline)
    assert _items(incremental) == _items(one_pass)
    assert any("us-west-2" in c for _, _, c, _ in _items(incremental)[1])


def test_a_run_with_nothing_new_extracts_nothing_and_rewrites_the_same_rows(stub_settings, instance):
    stub, settings_for = stub_settings
    settings = settings_for("again")
    lake = Lake.at(settings.lake)
    land(lake, [_conversation(u, p) for u in USERS[:3] for p in range(3)], at=START)
    _materialise(lake, settings, instance, flush="all", now=START)
    before = {
        name: lake.read_table(name, WINDOW).to_pylist()
        for name in ("user_profiles", "user_playbooks", "change_log", "extraction_bookmarks")
    }
    stub.state.requests.clear()
    result = _materialise(lake, settings, instance, flush="all", now=START + timedelta(seconds=5))
    assert stub.state.requests == []
    after = {name: lake.read_table(name, WINDOW).to_pylist() for name in before}
    assert after == before  # the earlier run's rows, its run id included
    metadata = result.asset_materializations_for_node("user_learning")[0].metadata
    assert metadata["llm_calls"].value == 0 and metadata["turns_extracted"].value == 0


def test_new_turns_of_a_learned_user_extend_the_window_and_rebuild_reproduces_it(stub_settings, instance):
    _, settings_for = stub_settings
    settings = settings_for("grow")
    lake = Lake.at(settings.lake)
    land(lake, [_conversation(u, 0) for u in USERS[:2]], at=START)
    _materialise(lake, settings, instance, flush="all", now=START)
    land(lake, [_conversation(u, 1) for u in USERS[:2]], at=START + timedelta(seconds=40))
    land(lake, [_conversation(u, 2) for u in USERS[:2]], at=START + timedelta(seconds=41))
    result = _materialise(lake, settings, instance, flush="all", now=START + timedelta(seconds=42))
    metadata = result.asset_materializations_for_node("user_learning")[0].metadata
    assert metadata["turns_extracted"].value == 8  # only the new turns: 4 per user
    bookmarks = lake.read_table("extraction_bookmarks", WINDOW).to_pylist()
    assert {b["user_id"]: b["new_turns"] for b in bookmarks} == {u: 6 for u in USERS[:2]}
    assert all(len(b["processed_turn_ids"]) == 6 and b["held_turns"] == 0 for b in bookmarks)
    incremental = _items(lake)
    _materialise(lake, settings, instance, flush="all", now=START + timedelta(seconds=43), rebuild=True)
    assert _items(lake) == incremental  # a deliberate re-extraction of the window learns the same items


def test_held_back_turns_fall_due_go_through_and_are_pending_until_then(stub_settings, instance):
    stub, settings_for = stub_settings
    settings = settings_for("due")
    lake = Lake.at(settings.lake)
    land(lake, [_conversation(u, 0) for u in USERS[:2]], at=START)
    result = _materialise(lake, settings, instance, flush="due", now=START + timedelta(seconds=1))
    assert _calls(stub)[0] == 0 and _items(lake) == (set(), set())
    assert result.asset_materializations_for_node("user_learning")[0].metadata["turns_held_back"].value == 4
    assert [p.window for p in pending_windows(lake, GRANULARITY, now_us=_us(START + timedelta(seconds=5)))] == []
    due = pending_windows(lake, GRANULARITY, now_us=_us(START + timedelta(seconds=31)))
    assert [p.window for p in due] == [WINDOW] and due[0].due
    closed = pending_windows(lake, GRANULARITY, now_us=_us(START + timedelta(hours=1)))
    assert [p.window for p in closed] == [WINDOW]  # a closed window flushes whatever is held
    _materialise(lake, settings, instance, flush="due", now=START + timedelta(seconds=31))
    assert _calls(stub)[0] == 2
    assert pending_windows(lake, GRANULARITY, now_us=_us(START + timedelta(seconds=40))) == []


def test_a_forced_user_goes_through_while_others_wait(stub_settings, instance):
    stub, settings_for = stub_settings
    settings = settings_for("force")
    lake = Lake.at(settings.lake)
    land(lake, [_conversation(u, 0) for u in USERS[:3]], at=START)
    _materialise(lake, settings, instance, flush="due", now=START + timedelta(seconds=1), flush_users=[USERS[1]])
    assert _calls(stub)[0] == 1
    bookmarks = {b["user_id"]: b for b in lake.read_table("extraction_bookmarks", WINDOW).to_pylist()}
    assert bookmarks[USERS[1]]["held_turns"] == 0 and len(bookmarks[USERS[1]]["processed_turn_ids"]) == 2
    assert bookmarks[USERS[0]]["held_turns"] == 2 and bookmarks[USERS[0]]["processed_turn_ids"] == []


def test_the_builtin_extractor_never_holds_turns_back(lake: Lake, settings: Settings, instance):
    land(lake, [_conversation(u, p) for u in USERS[:2] for p in range(2)], at=START)
    _materialise(lake, settings, instance, flush="due", now=START)
    assert {u for u, *_ in _items(lake)[1]} == set(USERS[:2])


# -- concurrency ------------------------------------------------------------------------------------------------


def test_concurrent_users_write_exactly_the_rows_of_a_serial_run(tmp_path, instance):
    stub = make_openai_stub()
    stub.state.behaviour.delay_s = 0.3
    land(Lake.at(tmp_path / "landed"), [_conversation(u, p) for u in USERS for p in range(3)], at=START)
    with serve_app(stub) as base_url:
        rows = {}
        for concurrency in (1, 8):
            llm = LLMSettings(model="openai/stub", api_base=f"{base_url}/v1", api_key="k", concurrency=concurrency)
            settings = Settings(lake=str(tmp_path / f"c{concurrency}"), llm=llm)
            shutil.copytree(tmp_path / "landed", settings.lake)  # the same turns, ids included
            lake = Lake.at(settings.lake)
            stub.state.max_in_flight = 0
            started = time.monotonic()
            result = _materialise(lake, settings, instance, flush="all", now=START)
            elapsed = time.monotonic() - started
            drop = {"run_id"}
            rows[concurrency] = {
                name: sorted(
                    ({k: v for k, v in r.items() if k not in drop} for r in lake.read_table(name).to_pylist()), key=repr
                )
                for name in ("user_profiles", "user_playbooks", "change_log", "extraction_bookmarks")
            }
            if concurrency == 8:
                assert stub.state.max_in_flight >= 4, stub.state.max_in_flight
            else:
                assert stub.state.max_in_flight == 1
            assert result.success and elapsed > 0
    assert rows[1] == rows[8]


# -- organisations ---------------------------------------------------------------------------------------------


def test_a_run_of_one_lake_does_not_wait_for_another_lakes_run(tmp_path, instance, samples):
    busy, free = (Settings(lake=str(tmp_path / name)) for name in ("busy", "free"))
    for settings in (busy, free):
        land(Lake.at(settings.lake), samples)
    finished: list[str] = []
    with exclusive(str(Lake.at(busy.lake).root)):  # the busy organisation's run holds its lake
        blocked = threading.Thread(target=lambda: (launch(settings=busy, instance=instance), finished.append("busy")))
        blocked.start()
        launch(settings=free, instance=instance)
        finished.append("free")
        time.sleep(0.2)
        assert finished == ["free"]
    blocked.join(timeout=120)
    assert finished == ["free", "busy"]


# -- the sensor ------------------------------------------------------------------------------------------------


def _landing_tick(instance, lake: Lake) -> dg.SensorResult:
    """One evaluation of `landing_sensor` over `lake`."""
    from reflexio_pipelines.resources import LakeResource
    from reflexio_pipelines.sensors import landing_sensor

    return landing_sensor(
        dg.build_sensor_context(instance=instance, resources={"lake": LakeResource(root=str(lake.root))})
    )


def _started_learning_run(instance, run_id: str, partition_key: str) -> dg.DagsterRun:
    """A `learn_job` run of the window recorded as started, with no process behind it: the sensor sees it in
    flight until the test reports it ended."""
    running = dg.DagsterRun(
        job_name="learn_job",
        run_id=run_id,
        status=dg.DagsterRunStatus.STARTED,
        tags={"dagster/partition": partition_key},
    )
    instance.add_run(running)
    return running


def test_the_sensor_asks_for_due_only_runs_and_waits_for_a_windows_unfinished_run(lake: Lake, instance, samples):
    land(lake, samples[:1])
    (request,) = _landing_tick(instance, lake).run_requests
    assert request.run_config == learning_run_config("due", index_turns=True)
    running = _started_learning_run(instance, "run-in-flight", request.partition_key)
    skipped = _landing_tick(instance, lake)
    assert not skipped.run_requests and "in flight" in skipped.skip_reason.skip_message
    instance.report_run_failed(running)  # the run ends: the window is requested again
    again = _landing_tick(instance, lake)
    assert [r.partition_key for r in again.run_requests] == [request.partition_key]


def test_the_next_run_is_requested_once_the_running_one_has_compacted_the_window(lake: Lake, instance, samples):
    """While a run learns, the next one is launched and waits for the window's lock (it learns right after the
    commit instead of a tick and a launch later); while a run has not compacted yet, no other is requested."""
    from dagster._core.events import DagsterEvent, DagsterEventType, StepMaterializationData

    def tick() -> dg.SensorResult:
        return _landing_tick(instance, lake)

    land(lake, samples[:1])
    (request,) = tick().run_requests
    running = _started_learning_run(instance, "run-indexing", request.partition_key)

    def materialised(asset: str) -> None:
        event = DagsterEvent(
            event_type_value=DagsterEventType.ASSET_MATERIALIZATION.value,
            job_name="learn_job",
            event_specific_data=StepMaterializationData(dg.AssetMaterialization(asset)),
        )
        instance.report_dagster_event(event, run_id=running.run_id)

    assert not tick().run_requests  # started, not compacted yet: it will take the files that land meanwhile
    materialised("turns")  # compacted, now learning under the window's lock: the next run may queue behind it
    assert [r.partition_key for r in tick().run_requests] == [request.partition_key]


def test_an_older_build_finishing_last_does_not_take_the_served_version_back(tmp_path) -> None:
    from reflexio_pipelines.search.versions import activate_if_newer, current_version

    root = tmp_path / "index"
    older, newer = "20261204T050000000000Z-aaaaaa", "20261204T050005000000Z-bbbbbb"
    for version in (older, newer):
        (root / version).mkdir(parents=True)
        (root / version / "manifest.json").write_text("{}")
    assert activate_if_newer(root, newer) and current_version(root) == newer
    assert not activate_if_newer(root, older) and current_version(root) == newer
    assert activate_if_newer(root, newer)  # the same version again: still served


# -- incremental compaction ------------------------------------------------------------------------------------


def test_turns_compacts_only_new_landing_files_and_a_crash_before_the_consumed_list_loses_nothing(
    lake: Lake, settings: Settings, instance, samples
):
    resources = build_resources(settings)

    def compact() -> dict:
        result = dg.materialize([turns], partition_key=KEY, resources=resources, instance=instance)
        return {k: v.value for k, v in result.asset_materializations_for_node("turns")[0].metadata.items()}

    land(lake, samples[:2], at=START)
    assert compact()["compaction"] == "full"
    land(lake, samples[2:], at=START + timedelta(seconds=5))
    second = compact()
    expected = sum(len(c["interactions"]) for c in samples)
    assert second["compaction"] == "incremental" and second["landing_files_compacted"] == 1
    assert second["dagster/row_count"] == expected
    ids = lake.read_table("turns", WINDOW).column("turn_id").to_pylist()
    assert len(ids) == len(set(ids)) == expected
    # a crash after the commit, before the consumed list was written: the next run rewrites those rows once
    consumed = lake.read_consumed(WINDOW)
    lake.write_consumed(WINDOW, consumed[:1])
    assert compact()["landing_files_compacted"] == len(consumed) - 1
    assert sorted(lake.read_table("turns", WINDOW).column("turn_id").to_pylist()) == sorted(ids)
    # a consumed file vanished (not through erasure, which updates the list): the window is compacted afresh
    (lake.root / consumed[-1]).unlink()
    assert compact()["compaction"] == "full"


def test_turns_falling_due_during_a_run_are_learned_by_that_run(lake: Lake, settings: Settings, instance):
    from reflexio_pipelines.window_pass import Learner, learn_and_commit

    land(lake, [_conversation(user, part) for user in USERS[:3] for part in (0, 1)], at=START)
    resources = build_resources(settings)
    assert dg.materialize([turns], partition_key=KEY, resources=resources, instance=instance).success
    extractor, embedder = resources["extractor"], resources["embedder"]
    learner = Learner(extractor.get(), embedder.get(), extractor.dedup_judge_factory(), extractor.get_config())
    landed = _us(START) + 2 * SECOND_US

    def clock(*seconds: float):
        moments = iter(seconds)
        last = [seconds[0]]

        def pace() -> Pace:
            last[0] = next(moments, last[0])
            return Pace(quiet_us=30 * SECOND_US, now_us=landed + int(last[0] * SECOND_US), flush=False)

        return pace

    # the sessions stay active for the whole run: held back, one pass only
    output, committed = learn_and_commit(lake, WINDOW, learner, clock(5, 6), run_id="still-active")
    assert output.stats.turns_extracted == 0 and output.stats.turns_held == 12
    assert all(b["held_turns"] == 4 for b in committed.tables["extraction_bookmarks"].to_pylist())
    # they go quiet while the run learns: the run makes another pass and learns them
    output, committed = learn_and_commit(lake, WINDOW, learner, clock(10, 40, 41, 42), run_id="goes-quiet")
    assert output.stats.turns_extracted == 12 and output.stats.passes == 2
    assert all(b["held_turns"] == 0 for b in committed.tables["extraction_bookmarks"].to_pylist())
    assert {r["user_id"] for r in committed.tables["user_playbooks"].to_pylist()} == set(USERS[:3])
