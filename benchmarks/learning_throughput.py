"""Learning throughput, LLM cost per run cadence, publish -> searchable latency and organisation isolation, measured
through the project's public entry points only (what a user of the service sees).

Everything runs as separate processes on 127.0.0.1:

- the fake LLM: `reflexio_pipelines/devtools/openai_stub.py` served by uvicorn in its own process (so it never
  shares the GIL with the pipeline), wrapped here with two extra routes, `GET /bench/stats` (calls, calls in flight
  now and at most, prompt tokens by the stub's own rule, calls by prompt kind) and `POST /bench/reset` (zero the
  counters, set the delay per call). The stub answers by REPLAYING THE BUILT-IN RULES over the prompt: these numbers measure plumbing,
  concurrency and cost per call, not extraction quality;
- the service: `python -m serving` on a fresh lake and `$DAGSTER_HOME`, turns published with
  `POST /api/publish_interaction` (the synthetic corpus of `benchmarks/llm_cost.py`: facts, corrections, tool
  failures, contradictions, small talk);
- learning: `python -m reflexio_pipelines materialize` (timed; the Dagster run and step timings are read back from
  the instance), `?wait_for_response=true` publishes, or `dagster-daemon run -w workspace.yaml` with the real
  `landing_sensor`.

Phases (`--phase`, comma-separated, default all):

1. `throughput` — turns learned per second in one materialize pass at 0.2, 1 and 3 s per LLM call with
   `REFLEXIO_LLM_CONCURRENCY=64` (500 users x 6 turns), the most calls in flight seen at the stub, and the serial
   baseline (`REFLEXIO_LLM_CONCURRENCY=1`, 50 users) at the same delay in the same run; ratio.
2. `rounds` — calls and prompt tokens per 1k turns when one stream is learned in 1, 4 and 16 rounds within a window
   (publish a share, materialize, repeat), with a run per publish (a `materialize --flush due` after each publish,
   what a sensor tick per publish does), and with `wait_for_response=true` on every publish (which forces each
   publish's turns through, so costs a call per publish by design); ratio to 1 round.
3. `sensor` — the same under the real `landing_sensor` cadence (the daemon running while turns are published at a
   steady rate), against one materialize pass over the same stream.
4. `latency` — publish -> searchable p50/p95/max under steady publishing (50 turns/s for 5 minutes) with the daemon
   and the service running, for the built-in extractor and the 1 s stub; every conversation teaches one item
   carrying a unique marker, polled with `POST /api/search` for its user until found.
5. `orgs` — keyed mode, two organisations: B's `wait_for_response` publish latency alone and while A runs a large
   pass (A publishes many users, then its own `wait_for_response` publish starts the run); ratio.
6. `shards` — one window (`--shards-users` users) learned by one materialize pass with `REFLEXIO_LEARNING_SHARDS=1`
   and with 4 (the multiprocess executor, a process per shard), at the same calls in flight per learning process
   (`--shards-concurrency`: each process or machine brings its own workers); speedup of the extraction run.

    .venv/bin/python -m benchmarks.learning_throughput [--phase all] [--users 500] [--serial-users 50] ...
    .venv/bin/python -m benchmarks.learning_throughput --phase rounds --rounds-users 20 --rounds 4

Writes benchmarks/results/learning_throughput.json (after every phase, so a stopped run keeps what it measured).
Every subprocess is stopped on exit, also on Ctrl-C or an exception; only 127.0.0.1 is bound. See
docs/operations.md#benchmarks for what each figure means and how long the full sizes take.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchmarks._common import (
    HOST,
    PROCS,
    ROOT,
    daemon_cmd,
    free_port,
    hermetic_env,
    http_ok,
    log_tail,
    make_dagster_home,
    open_instance,
    percentile,
    service_cmd,
    wait_ready,
)
from reflexio_pipelines.learning.holdout import HOLDOUT_HEADER

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "learning_throughput.json"
STUB_MODEL = "openai/stub"
STUB_KEY = "bench-key"
PHASES = ("throughput", "rounds", "sensor", "latency", "orgs", "shards")

#: The issue's "Done means" (issue 14), checked against what this run measured.
INSTANCE_YAML = """\
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
  config:
    dequeue_interval_seconds: 1
telemetry:
  enabled: false
"""

TARGETS = {
    "throughput_turns_per_s_at_1s": 150.0,
    "throughput_max_in_flight_at_1s": 32,
    "rounds_calls_ratio_max": 1.05,
    "sensor_calls_per_1k_turns_max": 180.0,
    "sensor_prompt_tokens_per_1k_turns_max": 270_000.0,
    "latency_p95_s_max_stub_1s": 60.0,
    "latency_p95_s_max_builtin": 30.0,
    "orgs_ratio_max": 1.5,
    "shards_speedup_min": 3.0,
}

NOTES = [
    "The fake LLM (reflexio_pipelines/devtools/openai_stub.py, own process, uvicorn on 127.0.0.1) answers every prompt "
    "by replaying the built-in rules over the transcript it is sent: these figures measure plumbing, concurrency, run cadence and "
    "cost per call, NOT extraction quality.",
    "Prompt tokens are counted at the stub by its own rule (characters / 4 of every message text of each call), "
    "independently of what the pipeline reports (shown beside it as pipeline_reported where the run metadata has it).",
    "calls / prompt_tokens are the learning calls (extraction and dedup prompts, told apart by the stub's own "
    "prompt tests); all_calls adds session-evaluation, shadow and aggregation calls a daemon schedule may make.",
    "turns/s = turns learned (per the extraction_bookmarks the pass left) / wall time of the whole "
    "`python -m reflexio_pipelines materialize` process (start-up, compaction, learning, index build and publish); "
    "the extraction run alone (`extract_job`: compaction and learning, the run a sensor launches) and the learning "
    "step alone (Dagster step `user_learning`) are reported beside it; the target is judged on the whole process.",
    "Windows are ingest-time windows (hourly by default): a phase that straddles an hour boundary learns in two "
    "windows; `windows` in each row says which it touched.",
    "The machine is shared by the stub, the service, the pipeline and the load generator (2 cores here): numbers are "
    "a floor for a dedicated deployment.",
]


def _on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through every finally: children are stopped


# ---------------------------------------------------------------------------------------------------------------
# The fake LLM in its own process
# ---------------------------------------------------------------------------------------------------------------


def serve_stub(port: int, delay_s: float) -> None:
    """The `_serve-stub` mode of this script: the OpenAI stub plus the benchmark's counter routes, on 127.0.0.1."""
    import uvicorn
    from fastapi import Body

    from reflexio_pipelines.devtools.openai_stub import (
        StubBehaviour,
        is_aggregation_prompt,
        is_dedup_prompt,
        is_session_evaluation_prompt,
        is_shadow_comparison_prompt,
        make_openai_stub,
        request_tokens,
        user_text,
    )

    app = make_openai_stub(StubBehaviour(delay_s=delay_s))
    counts: dict[str, Any] = {}

    def zero() -> None:
        counts.update(
            calls=0, prompt_tokens=0, by_kind=defaultdict(lambda: {"calls": 0, "prompt_tokens": 0}), since=time.time()
        )

    def kind_of(body: dict) -> str:
        text = user_text(body)
        tests = (
            ("session_evaluation", is_session_evaluation_prompt),  # the stub's own order (fake_llm_reply)
            ("shadow_comparison", is_shadow_comparison_prompt),
            ("dedup", is_dedup_prompt),
            ("aggregation", is_aggregation_prompt),
        )
        for kind, test in tests:
            if test(text):
                return kind
        return "extraction"

    def drain() -> None:
        # The stub keeps every request body; fold them into the counters and forget them (bounded memory).
        recorded, app.state.requests = app.state.requests, []
        for request in recorded:
            body = request["body"]
            tokens = request_tokens(body)  # the stub's own rule
            kind = counts["by_kind"][kind_of(body)]
            kind["calls"] += 1
            kind["prompt_tokens"] += tokens
            counts["calls"] += 1
            counts["prompt_tokens"] += tokens

    @app.get("/bench/stats")
    async def stats() -> dict:
        drain()
        return {
            "calls": counts["calls"],
            "prompt_tokens": counts["prompt_tokens"],
            "by_kind": dict(counts["by_kind"]),
            "in_flight": app.state.in_flight,
            "max_in_flight": app.state.max_in_flight,
            "delay_s": app.state.behaviour.delay_s,
            "since": counts["since"],
        }

    @app.post("/bench/reset")
    async def reset(payload: dict = Body(default_factory=dict)) -> dict:
        drain()
        zero()
        app.state.max_in_flight = app.state.in_flight
        if payload.get("delay_s") is not None:
            app.state.behaviour = StubBehaviour(delay_s=float(payload["delay_s"]))
        return {"ok": True, "delay_s": app.state.behaviour.delay_s}

    zero()
    uvicorn.run(app, host=HOST, port=port, log_level="warning", access_log=False, backlog=4096)


class Stub:
    """Client side of the stub process."""

    def __init__(self, logs: Path, delay_s: float) -> None:
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.log = logs / "stub.log"
        self.proc = PROCS.start(
            [
                sys.executable,
                "-m",
                "benchmarks.learning_throughput",
                "_serve-stub",
                "--port",
                str(self.port),
                "--delay",
                str(delay_s),
            ],
            hermetic_env(),
            self.log,
        )
        wait_ready(self.proc, http_ok(f"{self.url}/v1/models", timeout=2), 60, "the stub", lambda: log_tail(self.log))

    @property
    def api_base(self) -> str:
        return f"{self.url}/v1"

    def reset(self, delay_s: float | None = None) -> None:
        httpx.post(f"{self.url}/bench/reset", json={"delay_s": delay_s}, timeout=30).raise_for_status()

    def stats(self) -> dict:
        reply = httpx.get(f"{self.url}/bench/stats", timeout=60)
        reply.raise_for_status()
        return reply.json()

    def close(self) -> None:
        PROCS.stop(self.proc)


# ---------------------------------------------------------------------------------------------------------------
# Environments, workspaces, the service, the daemon, materialize
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class LLM:
    """Which extractor the children use: the stub (with a concurrency limit) or, with `stub=None`, the built-in one."""

    stub: Stub | None
    concurrency: int = 64
    rpm: int | None = None
    tpm: int | None = None
    builtin: str = "learned"  # without a stub: the learned extractor, or "rules" (the baseline it replaced)

    def env(self) -> dict[str, str]:
        if self.stub is None:
            return {} if self.builtin == "learned" else {"REFLEXIO_LLM_BUILTIN": self.builtin}
        env = {
            "REFLEXIO_LLM_MODEL": STUB_MODEL,
            "REFLEXIO_LLM_API_BASE": self.stub.api_base,
            "REFLEXIO_LLM_API_KEY": STUB_KEY,
            "REFLEXIO_LLM_CONCURRENCY": str(self.concurrency),
        }
        if self.rpm:
            env["REFLEXIO_LLM_RPM"] = str(self.rpm)
        if self.tpm:
            env["REFLEXIO_LLM_TPM"] = str(self.tpm)
        return env

    def label(self) -> str:
        if self.stub is None:
            return "builtin" if self.builtin == "learned" else f"builtin {self.builtin}"
        return f"stub concurrency={self.concurrency}"


@dataclass
class Workspace:
    """A fresh lake, `$DAGSTER_HOME` and log directory for one measurement."""

    root: Path
    extra_env: dict[str, str]

    def __post_init__(self) -> None:
        self.lake.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        # The deployment's run queue (deploy/dagster.yaml): queued, dequeued every second; SQLite storage here.
        make_dagster_home(self.home, INSTANCE_YAML)
        # Create the instance's SQLite storages here, before any child opens them: two processes creating them at
        # once can both stamp the schema version (alembic then refuses the database).
        with open_instance(self.home) as instance:
            instance.get_runs(limit=1)
            instance.get_daemon_heartbeats()

    @property
    def lake(self) -> Path:
        return self.root / "lake"

    @property
    def home(self) -> Path:
        return self.root / "dagster_home"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def env(self, llm: LLM, **more: str) -> dict[str, str]:
        return hermetic_env(
            **{"REFLEXIO_LAKE": str(self.lake), "DAGSTER_HOME": str(self.home), **llm.env(), **self.extra_env, **more}
        )


class Service:
    """`python -m serving` on 127.0.0.1 for one workspace."""

    def __init__(self, ws: Workspace, llm: LLM, **env: str) -> None:
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.log = ws.logs / f"service-{self.port}.log"
        self.proc = PROCS.start(
            # each scenario starts the daemon it measures itself (Daemon below) or none
            service_cmd(ws.lake, self.port, daemon=False),
            ws.env(llm, **env),
            self.log,
        )
        wait_ready(self.proc, http_ok(f"{self.url}/health", timeout=2), 120, "the service", lambda: log_tail(self.log))

    def close(self) -> None:
        PROCS.stop(self.proc)


class Daemon:
    """`dagster-daemon run -w workspace.yaml` for one workspace (the code location reads REFLEXIO_LAKE at import)."""

    def __init__(self, ws: Workspace, llm: LLM, boot_timeout: float = 180.0) -> None:
        self.ws = ws
        self.log = ws.logs / "daemon.log"
        self.proc = PROCS.start(daemon_cmd(), ws.env(llm), self.log)
        self.booted_s = self._wait_sensor_daemon(boot_timeout)

    def _wait_sensor_daemon(self, timeout: float) -> float:
        """Seconds until the sensor daemon's first heartbeat (then `landing_sensor` ticks at its minimum interval)."""
        began = time.monotonic()
        while time.monotonic() - began < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dagster-daemon exited ({self.proc.returncode}):\n{log_tail(self.log)}")
            with open_instance(self.ws.home) as instance:
                beats = instance.get_daemon_heartbeats()
            if "SENSOR" in beats:
                return round(time.monotonic() - began, 1)
            time.sleep(1.0)
        raise RuntimeError(f"the sensor daemon sent no heartbeat within {timeout:.0f} s:\n{log_tail(self.log)}")

    def close(self) -> None:
        PROCS.stop(self.proc, grace=30.0)


_MATERIALIZED_RE = re.compile(r"^materialised (\d+) window\(s\): (.*)$", re.M)
_RUNS_RE = re.compile(r"^runs: (.*)$", re.M)
#: Learning cost the pipeline itself reports on the user_profiles materialisation (beside the stub's own count).
PIPELINE_COUNTS = ("users", "extraction_windows", "llm_calls", "dedup_calls", "prompt_tokens", "failed_windows")


_FLUSH_SUPPORTED: bool | None = None


def flush_supported() -> bool:
    """Whether this checkout's `materialize` has `--flush` (hold back incomplete windows of active sessions)."""
    global _FLUSH_SUPPORTED
    if _FLUSH_SUPPORTED is None:
        done = subprocess.run(
            [sys.executable, "-m", "reflexio_pipelines", "materialize", "--help"],
            cwd=ROOT,
            env=hermetic_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        _FLUSH_SUPPORTED = "--flush" in done.stdout
    return _FLUSH_SUPPORTED


def materialize(ws: Workspace, llm: LLM, timeout: float, flush: str | None = None) -> dict:
    """One `python -m reflexio_pipelines materialize` process, timed, with its Dagster run and step timings.
    `flush` ("all" | "due") is passed as `--flush` where the CLI has it (None: the CLI's default)."""
    log = ws.logs / f"materialize-{time.time_ns()}.log"
    cmd = [sys.executable, "-m", "reflexio_pipelines", "materialize", "--lake", str(ws.lake)]
    if flush and flush_supported():
        cmd += ["--flush", flush]
    began = time.monotonic()
    proc = PROCS.start(cmd, ws.env(llm), log)
    try:
        rc = proc.wait(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        PROCS.stop(proc)
        rc, timed_out = None, True
    wall = time.monotonic() - began
    PROCS.stop(proc)
    text = log_tail(log, 20_000)
    windows_match, runs_match = _MATERIALIZED_RE.search(text), _RUNS_RE.search(text)
    windows = _listed(windows_match.group(2)) if windows_match else []
    run_ids = _listed(runs_match.group(1)) if runs_match else []
    row = {
        "wall_s": round(wall, 2),
        "returncode": rc,
        "timed_out": timed_out,
        "windows": windows,
        "flush": flush if flush and flush_supported() else "(CLI default)",
    }
    if rc != 0:
        row["log_tail"] = text[-2000:]
    row.update(run_timings(ws.home, run_ids))
    return row


def _listed(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip() not in ("", "-")]


def run_timings(home: Path, run_ids: Sequence[str] | None = None) -> dict:
    """Per Dagster run (given ids, else every run of the instance): job, status, duration and step durations; the
    learning step's total; the learning cost the runs' user_profiles materialisations report."""
    from dagster import DagsterEventType

    runs, learning, reported = [], 0.0, dict.fromkeys(PIPELINE_COUNTS, 0)
    with open_instance(home) as instance:
        ids = list(run_ids) if run_ids is not None else [r.run_id for r in instance.get_runs()]
        for run_id in ids:
            run = instance.get_run_by_id(run_id)
            if run is None:
                continue
            stats = instance.get_run_stats(run_id)
            steps = {
                s.step_key: round((s.end_time or 0) - (s.start_time or 0), 2)
                for s in instance.get_run_step_stats(run_id)
                if s.start_time
            }
            learning += steps.get("user_learning", 0.0)
            duration = (stats.end_time - stats.start_time) if stats.start_time and stats.end_time else None
            row = {
                "run_id": run_id,
                "job": run.job_name,
                "status": run.status.value,
                "duration_s": round(duration, 2) if duration is not None else None,
                "steps": steps,
            }
            if run.status.value == "FAILURE":
                row["error"] = _run_error(instance, run_id)
            runs.append(row)
            for record in instance.all_logs(run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION):
                mat = record.asset_materialization
                if mat is None or mat.asset_key.path[-1] != "user_profiles":
                    continue
                for key in PIPELINE_COUNTS:
                    value = mat.metadata.get(key)
                    if value is not None and isinstance(value.value, (int, float)):
                        reported[key] += value.value
    return {"runs": runs, "learning_step_s": round(learning, 2), "pipeline_reported": reported}


def _run_error(instance: Any, run_id: str) -> str | None:
    """The first step failure's error class and message of a failed run (for the report)."""
    from dagster import DagsterEventType

    for record in instance.all_logs(run_id, of_type={DagsterEventType.STEP_FAILURE, DagsterEventType.RUN_FAILURE}):
        error = getattr(record.dagster_event.event_specific_data, "error", None)
        if error is not None:
            return f"{record.dagster_event.step_key or 'run'}: {error.cls_name}: {error.message.strip()[:300]}"
    return None


# ---------------------------------------------------------------------------------------------------------------
# The corpus and publishing
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class Publish:
    user_id: str
    body: dict


@dataclass
class Stream:
    """A corpus as publish bodies in time order (`llm_cost.generate_corpus`, reused, not copied)."""

    publishes: list[Publish]
    users: int
    exchange_kinds: dict[str, int] = field(default_factory=dict)

    @property
    def turns(self) -> int:
        return sum(len(p.body["interaction_data_list"]) for p in self.publishes)


def _turn_json(turn: Any) -> dict:
    item: dict = {"role": turn.role, "content": turn.content}
    if turn.tools_used:
        item["tools_used"] = [{"tool_name": c.tool_name, "tool_data": c.tool_data} for c in turn.tools_used]
    return item


def make_stream(users: int, turns_per_user: int, seed: int, prefix: str = "user") -> Stream:
    """`users` x `turns_per_user` turns of the llm_cost corpus (sessions within one hour of corpus time, published in
    that order; the server stamps the real receipt time). User ids get `prefix` so streams never share users."""
    from benchmarks.llm_cost import generate_corpus

    corpus = generate_corpus(users, turns_per_user, seed, hours=1)
    publishes = []
    for p in corpus.publishes:
        user_id = p.user_id.replace("user", prefix, 1)
        session_id = p.turns[0].session_id.replace("user", prefix, 1) if p.turns[0].session_id else None
        publishes.append(
            Publish(
                user_id,
                {
                    "user_id": user_id,
                    "session_id": session_id,
                    "source": "bench",
                    "interaction_data_list": [_turn_json(t) for t in p.turns],
                },
            )
        )
    return Stream(publishes, users, dict(corpus.exchange_kinds))


class Ledger:
    """Every acknowledged publish: turn ids per user in order (to read what a run learned), latencies, errors."""

    def __init__(self) -> None:
        self.turns: dict[str, list[str]] = defaultdict(list)
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.lock = threading.Lock()

    def record(self, user_id: str, request_id: str, n_turns: int, latency: float) -> None:
        with self.lock:
            self.turns[user_id].extend(f"{request_id}:{i}" for i in range(n_turns))
            self.latencies.append(latency)

    @property
    def turn_count(self) -> int:
        return sum(len(t) for t in self.turns.values())

    def positions(self) -> dict[str, tuple[str, int]]:
        return {tid: (user, i) for user, ids in self.turns.items() for i, tid in enumerate(ids)}


async def _post_publish(
    client: httpx.AsyncClient, pub: Publish, ledger: Ledger, wait: bool, headers: dict | None = None
) -> dict | None:
    began = time.monotonic()
    try:
        reply = await client.post(
            "/api/publish_interaction",
            json=pub.body,
            headers=headers,
            params={"wait_for_response": "true"} if wait else None,
        )
        data = reply.json() if reply.status_code == 200 else None
    except (httpx.HTTPError, ValueError) as exc:
        ledger.errors.append(f"{type(exc).__name__}: {exc}"[:300])
        return None
    if data is None or not data.get("success"):
        ledger.errors.append(f"HTTP {reply.status_code}: {reply.text[:300]}")
        return None
    ledger.record(pub.user_id, data["request_id"], len(pub.body["interaction_data_list"]), time.monotonic() - began)
    data["latency_s"] = time.monotonic() - began
    data["acked_at"] = time.monotonic()
    return data


def publish(
    url: str,
    publishes: Sequence[Publish],
    ledger: Ledger,
    *,
    concurrency: int = 16,
    wait: bool = False,
    headers: dict | None = None,
    timeout: float = 900.0,
) -> list[dict | None]:
    """Publish as fast as the service acknowledges: users concurrently (at most `concurrency`), each user's publishes
    in stream order. With `wait`, publishes go one at a time (each is a run: `wait_for_response=true`)."""

    async def main() -> list[dict | None]:
        results: list[dict | None] = [None] * len(publishes)
        per_user: dict[str, list[int]] = defaultdict(list)
        for i, pub in enumerate(publishes):
            per_user[pub.user_id].append(i)
        gate = asyncio.Semaphore(1 if wait else concurrency)
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        async with httpx.AsyncClient(base_url=url, timeout=timeout, limits=limits) as client:

            async def user_task(indexes: list[int]) -> None:
                for i in indexes:
                    async with gate:
                        results[i] = await _post_publish(client, publishes[i], ledger, wait, headers)

            if wait:  # strictly in stream order
                for i, pub in enumerate(publishes):
                    results[i] = await _post_publish(client, pub, ledger, True, headers)
            else:
                await asyncio.gather(*(user_task(ix) for ix in per_user.values()))
        return results

    return asyncio.run(main())


def publish_steadily(
    url: str,
    publishes: Sequence[Publish],
    ledger: Ledger,
    turns_per_s: float,
    *,
    on_ack: Callable[[int, dict], None] | None = None,
    stop: threading.Event | None = None,
    headers: dict | None = None,
) -> dict:
    """Publish at a steady rate: publish i leaves at start + (turns before it) / turns_per_s; a user's publishes
    never overtake each other. Returns the achieved rate and how far behind schedule the load generator fell."""

    async def main() -> dict:
        start = time.monotonic()
        last_of_user: dict[str, asyncio.Task] = {}
        lag: list[float] = []
        sent_turns = 0
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:

            async def one(i: int, pub: Publish, previous: asyncio.Task | None) -> None:
                if previous is not None:
                    await previous
                data = await _post_publish(client, pub, ledger, False, headers)
                if data is not None and on_ack is not None:
                    on_ack(i, data)

            tasks = []
            for i, pub in enumerate(publishes):
                if stop is not None and stop.is_set():
                    break
                due = start + sent_turns / turns_per_s
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                lag.append(max(0.0, time.monotonic() - due))
                task = asyncio.create_task(one(i, pub, last_of_user.get(pub.user_id)))
                last_of_user[pub.user_id] = task
                tasks.append(task)
                sent_turns += len(pub.body["interaction_data_list"])
            await asyncio.gather(*tasks)
        elapsed = time.monotonic() - start
        return {
            "publish_s": round(elapsed, 1),
            "turns_sent": sent_turns,
            "achieved_turns_per_s": round(sent_turns / elapsed, 1) if elapsed else None,
            "max_schedule_lag_s": round(max(lag), 2) if lag else 0.0,
        }

    return asyncio.run(main())


# ---------------------------------------------------------------------------------------------------------------
# What the lake says was learned
# ---------------------------------------------------------------------------------------------------------------


def coverage(ws: Workspace, ledger: Ledger, lake: Path | None = None) -> dict:
    """Turns learned: per user, the furthest published turn any extraction bookmark points at (per extractor group,
    the least advanced group counts); plus the learned rows."""
    from reflexio_pipelines.lake.io import Lake

    store = Lake.at(str(lake or ws.lake))
    positions = ledger.positions()
    furthest: dict[tuple[str, str], int] = {}
    for row in store.read_table("extraction_bookmarks").to_pylist():
        where = positions.get(row["last_turn_id"] or "")
        if where is None:
            continue
        key = (where[0], row["extractor"])
        furthest[key] = max(furthest.get(key, -1), where[1])
    per_user: dict[str, int] = {}
    for (user, _), pos in furthest.items():
        per_user[user] = min(per_user.get(user, pos), pos)
    learned = sum(pos + 1 for pos in per_user.values())
    complete = sum(1 for user, pos in per_user.items() if pos + 1 == len(ledger.turns[user]))
    return {
        "turns_published": ledger.turn_count,
        "turns_learned": learned,
        "users_published": len(ledger.turns),
        "users_fully_learned": complete,
        "profile_rows": store.read_table("user_profiles").num_rows,
        "playbook_rows": store.read_table("user_playbooks").num_rows,
    }


def active_runs(home: Path) -> int:
    from dagster import DagsterRunStatus, RunsFilter

    busy = [
        DagsterRunStatus.QUEUED,
        DagsterRunStatus.NOT_STARTED,
        DagsterRunStatus.STARTING,
        DagsterRunStatus.STARTED,
        DagsterRunStatus.CANCELING,
    ]
    with open_instance(home) as instance:
        return len(instance.get_runs(filters=RunsFilter(statuses=busy)))


def pending_count(ws: Workspace) -> int:
    from reflexio_pipelines.lake.io import Lake
    from reflexio_pipelines.partitions import GRANULARITY
    from reflexio_pipelines.pending import pending_windows

    return len(pending_windows(Lake.at(str(ws.lake)), GRANULARITY))


def drain(ws: Workspace, ledger: Ledger, timeout: float, idle_grace: float = 45.0) -> dict:
    """Wait until the daemon is done with everything published: nothing pending, no run queued or running, and every
    turn learned — or, with turns still unlearned (held back by a run), that idle state for `idle_grace` seconds —
    or `timeout` (runs still going are then interrupted by the daemon's stop and count as failed)."""
    began = time.monotonic()
    idle_since: float | None = None
    reason = "timeout"
    while time.monotonic() - began < timeout:
        if pending_count(ws) == 0 and active_runs(ws.home) == 0:
            if coverage(ws, ledger)["turns_learned"] >= ledger.turn_count:
                reason = "all turns learned, no run left"
                break
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since >= idle_grace:
                reason = f"idle for {idle_grace:.0f} s with turns unlearned"
                break
        else:
            idle_since = None
        time.sleep(2.0)
    return {"drain_s": round(time.monotonic() - began, 1), "drain_end": reason}


# ---------------------------------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------------------------------


def per_1k(value: float, turns: int) -> float | None:
    return round(value * 1000 / turns, 1) if turns else None


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def chunks(items: Sequence, n: int) -> list[list]:
    """`items` split into `n` contiguous, nearly equal parts (empty parts dropped)."""
    size = len(items) / n
    parts = [list(items[round(k * size) : round((k + 1) * size)]) for k in range(n)]
    return [p for p in parts if p]


#: Calls the stub answers that are not learning from turns (the daemon's schedules may run these): counted apart.
NOT_LEARNING = ("session_evaluation", "shadow_comparison", "aggregation")


def stub_block(stats: dict, turns: int) -> dict:
    """The stub's counts for one measurement. `calls` / `prompt_tokens` (and per 1k turns) are the learning calls —
    extraction and dedup; `all_calls` adds evaluation and aggregation calls, if a schedule made any."""
    learning = {k: v for k, v in stats["by_kind"].items() if k not in NOT_LEARNING}
    calls = sum(v["calls"] for v in learning.values())
    tokens = sum(v["prompt_tokens"] for v in learning.values())
    return {
        "calls": calls,
        "prompt_tokens": tokens,
        "max_in_flight": stats["max_in_flight"],
        "calls_per_1k_turns": per_1k(calls, turns),
        "prompt_tokens_per_1k_turns": per_1k(tokens, turns),
        "calls_by_kind": {k: v["calls"] for k, v in stats["by_kind"].items()},
        "all_calls": stats["calls"],
        "all_prompt_tokens": stats["prompt_tokens"],
    }


def _fmt(value: Any, width: int) -> str:
    if value is None:
        text = "-"
    elif isinstance(value, float):
        text = f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"
    else:
        text = f"{value:,}" if isinstance(value, int) else str(value)
    return text.rjust(width)


def table(
    title: str, header: Sequence[str], rows: Iterable[Sequence[Any]], widths: Sequence[int] | None = None
) -> None:
    widths = widths or [max(12, len(h) + 2) for h in header]
    print(f"\n{title}")
    print("".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(header, widths))))
    for row in rows:
        print("".join(str(v).ljust(w) if i == 0 else _fmt(v, w) for i, (v, w) in enumerate(zip(row, widths))))


class Run:
    """What all phases share: arguments, the work directory, the stub, the report written after every phase."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.workdir = Path(args.workdir or tempfile.mkdtemp(prefix="learning-throughput-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.extra_env = dict(item.split("=", 1) for item in args.env)
        self._stub: Stub | None = None
        self._counter = 0
        self.report: dict[str, Any] = {
            "benchmark": "learning_throughput",
            "notes": NOTES,
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
            "params": {k: v for k, v in vars(args).items() if k not in ("out", "workdir")},
            "phases": {},
            "targets": {},
            "runtime_s": {},
        }

    def workspace(self, name: str, env: dict[str, str] | None = None) -> Workspace:
        self._counter += 1
        return Workspace(self.workdir / f"{self._counter:02d}-{name}", {**self.extra_env, **(env or {})})

    def stub(self, delay_s: float) -> Stub:
        if self._stub is None:
            self._stub = Stub(self.workdir, delay_s)
        self._stub.reset(delay_s)
        return self._stub

    def llm(self, delay_s: float, concurrency: int | None = None) -> LLM:
        return LLM(self.stub(delay_s), concurrency or self.args.concurrency, self.args.rpm, self.args.tpm)

    def save(self) -> None:
        out = Path(self.args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        self.report["machine"]["load_avg_1m"] = round(os.getloadavg()[0], 2)
        out.write_text(json.dumps(self.report, indent=2, default=str))

    def close(self) -> None:
        if self._stub is not None:
            self._stub.close()
        PROCS.stop_all()
        if not self.args.keep and not self.args.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------------------
# Phase 1: turns learned per second
# ---------------------------------------------------------------------------------------------------------------


def one_pass(run: Run, name: str, stream: Stream, llm: LLM, env: dict[str, str] | None = None) -> dict:
    """Fresh lake: publish the stream over HTTP, stop the service, one timed materialize; stub and lake counts.
    `env`: more settings for this pass's processes (e.g. REFLEXIO_LEARNING_SHARDS)."""
    ws = run.workspace(name, env)
    ledger = Ledger()
    service = Service(ws, llm)
    try:
        began = time.monotonic()
        publish(service.url, stream.publishes, ledger)
        publish_s = time.monotonic() - began
    finally:
        service.close()
    if llm.stub is not None:
        llm.stub.reset()
    mat = materialize(ws, llm, run.args.max_run_s, "all")
    stats = llm.stub.stats() if llm.stub is not None else None
    cov = coverage(ws, ledger)
    extract_s = sum(r["duration_s"] for r in mat.get("runs", []) if r["job"] == "extract_job") or None
    row = {
        "extractor": llm.label(),
        "users": stream.users,
        **cov,
        "publish_errors": len(ledger.errors),
        "publish_s": round(publish_s, 2),
        "publish_turns_per_s": round(ledger.turn_count / publish_s, 1) if publish_s else None,
        "materialize_s": mat["wall_s"],
        "learning_step_s": mat["learning_step_s"],
        "turns_per_s": round(cov["turns_learned"] / mat["wall_s"], 2) if mat["wall_s"] else None,
        "turns_per_s_learning_step": (
            round(cov["turns_learned"] / mat["learning_step_s"], 2) if mat["learning_step_s"] else None
        ),
        # the extraction run alone (compaction + learning, its process start and LiteLLM import included): what
        # one sensor-launched run costs, without the CLI's own start-up, index build and exit
        "extract_run_s": extract_s,
        "turns_per_s_extract_run": round(cov["turns_learned"] / extract_s, 2) if extract_s else None,
        "materialize": mat,
    }
    if stats is not None:
        row["stub"] = stub_block(stats, cov["turns_published"])
    if cov["turns_learned"] < cov["turns_published"]:
        row["warning"] = (
            f"{cov['turns_published'] - cov['turns_learned']} of {cov['turns_published']} published "
            "turns were not learned by this pass"
        )
    return row


def phase_throughput(run: Run) -> dict:
    a = run.args
    big = make_stream(a.users, a.turns_per_user, a.seed)
    small = make_stream(a.serial_users, a.turns_per_user, a.seed) if a.serial_users else None
    out: dict[str, Any] = {
        "stream": {"users": a.users, "turns": big.turns, "exchange_kinds": big.exchange_kinds},
        "by_delay": {},
    }
    for delay in a.delays:
        entry: dict[str, Any] = {}
        entry["concurrent"] = one_pass(run, f"throughput-{delay}s-c{a.concurrency}", big, run.llm(delay))
        if small is not None:
            entry["serial"] = one_pass(run, f"throughput-{delay}s-serial", small, run.llm(delay, 1))
            entry["ratio_vs_serial"] = ratio(entry["concurrent"]["turns_per_s"], entry["serial"]["turns_per_s"])
            entry["ratio_vs_serial_learning_step"] = ratio(
                entry["concurrent"]["turns_per_s_learning_step"], entry["serial"]["turns_per_s_learning_step"]
            )
        out["by_delay"][str(delay)] = entry
        run.report["phases"]["throughput"] = out
        run.save()
    rows = []
    for delay, entry in out["by_delay"].items():
        for mode in ("concurrent", "serial"):
            if mode in entry:
                r = entry[mode]
                rows.append(
                    [
                        f"{delay} s/call {mode}",
                        r["users"],
                        r["turns_learned"],
                        r["materialize_s"],
                        r["learning_step_s"],
                        r["turns_per_s"],
                        r["turns_per_s_extract_run"],
                        r["turns_per_s_learning_step"],
                        r["stub"]["calls"],
                        r["stub"]["max_in_flight"],
                        entry.get("ratio_vs_serial") if mode == "concurrent" else None,
                    ]
                )
    table(
        f"1. turns learned per second, one materialize pass (REFLEXIO_LLM_CONCURRENCY={a.concurrency} vs 1)",
        [
            "run",
            "users",
            "learned",
            "total s",
            "learn s",
            "turns/s",
            "run t/s",
            "learn t/s",
            "calls",
            "in flight",
            "x serial",
        ],
        rows,
        [24, 8, 8, 10, 10, 10, 9, 11, 8, 11, 10],
    )
    at_1s = out["by_delay"].get("1.0") or out["by_delay"].get("1")
    if at_1s:
        c = at_1s["concurrent"]
        run.report["targets"]["throughput_at_1s"] = {
            "target": f">= {TARGETS['throughput_turns_per_s_at_1s']} turns/s and >= "
            f"{TARGETS['throughput_max_in_flight_at_1s']} calls in flight (500 users x 6 turns)",
            "measured": {
                "turns_per_s": c["turns_per_s"],
                "turns_per_s_extract_run": c["turns_per_s_extract_run"],
                "turns_per_s_learning_step": c["turns_per_s_learning_step"],
                "max_in_flight": c["stub"]["max_in_flight"],
                "users": c["users"],
                "turns_per_user": a.turns_per_user,
            },
            "at_issue_size": c["users"] >= 500 and a.turns_per_user == 6,
            "met": c["users"] >= 500
            and a.turns_per_user == 6
            and (c["turns_per_s"] or 0) >= TARGETS["throughput_turns_per_s_at_1s"]
            and c["stub"]["max_in_flight"] >= TARGETS["throughput_max_in_flight_at_1s"],
        }
    return out


# ---------------------------------------------------------------------------------------------------------------
# Phase 2: calls per 1k turns by run cadence
# ---------------------------------------------------------------------------------------------------------------


def rounds_pass(run: Run, name: str, stream: Stream, llm: LLM, rounds: int, flush: str | None = "all") -> dict:
    """Fresh lake: the stream in `rounds` contiguous shares, a materialize (`--flush flush`) after each; a settle run
    at the end if turns were held back (counted)."""
    ws = run.workspace(name)
    ledger = Ledger()
    service = Service(ws, llm)
    llm.stub.reset()
    mats = []
    began = time.monotonic()
    try:
        for share in chunks(stream.publishes, rounds):
            publish(service.url, share, ledger)
            mats.append(materialize(ws, llm, run.args.max_run_s, flush))
        cov = coverage(ws, ledger)
        settle = 0
        if cov["turns_learned"] < cov["turns_published"] and run.args.settle_s > 0:
            time.sleep(run.args.settle_s)  # a held-back batch goes through once its session is quiet
            mats.append(materialize(ws, llm, run.args.max_run_s, flush))
            settle = 1
            cov = coverage(ws, ledger)
    finally:
        service.close()
    stats = llm.stub.stats()
    reported = {k: sum(m["pipeline_reported"][k] for m in mats) for k in PIPELINE_COUNTS}
    return {
        "mode": f"{rounds} round(s)",
        "rounds": rounds,
        "flush": mats[0]["flush"] if mats else None,
        "materialize_runs": len(mats),
        "settle_runs": settle,
        **cov,
        "publish_errors": len(ledger.errors),
        "elapsed_s": round(time.monotonic() - began, 1),
        "windows": sorted({w for m in mats for w in m["windows"]}),
        "failed_materialize": sum(1 for m in mats if m["returncode"] != 0),
        "materialize_s_total": round(sum(m["wall_s"] for m in mats), 1),
        "learning_step_s_total": round(sum(m["learning_step_s"] for m in mats), 1),
        "stub": stub_block(stats, cov["turns_published"]),
        "pipeline_reported": reported,
    }


def per_publish_pass(run: Run, name: str, stream: Stream, llm: LLM) -> dict:
    """Fresh lake: every publish with `wait_for_response=true` (a learning run per publish, in the service)."""
    ws = run.workspace(name)
    ledger = Ledger()
    service = Service(ws, llm)
    llm.stub.reset()
    began = time.monotonic()
    try:
        publish(service.url, stream.publishes, ledger, wait=True, timeout=run.args.max_run_s)
    finally:
        service.close()
    stats = llm.stub.stats()
    cov = coverage(ws, ledger)
    reported = run_timings(ws.home)["pipeline_reported"]
    return {
        "mode": "run per publish",
        "publishes": len(stream.publishes),
        **cov,
        "publish_errors": len(ledger.errors),
        "error_samples": ledger.errors[:3],
        "elapsed_s": round(time.monotonic() - began, 1),
        "wait_for_response_p50_s": percentile(ledger.latencies, 0.5),
        "wait_for_response_p95_s": percentile(ledger.latencies, 0.95),
        "stub": stub_block(stats, cov["turns_published"]),
        "pipeline_reported": reported,
    }


def phase_rounds(run: Run) -> dict:
    a = run.args
    llm = run.llm(a.rounds_delay)
    stream = make_stream(a.rounds_users, a.turns_per_user, a.seed)
    counts = sorted(set([1] + a.rounds))
    out: dict[str, Any] = {
        "stream": {"users": a.rounds_users, "turns": stream.turns, "publishes": len(stream.publishes)},
        "delay_s": a.rounds_delay,
        "modes": {},
    }
    for n in counts:
        # one pass learns everything at once; more rounds run as the sensor does (`--rounds-flush`, default due)
        flush = "all" if n == 1 else a.rounds_flush
        out["modes"][f"rounds_{n}"] = rounds_pass(run, f"rounds-{n}", stream, llm, n, flush)
        run.report["phases"]["rounds"] = out
        run.save()
    base = out["modes"]["rounds_1"]["stub"]
    for row in out["modes"].values():
        row["calls_ratio_vs_1_round"] = ratio(row["stub"]["calls"], base["calls"])
        row["prompt_tokens_ratio_vs_1_round"] = ratio(row["stub"]["prompt_tokens"], base["prompt_tokens"])
    if a.per_publish_users:
        pp_stream = make_stream(a.per_publish_users, a.turns_per_user, a.seed, prefix="pp")
        if a.per_publish_users == a.rounds_users:
            pp_base = out["modes"]["rounds_1"]
        else:
            pp_base = rounds_pass(run, "per-publish-1round", pp_stream, llm, 1)
            pp_base["calls_ratio_vs_1_round"] = pp_base["prompt_tokens_ratio_vs_1_round"] = 1.0
            out["modes"]["per_publish_baseline_1_round"] = pp_base
        # a run per publish as the sensor would run it (`--flush due`), and one forced by wait_for_response
        unforced = rounds_pass(run, "per-publish", pp_stream, llm, len(pp_stream.publishes), a.rounds_flush)
        forced = per_publish_pass(run, "per-publish-wait", pp_stream, llm)
        for key, row in (("per_publish", unforced), ("per_publish_wait_for_response", forced)):
            row["calls_ratio_vs_1_round"] = ratio(row["stub"]["calls"], pp_base["stub"]["calls"])
            row["prompt_tokens_ratio_vs_1_round"] = ratio(
                row["stub"]["prompt_tokens"], pp_base["stub"]["prompt_tokens"]
            )
            out["modes"][key] = row
    run.report["phases"]["rounds"] = out
    rows = [
        [
            name,
            r.get("materialize_runs", r.get("publishes")),
            r["turns_published"],
            r["turns_learned"],
            r["stub"]["calls"],
            r["stub"]["calls_per_1k_turns"],
            r["stub"]["prompt_tokens_per_1k_turns"],
            r.get("calls_ratio_vs_1_round"),
            r.get("prompt_tokens_ratio_vs_1_round"),
        ]
        for name, r in out["modes"].items()
    ]
    table(
        f"2. LLM cost by run cadence within one window ({a.rounds_delay} s/call stub)",
        ["mode", "runs", "turns", "learned", "calls", "calls/1k", "prompt tok/1k", "x calls", "x tokens"],
        rows,
        [30, 7, 8, 9, 8, 10, 15, 9, 10],
    )
    checked = {k: r["calls_ratio_vs_1_round"] for k, r in out["modes"].items() if k in ("rounds_4", "per_publish")}
    if not checked:  # a smaller run: whatever cadences it measured
        checked = {
            k: r["calls_ratio_vs_1_round"]
            for k, r in out["modes"].items()
            if k.startswith("rounds_") and k != "rounds_1"
        }
    if checked:
        run.report["targets"]["rounds_calls_ratio"] = {
            "target": f"4 rounds and a run per publish <= {TARGETS['rounds_calls_ratio_max']}x the calls of one pass",
            "measured": checked,
            "met": all(v is not None and v <= TARGETS["rounds_calls_ratio_max"] for v in checked.values()),
        }
    return out


# ---------------------------------------------------------------------------------------------------------------
# Phase 3: the live landing_sensor cadence
# ---------------------------------------------------------------------------------------------------------------


def sensor_row(mode: str, measured: dict, runs: int, calls_ratio: float | None) -> list:
    """One row of the sensor phase's table: a mode's turns and the stub LLM's calls, tokens and concurrency."""
    stub = measured["stub"]
    counts = [measured["turns_published"], measured["turns_learned"], stub["calls"], stub["calls_per_1k_turns"]]
    return [mode, runs, *counts, stub["prompt_tokens_per_1k_turns"], stub["max_in_flight"], calls_ratio]


def phase_sensor(run: Run) -> dict:
    a = run.args
    stream = make_stream(a.sensor_users, a.turns_per_user, a.seed, prefix="sensor")
    rate = stream.turns / a.sensor_seconds
    llm = run.llm(a.sensor_delay)
    ws = run.workspace("sensor")
    ledger = Ledger()
    service = Service(ws, llm)
    daemon = None
    try:
        daemon = Daemon(ws, llm)
        llm.stub.reset()
        load = publish_steadily(service.url, stream.publishes, ledger, rate)
        drained = drain(ws, ledger, a.drain_s)
    finally:
        if daemon is not None:
            daemon.close()
        service.close()
    stats = llm.stub.stats()
    cov = coverage(ws, ledger)
    timings = run_timings(ws.home)
    live = {
        "mode": "landing_sensor (dagster-daemon)",
        **cov,
        "publish_errors": len(ledger.errors),
        "target_turns_per_s": round(rate, 2),
        **load,
        **drained,
        "daemon_boot_s": daemon.booted_s,
        "runs": len(timings["runs"]),
        "runs_by_status": _count(r["status"] for r in timings["runs"]),
        "learning_step_s_total": timings["learning_step_s"],
        "stub": stub_block(stats, cov["turns_published"]),
        "pipeline_reported": timings["pipeline_reported"],
    }
    baseline = rounds_pass(run, "sensor-baseline-1round", stream, run.llm(a.baseline_delay), 1)
    live["calls_ratio_vs_1_round"] = ratio(live["stub"]["calls"], baseline["stub"]["calls"])
    live["prompt_tokens_ratio_vs_1_round"] = ratio(live["stub"]["prompt_tokens"], baseline["stub"]["prompt_tokens"])
    out = {
        "stream": {"users": a.sensor_users, "turns": stream.turns, "publishes": len(stream.publishes)},
        "delay_s": a.sensor_delay,
        "baseline_delay_s": a.baseline_delay,
        "live": live,
        "one_pass": baseline,
    }
    run.report["phases"]["sensor"] = out
    table(
        f"3. LLM cost under the live landing_sensor cadence ({rate:.1f} turns/s for {a.sensor_seconds:.0f} s, "
        f"{a.sensor_delay} s/call stub)",
        ["mode", "runs", "turns", "learned", "calls", "calls/1k", "prompt tok/1k", "in flight", "x calls"],
        [
            sensor_row("sensor (live)", live, live["runs"], live["calls_ratio_vs_1_round"]),
            sensor_row("one pass (same stream)", baseline, baseline["materialize_runs"], 1.0),
        ],
        [26, 7, 8, 9, 8, 10, 15, 11, 9],
    )
    print(f"   drain: {live['drain_s']} s ({live['drain_end']}); runs by status {live['runs_by_status']}")
    max_calls, max_tokens = TARGETS["sensor_calls_per_1k_turns_max"], TARGETS["sensor_prompt_tokens_per_1k_turns_max"]
    run.report["targets"]["sensor_cost_per_1k_turns"] = {
        "target": f"<= {TARGETS['sensor_calls_per_1k_turns_max']:.0f} chat calls and <= "
        f"{TARGETS['sensor_prompt_tokens_per_1k_turns_max']:.0f} prompt tokens per 1k turns",
        "measured": {
            "calls_per_1k_turns": live["stub"]["calls_per_1k_turns"],
            "prompt_tokens_per_1k_turns": live["stub"]["prompt_tokens_per_1k_turns"],
            "turns_learned_share": ratio(live["turns_learned"], live["turns_published"]),
        },
        "met": (
            live["turns_learned"] == live["turns_published"]
            and (live["stub"]["calls_per_1k_turns"] or 0) <= max_calls
            and (live["stub"]["prompt_tokens_per_1k_turns"] or 0) <= max_tokens
        ),
    }
    return out


def _count(values: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for v in values:
        counts[v] += 1
    return dict(counts)


# ---------------------------------------------------------------------------------------------------------------
# Phase 4: publish -> searchable
# ---------------------------------------------------------------------------------------------------------------

_MARK_WORDS = ("Vortan", "Kestrel", "Quillon", "Marrow", "Tessary", "Brindle", "Ostrava", "Calyx", "Fennick", "Jorvik")


@dataclass
class Probe:
    user_id: str
    marker: str
    kind: str  # "profile" | "playbook"
    query: str
    acked_at: float | None = None
    found_at: float | None = None


def probe_stream(conversations: int, seed: int) -> tuple[Stream, list[Probe]]:
    """One user per conversation: 4 turns of the llm_cost corpus, then one teaching exchange carrying a unique marker
    in the conversation's last publish — a correction of the agent's last answer (a playbook) for every other user,
    a stated fact (a profile) for the rest and for users whose corpus turns already hold a correction (a second
    correction of the same request may be merged with the first by the offline dedup rules)."""
    from benchmarks.llm_cost import TASKS

    corrections = {task.correction for task in TASKS}
    base = make_stream(conversations, 4, seed, prefix="lat")
    corrected = {
        p.user_id for p in base.publishes if any(t["content"] in corrections for t in p.body["interaction_data_list"])
    }
    probes: dict[str, Probe] = {}
    last_publish: dict[str, Publish] = {}
    for pub in base.publishes:
        last_publish[pub.user_id] = pub
    for i, (user_id, pub) in enumerate(sorted(last_publish.items())):
        marker = f"{_MARK_WORDS[i % len(_MARK_WORDS)]}{i:05d}"
        if i % 2 == 0 or user_id in corrected:
            turns = [
                {"role": "user", "content": f"My project codename is {marker}."},
                {"role": "assistant", "content": f"Noted: your project codename is {marker}."},
            ]
            probe = Probe(user_id, marker, "profile", f"project codename {marker}")
        else:
            turns = [
                {"role": "user", "content": f"No, always file that under change ticket {marker} first."},
                {"role": "assistant", "content": f"Understood, filed under change ticket {marker}."},
            ]
            probe = Probe(user_id, marker, "playbook", f"change ticket {marker}")
        pub.body["interaction_data_list"].extend(turns)
        probes[user_id] = probe
    return base, [probes[p.user_id] for p in base.publishes if p is last_publish[p.user_id]]


def _found(payload: dict, probe: Probe) -> bool:
    needle = probe.marker.casefold()
    items = payload.get("profiles", []) + payload.get("user_playbooks", [])
    return any(needle in str(item.get("content", "")).casefold() for item in items)


class Prober:
    """Polls search for every acknowledged, not yet found probe: on every new index version the service reports
    (`/health`, polled every `poll_s`), and every `sweep_s` regardless. A probe is found when its user's search returns
    the marker; it has been searchable since the service first reported the index version that answered (so the
    time a sweep takes does not count), and never before its publish was acknowledged."""

    def __init__(
        self, url: str, probes: Sequence[Probe], poll_s: float, sweep_s: float = 15.0, workers: int = 4
    ) -> None:
        self.url, self.probes, self.poll_s, self.sweep_s, self.workers = url, list(probes), poll_s, sweep_s, workers
        self.first_seen: dict[str, float] = {}  # index version -> when this prober first saw it served
        self.searches = 0
        self.search_errors = 0
        self._lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="prober", daemon=True)

    @property
    def versions(self) -> list[str]:
        return list(self.first_seen)

    def start(self) -> None:
        self.thread.start()

    def outstanding(self) -> list[Probe]:
        return [p for p in self.probes if p.acked_at is not None and p.found_at is None]

    def _seen(self, version: str | None) -> float | None:
        with self._lock:
            if version and version not in self.first_seen:
                self.first_seen[version] = time.monotonic()
            return self.first_seen.get(version) if version else None

    def _loop(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        client = httpx.Client(base_url=self.url, timeout=30, limits=httpx.Limits(max_connections=self.workers + 1))
        last_sweep = 0.0
        try:
            with ThreadPoolExecutor(self.workers, thread_name_prefix="probe") as pool:
                while not self.stop.is_set():
                    try:
                        version = client.get("/health").json().get("index_version")
                    except (httpx.HTTPError, ValueError):
                        version = None
                    new = bool(version) and version not in self.first_seen
                    self._seen(version)
                    if new or time.monotonic() - last_sweep >= self.sweep_s:
                        list(pool.map(lambda probe: self._search(client, probe), self.outstanding()))
                        last_sweep = time.monotonic()
                    self.stop.wait(self.poll_s)
        finally:
            client.close()

    def _search(self, client: httpx.Client, probe: Probe) -> None:
        if self.stop.is_set():
            return
        try:
            # the holdout control group (5 % of users by default) is served no learned items by design: this
            # measures when an item becomes searchable, so the probes opt out of it as a debugging caller does
            reply = client.post(
                "/api/search",
                json={"query": probe.query, "user_id": probe.user_id, "top_k": 5},
                headers={HOLDOUT_HEADER: "off"},
            )
            with self._lock:
                self.searches += 1
            if reply.status_code == 200:
                payload = reply.json()
                if _found(payload, probe):
                    since = self._seen(payload.get("index_version")) or time.monotonic()
                    probe.found_at = max(since, probe.acked_at or since)
        except (httpx.HTTPError, ValueError):
            with self._lock:
                self.search_errors += 1


def _in_lake(ws: Workspace, probes: Sequence[Probe]) -> int:
    """How many of `probes` the lake holds a current item for (learned, yet never found by search in the run)."""
    if not probes:
        return 0
    from reflexio_pipelines.lake.io import Lake

    store = Lake.at(str(ws.lake))
    users = sorted({p.user_id for p in probes})
    texts: dict[str, str] = defaultdict(str)
    for table in ("user_profiles", "user_playbooks"):
        for row in store.read_table(table, filters=[("user_id", "in", users)]).to_pylist():
            texts[row["user_id"]] += " " + str(row.get("content", "")).casefold()
    return sum(1 for p in probes if p.marker.casefold() in texts[p.user_id])


def latency_run(run: Run, name: str, llm: LLM) -> dict:
    a = run.args
    conversations = max(1, int(a.latency_rate * a.latency_seconds / 6))
    stream, probes = probe_stream(conversations, a.seed)
    by_user = {p.user_id: p for p in probes}
    last_index = {}
    for i, pub in enumerate(stream.publishes):
        last_index[pub.user_id] = i
    ws = run.workspace(name)
    ledger = Ledger()
    service = Service(ws, llm)
    daemon = prober = None
    try:
        daemon = Daemon(ws, llm)
        if llm.stub is not None:
            llm.stub.reset()
        prober = Prober(service.url, probes, a.poll_s)
        prober.start()

        def on_ack(i: int, data: dict) -> None:
            pub = stream.publishes[i]
            if last_index[pub.user_id] == i:
                by_user[pub.user_id].acked_at = data["acked_at"]

        load = publish_steadily(service.url, stream.publishes, ledger, a.latency_rate, on_ack=on_ack)
        deadline = time.monotonic() + a.latency_drain_s
        while time.monotonic() < deadline and prober.outstanding():
            time.sleep(1.0)
    finally:
        if prober is not None:
            prober.stop.set()
            prober.thread.join(timeout=60)
        if daemon is not None:
            daemon.close()
        service.close()
    latencies = [p.found_at - p.acked_at for p in probes if p.found_at is not None and p.acked_at is not None]
    acked = [p for p in probes if p.acked_at is not None]
    unfound = [p for p in acked if p.found_at is None]
    stats = llm.stub.stats() if llm.stub is not None else None
    timings = run_timings(ws.home)
    cov = coverage(ws, ledger)
    row = {
        "extractor": llm.label()
        if llm.stub is None
        else f"stub {stats['delay_s']} s/call, concurrency {llm.concurrency}",
        "conversations": conversations,
        "probes_acked": len(acked),
        "found": len(latencies),
        "never_searchable": len(acked) - len(latencies),
        "never_searchable_by_kind": _count(p.kind for p in unfound),
        "never_searchable_but_in_lake": _in_lake(ws, unfound),
        "probes_by_kind": _count(p.kind for p in acked),
        "p50_s": percentile(latencies, 0.5),
        "p95_s": percentile(latencies, 0.95),
        "max_s": percentile(latencies, 1.0),
        "mean_s": round(statistics.fmean(latencies), 3) if latencies else None,
        **load,
        "publish_errors": len(ledger.errors),
        "drain_limit_s": a.latency_drain_s,
        "index_versions_seen": len(prober.versions),
        "searches": prober.searches,
        "search_errors": prober.search_errors,
        "runs": len(timings["runs"]),
        "runs_by_status": _count(r["status"] for r in timings["runs"]),
        "run_s_p50": percentile([r["duration_s"] for r in timings["runs"] if r["duration_s"] is not None], 0.5),
        "run_steps_s_p50": _steps_p50(timings["runs"]),
        **cov,
    }
    if stats is not None:
        row["stub"] = stub_block(stats, cov["turns_published"])
    return row


def _steps_p50(runs: Sequence[dict]) -> dict[str, float | None]:
    """Per step of the runs: its median duration (where a probe's wait goes once its session is quiet)."""
    steps: dict[str, list[float]] = defaultdict(list)
    for r in runs:
        for step, seconds in r["steps"].items():
            steps[step].append(seconds)
    return {step: percentile(values, 0.5) for step, values in sorted(steps.items())}


def phase_latency(run: Run) -> dict:
    a = run.args
    out: dict[str, Any] = {"rate_turns_per_s": a.latency_rate, "seconds": a.latency_seconds, "runs": {}}
    extractors = {
        "builtin": lambda: LLM(None),
        "builtin-rules": lambda: LLM(None, builtin="rules"),  # the rule extractor the learned one replaced
        "stub": lambda: run.llm(a.latency_delay),
    }
    for name in a.latency_extractors:  # in the order given: alternate orders to see what a busy machine does
        out["runs"][name] = latency_run(run, f"latency-{name}", extractors[name]())
        run.report["phases"]["latency"] = out
        run.save()
    table(
        f"4. publish -> searchable under steady publishing ({a.latency_rate} turns/s for {a.latency_seconds:.0f} s, "
        "landing_sensor + service running)",
        ["extractor", "probes", "found", "never", "p50 s", "p95 s", "max s", "runs", "versions", "turns/s"],
        [
            [
                r["extractor"],
                r["probes_acked"],
                r["found"],
                r["never_searchable"],
                r["p50_s"],
                r["p95_s"],
                r["max_s"],
                r["runs"],
                r["index_versions_seen"],
                r["achieved_turns_per_s"],
            ]
            for r in out["runs"].values()
        ],
        [34, 8, 8, 8, 9, 9, 9, 7, 10, 9],
    )
    learned, rules = out["runs"].get("builtin"), out["runs"].get("builtin-rules")
    if learned and rules and learned["p95_s"] and rules["p95_s"]:
        out["p95_ratio_learned_over_rules"] = round(learned["p95_s"] / rules["p95_s"], 3)
        print(f"   built-in p95, learned / rules in this run: {out['p95_ratio_learned_over_rules']}")
    limits = (("stub", TARGETS["latency_p95_s_max_stub_1s"]), ("builtin", TARGETS["latency_p95_s_max_builtin"]))
    for name, limit in limits:
        r = out["runs"].get(name)
        if r is None:
            continue
        run.report["targets"][f"latency_p95_{name}"] = {
            "target": f"p95 <= {limit:.0f} s ({'1 s LLM' if name == 'stub' else 'built-in extractor'}), "
            "every probe found",
            "measured": {
                "p95_s": r["p95_s"],
                "never_searchable": r["never_searchable"],
                "turns_per_s": a.latency_rate,
                "seconds": a.latency_seconds,
            },
            "at_issue_size": a.latency_rate >= 50 and a.latency_seconds >= 300,
            "met": a.latency_rate >= 50
            and a.latency_seconds >= 300
            and r["p95_s"] is not None
            and r["p95_s"] <= limit
            and r["never_searchable"] == 0,
        }
    return out


# ---------------------------------------------------------------------------------------------------------------
# Phase 5: two organisations
# ---------------------------------------------------------------------------------------------------------------


def _create_key(ws: Workspace, keys_file: Path, org: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "serving", "keys", "create", "--org", org],
        env=ws.env(LLM(None), REFLEXIO_API_KEYS_FILE=str(keys_file)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"keys create --org {org} failed: {done.stderr[-1000:]}")
    return done.stdout.strip().splitlines()[-1].strip()


def phase_orgs(run: Run) -> dict:
    a = run.args
    llm = run.llm(a.orgs_delay)
    ws = run.workspace("orgs")
    keys_file = ws.root / "keys.json"
    keys = {org: _create_key(ws, keys_file, org) for org in ("org-a", "org-b")}
    headers = {org: {"Authorization": f"Bearer {key}"} for org, key in keys.items()}
    a_stream = make_stream(a.orgs_a_users, a.turns_per_user, a.seed, prefix="a")
    b_convs = _conversations(make_stream(2 * a.orgs_samples + 1, a.turns_per_user, a.seed + 1, prefix="b"))
    a_trigger = _conversations(make_stream(1, a.turns_per_user, a.seed + 2, prefix="a-trigger"))[0]
    service = Service(ws, llm, REFLEXIO_API_KEYS_FILE=str(keys_file))
    ledger_a, ledger_b = Ledger(), Ledger()
    alone, during, overlap = [], [], []
    a_result: dict[str, Any] = {}
    try:
        warm = b_convs.pop(0)  # the first learning run of a process pays its imports and model load: not counted
        publish(service.url, warm, ledger_b, wait=True, headers=headers["org-b"], timeout=a.max_run_s)
        for _ in range(a.orgs_samples):
            began = time.monotonic()
            publish(service.url, b_convs.pop(0), ledger_b, wait=True, headers=headers["org-b"], timeout=a.max_run_s)
            alone.append(time.monotonic() - began)
        publish(service.url, a_stream.publishes, ledger_a, headers=headers["org-a"])
        # A run holds back the incomplete windows of sessions still active: let A's sessions go quiet, so that
        # A's own wait_for_response publish below learns every A user in one large pass.
        time.sleep(a.orgs_quiet_s)
        llm.stub.reset()

        def a_pass() -> None:
            began = time.monotonic()
            publish(service.url, a_trigger, ledger_a, wait=True, headers=headers["org-a"], timeout=a.max_run_s)
            a_result["wall_s"] = round(time.monotonic() - began, 2)

        a_thread = threading.Thread(target=a_pass, name="org-a-pass", daemon=True)
        a_started = time.monotonic()
        a_thread.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and a_thread.is_alive() and llm.stub.stats()["calls"] == 0:
            time.sleep(0.2)  # A's run has begun once it calls the LLM
        while a_thread.is_alive() and b_convs and len(during) < a.orgs_samples:
            began = time.monotonic()
            publish(service.url, b_convs.pop(0), ledger_b, wait=True, headers=headers["org-b"], timeout=a.max_run_s)
            during.append(time.monotonic() - began)
            overlap.append(a_thread.is_alive())  # A still running when B's answer came back
        a_thread.join(timeout=a.max_run_s)
        a_result.setdefault("wall_s", round(time.monotonic() - a_started, 2))
        a_result["finished"] = not a_thread.is_alive()
    finally:
        service.close()
    a_stats = llm.stub.stats()
    a_cov = coverage(ws, ledger_a, ws.lake / "orgs" / "org-a")
    out = {
        "delay_s": a.orgs_delay,
        "org_a": {
            "users": a.orgs_a_users,
            "turns": a_cov["turns_published"],
            "pass_wall_s": a_result.get("wall_s"),
            "pass_finished": a_result.get("finished"),
            "turns_learned": a_cov["turns_learned"],
            "stub_calls_during_pass": a_stats["calls"],
            "max_in_flight": a_stats["max_in_flight"],
        },
        "org_b": {
            "alone_s": [round(x, 2) for x in alone],
            "during_a_s": [round(x, 2) for x in during],
            "a_still_running_when_b_answered": overlap,
            "alone_median_s": round(statistics.median(alone), 2) if alone else None,
            "during_a_median_s": round(statistics.median(during), 2) if during else None,
        },
        "publish_errors": len(ledger_a.errors) + len(ledger_b.errors),
        "error_samples": (ledger_a.errors + ledger_b.errors)[:3],
    }
    out["ratio_during_over_alone"] = ratio(out["org_b"]["during_a_median_s"], out["org_b"]["alone_median_s"])
    run.report["phases"]["orgs"] = out
    table(
        f"5. org B's wait_for_response publish, alone vs while org A learns {a.orgs_a_users} users "
        f"({a.orgs_delay} s/call stub)",
        ["B publish", "samples", "median s", "all s"],
        [
            ["alone", len(alone), out["org_b"]["alone_median_s"], " ".join(f"{x:.1f}" for x in alone)],
            ["during A's pass", len(during), out["org_b"]["during_a_median_s"], " ".join(f"{x:.1f}" for x in during)],
        ],
        [20, 9, 10, 40],
    )
    print(
        f"   ratio during/alone {out['ratio_during_over_alone']}; A's pass {out['org_a']['pass_wall_s']} s, "
        f"{out['org_a']['turns_learned']}/{out['org_a']['turns']} A turns learned "
        f"({out['org_a']['stub_calls_during_pass']} calls incl. B's, max {out['org_a']['max_in_flight']} in flight)"
    )
    run.report["targets"]["orgs_isolation"] = {
        "target": f"B's wait_for_response publish during A's pass <= {TARGETS['orgs_ratio_max']}x its time alone",
        "measured": {"ratio": out["ratio_during_over_alone"], "b_samples_during_a": len(during)},
        "met": out["ratio_during_over_alone"] is not None
        and out["ratio_during_over_alone"] <= TARGETS["orgs_ratio_max"],
    }
    return out


def _conversations(stream: Stream) -> list[list[Publish]]:
    """Each user's whole conversation as ONE publish (a single wait_for_response run), in first-appearance order."""
    groups: dict[str, Publish] = {}
    for pub in stream.publishes:
        if pub.user_id in groups:
            groups[pub.user_id].body["interaction_data_list"].extend(pub.body["interaction_data_list"])
        else:
            groups[pub.user_id] = Publish(pub.user_id, json.loads(json.dumps(pub.body)))
    return [[pub] for pub in groups.values()]


# ---------------------------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------------------------


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--phase", default="all", help=f"comma-separated: {', '.join(PHASES)} or all")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--turns-per-user", type=int, default=6)
    p.add_argument("--concurrency", type=int, default=64, help="REFLEXIO_LLM_CONCURRENCY of the concurrent runs")
    p.add_argument("--rpm", type=int, help="REFLEXIO_LLM_RPM for every run (unset: the pipeline's default)")
    p.add_argument("--tpm", type=int, help="REFLEXIO_LLM_TPM for every run (unset: the pipeline's default)")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="extra env for every child")
    p.add_argument("--max-run-s", type=float, default=3600.0, help="bound on one materialize / wait_for_response")
    p.add_argument(
        "--settle-s",
        type=float,
        default=40.0,
        help="rounds: if turns are still unlearned after the last round, wait this long and materialize "
        "once more (counted); 0 = never",
    )
    g = p.add_argument_group("throughput")
    g.add_argument("--users", type=int, default=500)
    g.add_argument("--serial-users", type=int, default=50, help="serial baseline sample (0 = skip)")
    g.add_argument("--delays", type=_floats, default=[0.2, 1.0, 3.0], help="seconds per LLM call")
    g = p.add_argument_group("rounds")
    g.add_argument("--rounds-users", type=int, default=100)
    g.add_argument("--rounds", type=_ints, default=[4, 16], help="round counts besides 1 (always measured)")
    g.add_argument("--rounds-delay", type=float, default=0.2)
    g.add_argument(
        "--rounds-flush",
        choices=["due", "all"],
        default="due",
        help="materialize --flush of the multi-round runs: due = hold back incomplete windows of active "
        "sessions, as the sensor does; all = extract everything every round",
    )
    g.add_argument(
        "--per-publish-users",
        type=int,
        default=5,
        help="run-per-publish streams: one materialize process per publish, so kept small (0 = skip)",
    )
    g = p.add_argument_group("sensor")
    g.add_argument("--sensor-users", type=int, default=200)
    g.add_argument("--sensor-seconds", type=float, default=120.0, help="publishing spread evenly over this long")
    g.add_argument("--sensor-delay", type=float, default=1.0)
    g.add_argument("--baseline-delay", type=float, default=0.2, help="stub delay of one-pass baselines")
    g.add_argument("--drain-s", type=float, default=900.0, help="bound on waiting for the daemon after publishing")
    g = p.add_argument_group("latency")
    g.add_argument("--latency-rate", type=float, default=50.0, help="turns/s")
    g.add_argument("--latency-seconds", type=float, default=300.0)
    g.add_argument("--latency-delay", type=float, default=1.0)
    g.add_argument("--latency-drain-s", type=float, default=180.0, help="after publishing; then unfound = never")
    g.add_argument("--latency-extractors", default="builtin,builtin-rules,stub")
    g.add_argument("--poll-s", type=float, default=0.5)
    g = p.add_argument_group("orgs")
    g.add_argument("--orgs-a-users", type=int, default=100)
    g.add_argument("--orgs-samples", type=int, default=3)
    g.add_argument("--orgs-delay", type=float, default=1.0)
    g.add_argument(
        "--orgs-quiet-s",
        type=float,
        default=35.0,
        help="wait after A's publishes so its sessions are quiet (not held back) when its pass starts",
    )
    g = p.add_argument_group("shards")
    g.add_argument(
        "--shards-users",
        type=int,
        default=600,
        help="users of the window (a run's fixed start-up, ~8 s here, weighs less on a larger window)",
    )
    g.add_argument("--shards", type=_ints, default=[4], help="shard counts measured against 1 shard")
    g.add_argument(
        "--shards-concurrency",
        type=int,
        default=4,
        help="REFLEXIO_LLM_CONCURRENCY of every learning process (calls in flight per machine)",
    )
    g.add_argument("--shards-delay", type=float, default=1.0)
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.add_argument("--workdir", help="keep lakes, Dagster homes and logs here (default: a temp dir, removed)")
    p.add_argument("--keep", action="store_true", help="keep the temp work dir")
    args = p.parse_args(argv)
    args.phases = list(PHASES) if args.phase == "all" else [x.strip() for x in args.phase.split(",") if x.strip()]
    unknown = set(args.phases) - set(PHASES)
    if unknown:
        p.error(f"unknown phase(s): {', '.join(sorted(unknown))}")
    args.latency_extractors = [x.strip() for x in args.latency_extractors.split(",") if x.strip()]
    unknown = set(args.latency_extractors) - {"builtin", "builtin-rules", "stub"}
    if unknown:
        raise SystemExit(f"--latency-extractors: unknown {sorted(unknown)} (builtin, builtin-rules, stub)")
    return args


# ---------------------------------------------------------------------------------------------------------------
# Phase 6: one window fanned out over shards
# ---------------------------------------------------------------------------------------------------------------


def phase_shards(run: Run) -> dict:
    """One window learned in one materialize pass with REFLEXIO_LEARNING_SHARDS=1 and with each of `--shards`
    (the multiprocess executor, a process per shard), at the same calls in flight per learning process: what
    fanning a window out over processes (or machines, each with its own workers) buys when the LLM bounds it."""
    a = run.args
    stream = make_stream(a.shards_users, a.turns_per_user, a.seed)
    out: dict[str, Any] = {
        "users": a.shards_users,
        "turns": stream.turns,
        "delay_s": a.shards_delay,
        "concurrency_per_process": a.shards_concurrency,
        "by_shards": {},
    }
    for count in (1, *a.shards):
        llm = run.llm(a.shards_delay, a.shards_concurrency)
        row = one_pass(run, f"shards-{count}", stream, llm, env={"REFLEXIO_LEARNING_SHARDS": str(count)})
        out["by_shards"][str(count)] = row
        run.report["phases"]["shards"] = out
        run.save()
    base = out["by_shards"]["1"]
    rows = []
    for count, row in out["by_shards"].items():
        row["speedup_extract_run"] = ratio(base["extract_run_s"], row["extract_run_s"])
        row["speedup_materialize"] = ratio(base["materialize_s"], row["materialize_s"])
        rows.append(
            [
                count,
                row["turns_learned"],
                row["materialize_s"],
                row["extract_run_s"],
                row["stub"]["calls"],
                row["stub"]["max_in_flight"],
                row["speedup_extract_run"],
                row["speedup_materialize"],
            ]
        )
    table(
        f"6. one window on shards ({a.shards_users} users, {a.shards_delay} s/call, REFLEXIO_LLM_CONCURRENCY="
        f"{a.shards_concurrency} per process, multiprocess executor)",
        ["shards", "learned", "total s", "run s", "calls", "in flight", "x run", "x total"],
        rows,
        [8, 9, 9, 9, 8, 10, 8, 8],
    )
    four = out["by_shards"].get("4")
    if four is not None:
        run.report["targets"]["shards_4_vs_1"] = {
            "target": f"one window on 4 shards >= {TARGETS['shards_speedup_min']}x faster than on 1 (1 s LLM)",
            "measured": {
                "speedup_extract_run": four["speedup_extract_run"],
                "speedup_materialize": four["speedup_materialize"],
                "turns_learned": [base["turns_learned"], four["turns_learned"]],
            },
            "met": (four["speedup_extract_run"] or 0) >= TARGETS["shards_speedup_min"]
            and four["turns_learned"] == base["turns_learned"] == stream.turns,
        }
    return out


RUNNERS = {
    "throughput": phase_throughput,
    "rounds": phase_rounds,
    "sensor": phase_sensor,
    "latency": phase_latency,
    "orgs": phase_orgs,
    "shards": phase_shards,
}


def main(argv: Sequence[str] | None = None) -> dict:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_serve-stub"]:
        sp = argparse.ArgumentParser()
        sp.add_argument("--port", type=int, required=True)
        sp.add_argument("--delay", type=float, default=0.0)
        sa = sp.parse_args(argv[1:])
        serve_stub(sa.port, sa.delay)
        return {}
    args = parse_args(argv)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started with SIGINT ignored (`cmd &`)
    run = Run(args)
    began = time.monotonic()
    print(f"learning_throughput: phases {', '.join(args.phases)}; work dir {run.workdir}")
    print("NOTE: " + NOTES[0])
    try:
        for phase in args.phases:
            started = time.monotonic()
            print(f"\n== {phase} ==", flush=True)
            RUNNERS[phase](run)
            run.report["runtime_s"][phase] = round(time.monotonic() - started, 1)
            run.save()
    finally:
        run.report["runtime_s"]["total"] = round(time.monotonic() - began, 1)
        run.save()
        run.close()
    print("\ntargets (issue 14; shards_4_vs_1: issue 15):")
    for name, t in run.report["targets"].items():
        size = "" if t.get("at_issue_size", True) else " (below the issue's size: not a verdict)"
        print(f"  {name:<28} {'met' if t['met'] else 'NOT met':<8} {t['measured']}  [{t['target']}]{size}")
    print(f"wrote {args.out} in {run.report['runtime_s']['total']} s")
    return run.report


if __name__ == "__main__":
    main()
