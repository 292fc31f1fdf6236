"""Helpers every benchmark shares: a free loopback port, nearest-rank percentiles, memory of a process (RSS),
starting and stopping a child process, and writing the JSON result."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"


def free_port(host: str = HOST) -> int:
    """A TCP port nothing listens on right now (the OS picks it; a child binds it shortly after)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def percentile(values: Sequence[float], q: float, digits: int | None = 3) -> float | None:
    """The nearest-rank percentile `q` (a fraction: 0.95 is p95; p95 of 5 runs is the slowest), rounded to `digits`
    (None: unrounded); None for no values. Nearest rank, not interpolation: every reported value was measured."""
    if not values:
        return None
    ordered = sorted(values)
    value = ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]
    return value if digits is None else round(value, digits)


def status_kib(field: str, pid: int | str = "self") -> int | None:
    """A memory field of /proc/<pid>/status (VmRSS, VmHWM, RssAnon, RssFile) in KiB; None if the process is gone or
    the field is absent (not Linux)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def rss_mb(pid: int | str = "self") -> float | None:
    """The resident set size (VmRSS) of a process in MB, one decimal; None if unknown."""
    kib = status_kib("VmRSS", pid)
    return None if kib is None else round(kib / 1024, 1)


def peak_rss_mb() -> float | None:
    """The peak resident set size of this process in MB (getrusage's ru_maxrss, KiB on Linux); None off POSIX."""
    try:
        import resource
    except ImportError:  # not on this platform
        return None
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def http_ok(url: str) -> Callable[[], bool]:
    """A readiness probe for `start_process`: GET `url` answers 200."""
    import httpx

    def probe() -> bool:
        try:
            return httpx.get(url, timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    return probe


def start_process(cmd: Sequence[str], env: dict[str, str], ready: Callable[[], bool], timeout: float = 60.0,
                  what: str = "") -> subprocess.Popen:
    """Start `cmd` in its own session and return once `ready()` is true. Raises with the tail of its stderr if it
    exits first or is not ready within `timeout` seconds (then it is stopped). stderr goes to a temporary file, not
    a pipe: a pipe nobody reads blocks a chatty child once it fills."""
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(list(cmd), env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=log)
    name = what or " ".join(cmd[:3])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited: {_tail(log)}")
        if ready():
            return proc
        time.sleep(0.1)
    stop_process(proc)
    raise RuntimeError(f"{name} did not become ready within {timeout} s: {_tail(log)}")


def _tail(log: Any, limit: int = 2000) -> str:
    log.seek(0)
    return log.read().decode(errors="replace")[-limit:]


def stop_process(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if the process has not exited within `timeout` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)


def child_env(**extra: str) -> dict[str, str]:
    """This environment plus `extra`, with the repository importable in the child."""
    return dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]), **extra)


def write_result(path: Path | str, report: dict[str, Any]) -> Path:
    """Write a benchmark's report as indented JSON (creating the directory); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n")
    return path
