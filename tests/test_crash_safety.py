"""SIGKILL the service in the middle of a stream of publishes: every acknowledged turn survives, exactly once."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.pending import MAX_AUTOMATIC_RETRIES, pending_windows
from reflexio_pipelines.runs import launch
from reflexio_pipelines.settings import Settings
from tests.support.dagster_home import make_dagster_home
from tests.support.landing import land
from tests.support.openai_stub import StubBehaviour, make_openai_stub
from tests.support.processes import child_env, free_port, start_service, stop
from tests.support.servers import serve_app

pytestmark = pytest.mark.e2e

CLIENTS = 8
TURNS_PER_PUBLISH = 3


def _body(client: int, seq: int) -> dict:
    return {
        "user_id": f"crash-user-{client}",
        "interaction_data_list": [
            {"role": "user", "content": f"client {client} publish {seq} turn {t}"} for t in range(TURNS_PER_PUBLISH)
        ],
    }


def _landed(lake: Lake) -> list[dict]:
    files = lake.landing_files([p for _, _, p in lake.landing_hours()])
    return [
        row for f in files for row in pq.read_table(f, columns=["turn_id", "request_id", "idempotency_key"]).to_pylist()
    ]


def test_sigkill_mid_stream_loses_no_acknowledged_turn(tmp_path: Path, instance, capsys):
    lake_dir, home = tmp_path / "lake", tmp_path / "dagster_home"
    port = free_port()
    proc = start_service(lake_dir, home, port, tmp_path / "serving.log")
    api = f"http://127.0.0.1:{port}"
    acked: dict[str, str] = {}  # idempotency key -> request id
    attempted: list[str] = []
    lock = threading.Lock()
    stop_clients = threading.Event()

    def client(c: int) -> None:
        with httpx.Client(timeout=5) as http:
            seq = 0
            while not stop_clients.is_set():
                key = f"c{c}-{seq}"
                with lock:
                    attempted.append(key)
                try:
                    reply = http.post(
                        f"{api}/api/publish_interaction", json=_body(c, seq), headers={"Idempotency-Key": key}
                    )
                except httpx.HTTPError:
                    return  # the server died: this publish was never acknowledged
                if reply.status_code == 200:
                    with lock:
                        acked[key] = reply.json()["request_id"]
                seq += 1

    threads = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    stop(proc, signal.SIGKILL)
    stop_clients.set()
    for t in threads:
        t.join()
    assert len(acked) > 20, "the stream should have been going for a while before the kill"

    lake = Lake.at(lake_dir)
    rows = _landed(lake)
    by_request: dict[str, list[str]] = {}
    for row in rows:
        by_request.setdefault(row["request_id"], []).append(row["turn_id"])
    missing = [k for k, rid in acked.items() if len(by_request.get(rid, [])) != TURNS_PER_PUBLISH]
    assert not missing, f"acknowledged but not durable: {missing[:5]}"
    assert len({r["turn_id"] for r in rows}) == len(rows), "a turn landed twice"

    # Restart and let every client retry what it is unsure about: each publish must land exactly once.
    proc = start_service(lake_dir, home, port, tmp_path / "serving2.log")
    try:
        with httpx.Client(timeout=10) as http:
            for key in attempted:
                c, seq = (int(x) for x in key[1:].split("-"))
                reply = http.post(
                    f"{api}/api/publish_interaction", json=_body(c, seq), headers={"Idempotency-Key": key}
                )
                assert reply.status_code == 200
                if key in acked:
                    assert reply.json()["request_id"] == acked[key]
    finally:
        stop(proc)
    rows = _landed(lake)
    assert len(rows) == len(attempted) * TURNS_PER_PUBLISH
    assert len({r["idempotency_key"] for r in rows}) == len(attempted)

    # The pipeline never sees a torn file and compacts every turn exactly once.
    result = launch(settings=Settings(lake=str(lake_dir)), instance=instance, rebuild_index=False)
    turns = sum(lake.read_table("turns", w).num_rows for w in {k for k in _windows(result.partition_keys)})
    assert turns == len(attempted) * TURNS_PER_PUBLISH
    with capsys.disabled():
        print(
            f"\ncrash safety: {len(acked)} publishes acknowledged before SIGKILL, all found; "
            f"{len(attempted)} attempted, {turns} turns compacted once each"
        )


def _windows(keys: list[str]) -> list[str]:
    from reflexio_pipelines.lake.windows import window_of_key
    from reflexio_pipelines.partitions import GRANULARITY

    return [window_of_key(k, GRANULARITY) for k in keys]


def test_a_learning_run_killed_after_compaction_is_run_again(tmp_path: Path, samples, monkeypatch):
    """`materialize` is SIGKILLed while its learning step waits for the LLM, after `turns` committed the window:
    the window stays pending (its turns were compacted but never learned) and the next pass learns it."""
    lake_dir, home = tmp_path / "lake", tmp_path / "dagster_home"
    make_dagster_home(home)
    lake = Lake.at(str(lake_dir))
    land(lake, samples)
    (window,) = {p.window for p in pending_windows(lake, GRANULARITY)}

    hanging = make_openai_stub(StubBehaviour(delay_s=60))  # the extraction call never answers in time
    with serve_app(hanging) as llm_url:
        env = child_env(
            lake_dir,
            home,
            REFLEXIO_LLM_MODEL="openai/stub",
            REFLEXIO_LLM_API_BASE=f"{llm_url}/v1",
            REFLEXIO_LLM_API_KEY="k",
            REFLEXIO_LLM_MAX_RETRIES="0",
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "reflexio_pipelines", "materialize", "--lake", str(lake_dir)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 120
            while hanging.state.calls == 0:  # inside the learning step: `turns` has committed
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.1)
        finally:
            stop(proc, signal.SIGKILL)
    state = lake.consumed_state(window)
    assert state.files and not state.learned  # compacted, consumed, never learned
    assert lake.read_table("turns", window).num_rows > 0 and lake.read_table("user_profiles", window).num_rows == 0
    (again,) = pending_windows(lake, GRANULARITY)
    assert again.window == window and again.unlearned

    result = launch(settings=Settings(lake=str(lake_dir)))  # the built-in extractor this time
    assert result.partition_keys == [again.partition_key]
    assert lake.read_table("user_profiles", window).num_rows > 0
    assert lake.consumed_state(window).learned and pending_windows(lake, GRANULARITY) == []


def test_a_window_whose_learning_keeps_dying_stops_being_retried(tmp_path: Path, samples):
    """Each `turns` run that leaves learning uncommitted counts an attempt; past MAX_AUTOMATIC_RETRIES the window
    waits for an operator, like failed batches, instead of being requested every sensor tick."""
    lake = Lake.at(str(tmp_path / "lake"))
    land(lake, samples)
    (window,) = {p.window for p in pending_windows(lake, GRANULARITY)}
    files = [lake.relative(f) for _, _, hour_dir in lake.landing_hours() for f in lake.landing_files([hour_dir])]
    digests = set()
    for _ in range(MAX_AUTOMATIC_RETRIES):
        lake.write_consumed(window, files)  # a `turns` run, then the learning step died
        (p,) = pending_windows(lake, GRANULARITY)
        digests.add(p.digest)
    assert len(digests) == MAX_AUTOMATIC_RETRIES  # each attempt is a new sensor run key
    lake.write_consumed(window, files)
    assert pending_windows(lake, GRANULARITY) == []
    lake.mark_learned(window)
    assert lake.consumed_state(window).learned and pending_windows(lake, GRANULARITY) == []
