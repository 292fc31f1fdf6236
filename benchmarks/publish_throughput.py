"""Publish throughput with durable acknowledgements, over real HTTP (uvicorn on 127.0.0.1).

Runs the service twice in one invocation on fresh lakes: with group commit (the default) and with group commit
disabled (`REFLEXIO_LANDING_MAX_BATCH_ROWS=1`, one fsync per publish: the baseline). Every acknowledged publish is
on disk (fsync'd) before its 200. Prints p50/p95 latency and turns/s per concurrency level and the ratio against
the baseline, and writes JSON to benchmarks/results/publish_throughput.json.

    .venv/bin/python -m benchmarks.publish_throughput [--clients 1,8,32] [--seconds 5] [--turns 4]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks._common import (
    ROOT,
    child_env,
    percentile,
    start_service,
    stop_process,
)


def start_ingest_service(lake: Path, max_batch_rows: int) -> tuple[subprocess.Popen, str]:
    """`python -m serving` on a free port over `lake` (its own process group); returns once /health answers."""
    env = child_env(
        REFLEXIO_LAKE=str(lake),
        REFLEXIO_LANDING_MAX_BATCH_ROWS=str(max_batch_rows),
        DAGSTER_HOME=str(lake.parent / "dagster_home"),
    )
    # daemon=False: the ingest path alone (learning beside it: learning_throughput.py)
    return start_service(lake, env, daemon=False)


def stop_ingest_service(proc: subprocess.Popen) -> None:
    """Stop a service `start_ingest_service` started (its whole process group)."""
    stop_process(proc, timeout=30, group=True)


def publish_body(client: int, seq: int, turns: int) -> dict:
    return {
        "user_id": f"bench-{client % 50}",
        "interaction_data_list": [
            {
                "role": "user" if t % 2 == 0 else "assistant",
                "content": f"publish {seq} turn {t}: " + "lorem ipsum " * 20,
            }
            for t in range(turns)
        ],
    }


def _client_process(url: str, clients: int, seconds: float, turns: int, offset: int, out) -> None:
    """One load-generating process: `clients` concurrent publishers on one asyncio loop (aiohttp, keep-alive)."""
    import asyncio

    import aiohttp

    async def publisher(session: aiohttp.ClientSession, c: int, stop_at: float, latencies: list[float]) -> None:
        seq = 0
        while time.monotonic() < stop_at:
            started = time.perf_counter()
            async with session.post(f"{url}/api/publish_interaction", json=publish_body(c, seq, turns)) as reply:
                await reply.read()
                if reply.status != 200:
                    raise RuntimeError(f"publish failed: HTTP {reply.status}")
            latencies.append(time.perf_counter() - started)
            seq += 1

    async def main() -> list[float]:
        latencies: list[float] = []
        stop_at = time.monotonic() + seconds
        connector = aiohttp.TCPConnector(limit=clients)
        async with aiohttp.ClientSession(connector=connector) as session:
            await asyncio.gather(*(publisher(session, offset + c, stop_at, latencies) for c in range(clients)))
        return latencies

    out.put(asyncio.run(main()))


def _run_level(url: str, clients: int, seconds: float, turns: int) -> dict:
    # Load comes from separate processes so the Python client does not share one GIL with itself; the server
    # still shares the machine's cores with them, so these numbers are a floor for a dedicated server.
    import multiprocessing as mp

    procs_n = 1 if clients == 1 else 2
    queue: mp.Queue = mp.Queue()
    shares = [clients // procs_n + (1 if i < clients % procs_n else 0) for i in range(procs_n)]
    began = time.monotonic()
    procs = [
        mp.Process(target=_client_process, args=(url, share, seconds, turns, i * 1000, queue))
        for i, share in enumerate(shares)
    ]
    for proc in procs:
        proc.start()
    latencies = [lat for _ in procs for lat in queue.get(timeout=seconds + 120)]
    for proc in procs:
        proc.join()
    elapsed = time.monotonic() - began
    ordered = sorted(latencies)
    return {
        "clients": clients,
        "publishes": len(ordered),
        "turns_per_s": round(len(ordered) * turns / elapsed, 1),
        "publishes_per_s": round(len(ordered) / elapsed, 1),
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p95_ms": round(percentile(ordered, 0.95, digits=None) * 1000, 2),
    }


def _landing_files(lake: Path) -> int:
    return sum(1 for p in (lake / "landing").rglob("*.parquet") if not p.name.startswith(".tmp-"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "publish_throughput.json"))
    args = parser.parse_args()
    levels = [int(c) for c in args.clients.split(",")]
    results: dict[str, list[dict]] = {}
    for mode, max_batch_rows in (("group_commit", 50_000), ("fsync_per_publish_baseline", 1)):
        with tempfile.TemporaryDirectory() as tmp:
            lake = Path(tmp) / "lake"
            proc, url = start_ingest_service(lake, max_batch_rows)
            try:
                results[mode] = []
                for clients in levels:
                    files_before = _landing_files(lake)
                    row = _run_level(url, clients, args.seconds, args.turns)
                    row["landing_files"] = _landing_files(lake) - files_before
                    results[mode].append(row)
                    print(
                        f"{mode:<28} clients={clients:<3} {row['turns_per_s']:>9} turns/s  "
                        f"p50 {row['p50_ms']:>7} ms  p95 {row['p95_ms']:>7} ms  files {row['landing_files']}"
                    )
            finally:
                stop_ingest_service(proc)
    ratios = {
        str(g["clients"]): round(g["turns_per_s"] / b["turns_per_s"], 2)
        for g, b in zip(results["group_commit"], results["fsync_per_publish_baseline"])
    }
    print("throughput ratio group_commit / baseline by clients:", ratios)
    out = {
        "benchmark": "publish_throughput",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "params": {"clients": levels, "seconds": args.seconds, "turns_per_publish": args.turns},
        "results": results,
        "ratio_vs_baseline": ratios,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
