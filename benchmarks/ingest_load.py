"""Sustained ingest load: several client processes publish turns for a bounded time against the real service.

The service (`python -m serving`, uvicorn on 127.0.0.1) is started as a child process on a fresh lake, once with
group commit (the default) and once with one fsync per publish (`REFLEXIO_LANDING_MAX_BATCH_ROWS=1`, the
baseline), under the same load: `--processes` client processes, each running `--concurrency` publishers on one
httpx.AsyncClient. Every 200 is a durable acknowledgement (the turns were fsync'd first); after each run the
landing files are counted and must hold exactly the acknowledged turns.

Reports sustained turns/s, p50/p95/p99 ack latency, errors, and the ratio against the baseline; writes JSON to
benchmarks/results/ingest_load.json (git-ignored).

    .venv/bin/python -m benchmarks.ingest_load [--seconds 20] [--processes 4] [--concurrency 8] [--turns 8]

The client processes share the machine with the server, so on a small machine the numbers are a floor for a
dedicated server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import platform
import tempfile
import time
from pathlib import Path

import httpx
import pyarrow.parquet as pq

from benchmarks._common import ROOT, percentile
from benchmarks.publish_throughput import (  # the payload and service start-up are shared
    publish_body,
    start_ingest_service,
    stop_ingest_service,
)

TARGET_TURNS_PER_S = 2000
#: Kept per run so a failure can be diagnosed without flooding the report.
MAX_ERROR_SAMPLES = 5


def _client_process(
    url: str, concurrency: int, start_at: float, seconds: float, turns: int, offset: int, out: mp.Queue
) -> None:
    """One load-generating process: `concurrency` publishers on one event loop, from `start_at` (wall clock,
    shared by all processes) for `seconds`. Puts (latencies of acknowledged publishes, errors, error samples,
    time of its last completion) on `out`."""

    async def publisher(client: httpx.AsyncClient, c: int, stop_at: float, state: dict) -> None:
        seq = 0
        while time.time() < stop_at:
            started = time.perf_counter()
            try:
                reply = await client.post("/api/publish_interaction", json=publish_body(c, seq, turns))
                ok = reply.status_code == 200 and reply.json().get("success") is True
                problem = None if ok else f"HTTP {reply.status_code}: {reply.text[:200]}"
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            if problem is None:
                state["latencies"].append(time.perf_counter() - started)
            else:
                state["errors"] += 1
                if len(state["samples"]) < MAX_ERROR_SAMPLES:
                    state["samples"].append(problem)
            seq += 1

    async def main() -> dict:
        state: dict = {"latencies": [], "errors": 0, "samples": []}
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
            await asyncio.sleep(max(0.0, start_at - time.time()))
            await asyncio.gather(
                *(publisher(client, offset + c, start_at + seconds, state) for c in range(concurrency))
            )
        state["ended_at"] = time.time()
        return state

    out.put(asyncio.run(main()))


def _percentile_ms(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of seconds, in milliseconds (0 when nothing was acknowledged)."""
    return round(percentile(ordered, q, digits=None) * 1000, 2) if ordered else 0.0


def _landing(lake: Path) -> tuple[int, int]:
    """(committed landing files, rows in them); temporary files are never counted."""
    files = [p for p in (lake / "landing").rglob("*.parquet") if not p.name.startswith(".tmp-")]
    return len(files), sum(pq.ParquetFile(p).metadata.num_rows for p in files)


def run_load(url: str, seconds: float, processes: int, concurrency: int, turns: int) -> dict:
    """Drive the service at `url`; returns throughput, latency percentiles and errors of this run."""
    queue: mp.Queue = mp.Queue()
    # Every process starts publishing at the same moment, after all of them have imported and connected.
    start_at = time.time() + 2.0
    procs = [
        mp.Process(target=_client_process, args=(url, concurrency, start_at, seconds, turns, i * 10_000, queue))
        for i in range(processes)
    ]
    for proc in procs:
        proc.start()
    states = [queue.get(timeout=seconds + 180) for _ in procs]
    for proc in procs:
        proc.join()
    elapsed = max(s["ended_at"] for s in states) - start_at
    ordered = sorted(lat for s in states for lat in s["latencies"])
    return {
        "publishes": len(ordered),
        "acked_turns": len(ordered) * turns,
        "errors": sum(s["errors"] for s in states),
        "error_samples": [e for s in states for e in s["samples"]][:MAX_ERROR_SAMPLES],
        "elapsed_s": round(elapsed, 2),
        "turns_per_s": round(len(ordered) * turns / elapsed, 1),
        "publishes_per_s": round(len(ordered) / elapsed, 1),
        "p50_ms": _percentile_ms(ordered, 0.50),
        "p95_ms": _percentile_ms(ordered, 0.95),
        "p99_ms": _percentile_ms(ordered, 0.99),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=8, help="publishers per client process")
    parser.add_argument("--turns", type=int, default=8, help="turns per publish (a short conversation)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "ingest_load.json"))
    args = parser.parse_args(argv)
    results: dict[str, dict] = {}
    for mode, max_batch_rows in (("group_commit", 50_000), ("fsync_per_publish_baseline", 1)):
        with tempfile.TemporaryDirectory() as tmp:
            lake = Path(tmp) / "lake"
            proc, url = start_ingest_service(lake, max_batch_rows)
            try:
                row = run_load(url, args.seconds, args.processes, args.concurrency, args.turns)
            finally:
                stop_ingest_service(proc)
            row["landing_files"], row["landing_rows"] = _landing(lake)
            # Every acknowledged turn is on disk and nothing unacknowledged was counted: durable acks, no loss.
            row["lost_turns"] = row["acked_turns"] - row["landing_rows"]
            results[mode] = row
            print(
                f"{mode:<28} {row['turns_per_s']:>9} turns/s  p50 {row['p50_ms']:>7} ms  p95 {row['p95_ms']:>7} ms  "
                f"p99 {row['p99_ms']:>7} ms  errors {row['errors']}  files {row['landing_files']}  "
                f"lost {row['lost_turns']}"
            )
    baseline = results["fsync_per_publish_baseline"]["turns_per_s"]
    ratio = round(results["group_commit"]["turns_per_s"] / baseline, 2) if baseline else None
    ours = results["group_commit"]
    out = {
        "benchmark": "ingest_load",
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
        },
        "params": {
            "seconds": args.seconds,
            "processes": args.processes,
            "concurrency_per_process": args.concurrency,
            "turns_per_publish": args.turns,
        },
        "results": results,
        "ratio_vs_baseline": ratio,
        "target_turns_per_s": TARGET_TURNS_PER_S,
        "meets_target": ours["turns_per_s"] >= TARGET_TURNS_PER_S and ours["errors"] == 0 and ours["lost_turns"] == 0,
    }
    print(
        f"group commit / fsync-per-publish: {ratio}x; target {TARGET_TURNS_PER_S} turns/s with zero errors: "
        f"{'met' if out['meets_target'] else 'NOT met'}"
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(f"wrote {args.out}")
    return out


if __name__ == "__main__":
    main()
