"""Helpers the benchmarks share: a free loopback port, nearest-rank percentiles, memory of a process (RSS), a
`$DAGSTER_HOME`, starting a child process and waiting until it answers, stopping it, and writing the JSON result.

Benchmarks import it as `benchmarks._common` (they run as modules, `python -m benchmarks.<name>`, from the
repository root); nothing here imports the test suite.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from reflexio_pipelines.devtools.servers import free_port  # noqa: F401  (re-exported for the benchmarks)

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parents[1]
#: A `dagster.yaml` with telemetry off: nothing a benchmark runs reports to Dagster's servers.
TELEMETRY_OFF = "telemetry:\n  enabled: false\n"


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


def status_mb(field: str, pid: int | str = "self") -> float | None:
    """`status_kib` in MB (unrounded); None if unknown."""
    kib = status_kib(field, pid)
    return None if kib is None else kib / 1024


def rss_mb(pid: int | str = "self") -> float | None:
    """The resident set size (VmRSS) of a process in MB, one decimal; None if unknown."""
    mb = status_mb("VmRSS", pid)
    return None if mb is None else round(mb, 1)


def peak_rss_mb() -> float | None:
    """The peak resident set size of this process in MB (getrusage's ru_maxrss, KiB on Linux); None off POSIX."""
    try:
        import resource
    except ImportError:  # not on this platform
        return None
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def make_dagster_home(home: Path, config: str = TELEMETRY_OFF) -> Path:
    """Create `home` (and its parents) holding `config` as its dagster.yaml; returns `home`."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(config)
    return home


def child_env(**extra: str) -> dict[str, str]:
    """This environment plus `extra`, with the repository importable in the child."""
    return dict(os.environ, PYTHONPATH=str(ROOT), **extra)


def http_ok(url: str, timeout: float = 1.0) -> Callable[[], bool]:
    """A readiness probe for `wait_ready` / `start_process`: GET `url` answers 200 (not answering is not ready)."""
    import httpx

    def probe() -> bool:
        try:
            return httpx.get(url, timeout=timeout).status_code == 200
        except httpx.HTTPError:
            return False

    return probe


def wait_ready(
    proc: subprocess.Popen, ready: Callable[[], bool], timeout: float, what: str, output: Callable[[], str] = lambda: ""
) -> None:
    """Return once `ready()` is true. Raises RuntimeError with `output()` (the tail of the child's log) if `proc`
    exits first or `timeout` seconds pass; the caller stops it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited ({proc.returncode}): {output()}")
        if ready():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not become ready within {timeout:.0f} s: {output()}")


def service_cmd(lake: Path, port: int, *, daemon: bool, host: str = HOST) -> list[str]:
    """`python -m serving` on `host:port` over `lake`, warnings only. `daemon=False` (`--no-daemon`) where the
    benchmark runs the learning it measures itself, or times a lake built beforehand: a daemon beside it would race
    it for the same windows or rebuild indexes while searches are timed."""
    cmd = [sys.executable, "-m", "serving", "--host", host, "--port", str(port), "--lake", str(lake)]
    return [*cmd, "--log-level", "warning", *([] if daemon else ["--no-daemon"])]


def start_process(
    cmd: Sequence[str], env: dict[str, str], ready: Callable[[], bool], timeout: float = 60.0, what: str = ""
) -> subprocess.Popen:
    """Start `cmd` in its own session (its own process group) and return once `ready()` is true; if it exits first
    or is not ready within `timeout` seconds, stop it and raise with the tail of its stderr. stderr goes to a
    temporary file, not a pipe: a pipe nobody reads blocks a chatty child once it fills."""
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(list(cmd), env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=log)
    try:
        wait_ready(proc, ready, timeout, what or " ".join(cmd[:3]), lambda: _tail(log))
    except BaseException:
        stop_process(proc)
        raise
    return proc


def _tail(log: IO[bytes], limit: int = 2000) -> str:
    log.seek(0)
    return log.read().decode(errors="replace")[-limit:]


def stop_process(proc: subprocess.Popen, timeout: float = 10.0, group: bool = False) -> None:
    """SIGTERM (to its whole process group if `group`: a child started by `start_process` leads one), then SIGKILL
    if it has not exited within `timeout` seconds."""
    if proc.poll() is not None:
        return
    _signal(proc, signal.SIGTERM, group)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _signal(proc, signal.SIGKILL, group)
        proc.wait(timeout=timeout)


def _signal(proc: subprocess.Popen, sig: int, group: bool) -> None:
    try:
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
    except ProcessLookupError:  # exited in the meantime
        pass


def write_result(path: Path | str, report: dict[str, Any]) -> Path:
    """Write a benchmark's report as indented JSON (creating the directory); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n")
    return path
