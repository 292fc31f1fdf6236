"""The live half of `benchmarks/interaction_search.py` (`--through-api`, `--steady-rate`): `python -m serving` alone
(with its own Dagster daemon, the documented "service alone" deployment) on a fresh temporary lake and
`$DAGSTER_HOME`, driven only through its HTTP API as the original client drives it.

- `through_api`: every session of benchmarks/interaction_corpus.py published as one `POST /api/publish_interaction`
  (no `wait_for_response`, `created_at` per turn in unix seconds as the client sends it: the session's date), a
  fixed wait after publishing ends (what the lake holds then: landing files the served index version has not taken
  in, publishes learned), then every question through `POST /api/search_interactions` (user_id, query, top_k=10):
  recall@1/5/10 per category and per-call latency, beside plain BM25 over the same turns in the same run.
- `steady`: publishes at a steady turn rate (the corpus of benchmarks/learning_throughput.py, 2-4 turns a publish)
  without `wait_for_response`; per publish the time until the version `/health` names holds its turns (its landing
  file's ingest instant at or below that version's turn watermark: answered from the precomputed index, not the
  landing-file fallback) and, for a sample, until `GET /api/learning_status` says `done`.

The benchmark reads the lake only to learn what the API does not say: a publish's ingest instant (its landing
file) and a served version's turn watermark (its manifest).
"""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq

from benchmarks._common import (
    ROOT,
    hermetic_env,
    make_dagster_home,
    percentile,
    start_service,
)
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.learning.types import stable_int_id
from reflexio_pipelines.pending import landing_files_after, landing_ingested_us
from reflexio_pipelines.search.turns import rank_texts
from reflexio_pipelines.search.versions import TURNS_WATERMARK, version_watermark

BLANK = dict.fromkeys(
    ("shadow_content", "expert_content", "user_action_description", "interacted_image_url", "image_encoding"), ""
)


class Service:
    """`python -m serving` with its daemon child on a fresh lake and `$DAGSTER_HOME` under `work`."""

    def __init__(self, work: Path) -> None:
        self.lake_dir = work / "lake"
        home = make_dagster_home(work / "dagster_home")
        env = hermetic_env(REFLEXIO_LAKE=str(self.lake_dir), DAGSTER_HOME=str(home))
        # daemon=True: the daemon learns and indexes what is published
        self.proc, self.url = start_service(self.lake_dir, env, daemon=True, timeout=180, what="serving")
        self.http = httpx.Client(base_url=self.url, timeout=120)
        self.lake = Lake.at(str(self.lake_dir))
        self.calls: list[tuple[str, float]] = []  # (user id, seconds) per search, in order
        self.notes: Counter[str] = Counter()  # search answers' messages up to a colon, digits as "N"

    def close(self) -> None:
        """SIGTERM to the service alone (it stops its daemon itself), then its process group if it lingers."""
        self.http.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except Exception:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:  # the group is gone: nothing left over
            pass
        self.proc.wait(timeout=10)

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def publish(self, body: dict) -> str:
        reply = self.http.post("/api/publish_interaction", json=body)
        reply.raise_for_status()
        return reply.json()["request_id"]

    def search(self, user_id: str, query: str, top_k: int) -> list[int]:
        started = time.perf_counter()
        reply = self.http.post("/api/search_interactions", json={"user_id": user_id, "query": query, "top_k": top_k})
        self.calls.append((user_id, time.perf_counter() - started))
        reply.raise_for_status()
        answer = reply.json()
        for note in filter(None, answer.get("msg", "").split("; ")):
            self.notes[re.sub(r"\d+", "N", note.split(":")[0])] += 1
        return [v["interaction_id"] for v in answer["interactions"]]

    def learning_status(self, request_id: str) -> str:
        reply = self.http.get("/api/learning_status", params={"request_id": request_id})
        return reply.json().get("status", f"http {reply.status_code}") if reply.status_code == 200 else "unknown"

    def served_watermark(self) -> tuple[str | None, int]:
        """The index version `/health` names and its turn watermark (unix µs; 0 without a version)."""
        version = self.http.get("/health").json().get("index_version")
        if version is None:
            return None, 0
        manifest = json.loads((self.lake.index_root / version / "manifest.json").read_text())
        return version, version_watermark(manifest, TURNS_WATERMARK)


def code_state() -> dict[str, Any]:
    """The commit the service ran from and the files of the service's code changed in the working tree (a run picks
    up uncommitted edits)."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout

    changed = git("status", "--porcelain", "--", "serving", "reflexio_pipelines").splitlines()
    return {"commit": git("rev-parse", "--short", "HEAD").strip(), "uncommitted": [line[3:] for line in changed]}


def session_body(user_id: str, session_id: str, turns: list[tuple[str, str]], at: int) -> dict:
    """One session as the original client's `publish_interaction` sends it (`model_dump()` of its request: every
    field, blanks included), each turn `created_at` = `at` + 30 s per turn before it."""
    data = [
        {"created_at": at + 30 * i, "role": speaker, "content": text}
        | BLANK
        | {"user_action": "none", "tools_used": []}
        for i, (speaker, text) in enumerate(turns)
    ]
    return {
        "user_id": user_id,
        "interaction_data_list": data,
        "source": "benchmark",
        "agent_version": "",
        "session_id": session_id,
        "skip_aggregation": False,
        "force_extraction": False,
    }


def stats_ms(seconds: list[float]) -> dict[str, Any]:
    ms = sorted(s * 1000 for s in seconds)
    if not ms:
        return {"calls": 0}
    return {
        "p50_ms": round(statistics.median(ms), 1),
        "p95_ms": percentile(ms, 0.95, digits=1),
        "calls": len(ms),
    }


def unindexed(svc: Service) -> dict[str, Any]:
    """Landing files (and their turns) the version `/health` serves has not taken in: what searches answer from the
    landing-file fallback."""
    version, watermark = svc.served_watermark()
    files = landing_files_after(svc.lake, watermark)
    turns = sum(pq.ParquetFile(str(f)).metadata.num_rows for f in files)
    return {"index_version": version, "unindexed_files": len(files), "unindexed_turns": turns}


def through_api(conversations: list, work: Path, wait_s: float, evaluate: Callable) -> dict[str, Any]:
    """Publish the corpus through a live service, wait `wait_s`, then search every question through the API and
    with plain BM25 over the same turns. `evaluate` is interaction_search.evaluate (recall per category + latency)."""
    with Service(work) as svc:
        keys: dict[int, str] = {}
        texts: dict[str, list[tuple[int, str]]] = {c.user_id: [] for c in conversations}
        request_ids, publish_s = [], []
        started = time.perf_counter()
        for n in range(max(len(c.sessions) for c in conversations)):  # session by session, users interleaved
            for c in conversations:
                if n >= len(c.sessions):
                    continue
                session = c.sessions[n]
                body = session_body(c.user_id, f"{c.user_id}-s{n}", session, int(c.dates[n].timestamp()))
                t0 = time.perf_counter()
                request_id = svc.publish(body)
                publish_s.append(time.perf_counter() - t0)
                request_ids.append(request_id)
                for i, (_speaker, text) in enumerate(session):
                    interaction_id = stable_int_id(f"{request_id}:{i}")  # serving/routers/publish.py landing_rows
                    keys[interaction_id] = f"s{n}:t{i}"
                    texts[c.user_id].append((interaction_id, f"{text} "))  # content + empty action description
        published_s = time.perf_counter() - started
        time.sleep(wait_s)
        lake_then = unindexed(svc)
        statuses: dict[str, int] = {}
        for request_id in request_ids:
            status = svc.learning_status(request_id)
            statuses[status] = statuses.get(status, 0) + 1
        ours = evaluate(svc.search, conversations, keys)
        after = unindexed(svc)  # the index may have moved on while the questions ran
        notes = dict(svc.notes)
        first: dict[str, int] = {}  # user -> position of the user's first search
        for position, (user_id, _seconds) in enumerate(svc.calls):
            first.setdefault(user_id, position)
        # a user's first search pays what is loaded or embedded per user; the rest show the steady cost
        ours["first_search_per_user"] = stats_ms([svc.calls[i][1] for i in first.values()])
        ours["later_searches"] = stats_ms([s for i, (_u, s) in enumerate(svc.calls) if i not in first.values()])

    def plain(user_id: str, query: str, top_k: int) -> list[int]:
        rows = texts[user_id]
        return [rows[i][0] for i in rank_texts([t for _, t in rows], query, top_k)]

    return {
        "users": len(conversations),
        "turns": len(keys),
        "publishes": len(request_ids),
        "publish_seconds": round(published_s, 1),
        "publish_latency": stats_ms(publish_s),
        "wait_after_publishing_s": wait_s,
        "at_measurement": {**lake_then, "learning_status": statuses},
        "after_questions": after,
        "search_notes": notes,
        "ours": ours,
        "plain_bm25": evaluate(plain, conversations, keys),
        "code": code_state(),
    }


class _Tracker:
    """Per acknowledged publish: when it was sent, its ingest instant, when the served index first held it, and (for
    the sampled ones) when learning_status first said done. Polled by `poll` from one thread."""

    def __init__(self, svc: Service, sample_every: int) -> None:
        self.svc, self.sample_every = svc, sample_every
        self.lock = threading.Lock()
        self.sent: dict[str, float] = {}  # request id -> monotonic send time
        self.sampled: list[str] = []
        self.ingested: dict[str, int] = {}  # request id -> ingested_at_us (from its landing file)
        self.acked_us: dict[str, int] = {}  # request id -> wall clock at its acknowledgement (an upper bound)
        self.indexed: dict[str, float] = {}  # request id -> seconds from send until the served index held it
        self.learned: dict[str, float] = {}
        self.files_read: set[str] = set()
        self.versions: list[tuple[float, str | None, int]] = []

    def on_ack(self, index: int, sent_at: float, data: dict) -> None:
        with self.lock:
            self.sent[data["request_id"]] = sent_at
            self.acked_us[data["request_id"]] = time.time_ns() // 1000
            if index % self.sample_every == 0:
                self.sampled.append(data["request_id"])

    def _read_landing(self) -> None:
        for _date, _hour, hour_dir in self.svc.lake.landing_hours():
            for path in self.svc.lake.landing_files([hour_dir]):
                name = str(path)
                if name in self.files_read:
                    continue
                try:
                    table = pq.read_table(name, columns=["request_id"])
                except FileNotFoundError:  # removed before it was read: its publishes fall back to their ack time
                    continue
                self.files_read.add(name)
                at = landing_ingested_us(path.name)
                for request_id in set(table.column("request_id").to_pylist()):
                    self.ingested[request_id] = at

    def poll(self) -> None:
        version, watermark = self.svc.served_watermark()
        now = time.monotonic()
        if not self.versions or self.versions[-1][1] != version:
            self.versions.append((now, version, watermark))
        self._read_landing()
        with self.lock:
            sent = dict(self.sent)
            sampled = [r for r in self.sampled if r not in self.learned]
        for request_id, at in sent.items():
            ingested = self.ingested.get(request_id, self.acked_us[request_id])
            if request_id not in self.indexed and ingested <= watermark:
                self.indexed[request_id] = now - at
        for request_id in sampled:
            if self.svc.learning_status(request_id) == "done":
                self.learned[request_id] = time.monotonic() - sent[request_id]

    def done(self) -> bool:
        with self.lock:
            return len(self.indexed) == len(self.sent) and len(self.learned) == len(self.sampled)


def _percentiles(values: dict[str, float], total: int) -> dict[str, Any]:
    got = sorted(values.values())
    # not reached within the run: counted as later than anything measured (p95 is None if more than 5% missed)
    ranked = got + [float("inf")] * (total - len(got))
    p50, p95 = percentile(ranked, 0.5, digits=1), percentile(ranked, 0.95, digits=1)
    return {
        "p50_s": None if p50 == float("inf") else p50,
        "p95_s": None if p95 == float("inf") else p95,
        "max_s": round(got[-1], 1) if got else None,
        "reached": len(got),
        "of": total,
    }


def _follow(until: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not until() and time.monotonic() < deadline:
        time.sleep(1)


def first_publish(svc: Service, timeout_s: float) -> dict[str, Any]:
    """One 2-turn publish on the just-started service, followed until indexed and learned: the cold start (the
    daemon's start-up, its first sensor ticks, the first index version) that a steady load should not be charged."""
    tracker = _Tracker(svc, 1)
    body = {
        "user_id": "warm-up",
        "session_id": "warm-up-s0",
        "interaction_data_list": [
            {"role": "user", "content": "I prefer window seats on long flights."},
            {"role": "assistant", "content": "Noted: window seats on long flights."},
        ],
    }
    sent = time.monotonic()
    tracker.on_ack(0, sent, {"request_id": svc.publish(body)})
    _follow(lambda: tracker.poll() or tracker.done(), timeout_s)
    return {
        what: round(next(iter(got.values())), 1) if got else None
        for what, got in (("indexed_s", tracker.indexed), ("learned_s", tracker.learned))
    }


def steady(work: Path, rate: float, seconds: float, learned_sample: int, timeout_s: float) -> dict[str, Any]:
    """On a fresh service warmed by one publish (`first_publish`), publish `rate` turns/s for `seconds`, then
    follow every publish until the served index holds it (and `learned_sample` of them until learned) or
    `timeout_s` after publishing ends."""
    from benchmarks.learning_throughput import Ledger, make_stream, publish_steadily

    turns_needed = int(rate * seconds)
    stream = make_stream(max(10, turns_needed // 30), 30, 7, prefix="steady")
    publishes, total = [], 0
    for pub in stream.publishes:
        if total >= turns_needed:
            break
        publishes.append(pub)
        total += len(pub.body["interaction_data_list"])
    with Service(work) as svc:
        cold = first_publish(svc, 180)
        tracker = _Tracker(svc, max(1, len(publishes) // learned_sample))
        stop = threading.Event()

        def on_ack(index: int, data: dict) -> None:  # _post_publish's monotonic ack time and latency: its send time
            tracker.on_ack(index, data["acked_at"] - data["latency_s"], data)

        def poller() -> None:
            while not stop.is_set():
                try:
                    tracker.poll()
                except (httpx.HTTPError, OSError) as exc:  # a slow answer under load: the next poll looks again
                    print(f"poll skipped: {exc!r}", file=sys.stderr)
                time.sleep(0.5)

        thread = threading.Thread(target=poller, daemon=True)
        thread.start()
        ledger = Ledger()
        load = publish_steadily(svc.url, publishes, ledger, rate, on_ack=on_ack)
        ended = time.monotonic()
        _follow(tracker.done, timeout_s)
        stop.set()
        thread.join(timeout=60)
        final = unindexed(svc)
    return {
        "rate_turns_per_s": rate,
        "seconds": seconds,
        **load,
        "first_publish_from_cold": cold,
        "publishes": len(publishes),
        "publish_errors": len(ledger.errors),
        "publish_latency": stats_ms(ledger.latencies),
        "publish_to_indexed": _percentiles(tracker.indexed, len(tracker.sent)),
        "publish_to_learned": _percentiles(tracker.learned, len(tracker.sampled)),
        "index_versions_served": len(tracker.versions),
        "followed_for_s_after_publishing": round(time.monotonic() - ended, 1),
        "at_end": final,
        "code": code_state(),
    }
