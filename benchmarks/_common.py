"""The harness the benchmarks share: a free loopback port, nearest-rank percentiles, memory of a process (RSS), a
`$DAGSTER_HOME` and the Dagster instance in it, a hermetic offline environment for children, starting a child
process (the service, the daemon) and waiting until it answers, stopping it (with its process group and every
descendant), and writing the JSON result.

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
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any

from reflexio_pipelines.devtools.servers import free_port  # noqa: F401  (re-exported for the benchmarks)

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parents[1]
#: A `dagster.yaml` with telemetry off: nothing a benchmark runs reports to Dagster's servers.
TELEMETRY_OFF = "telemetry:\n  enabled: false\n"
#: Offline switches for every child: LiteLLM's bundled cost map, no model downloads, no onnxruntime telemetry.
OFFLINE_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "ORT_DISABLE_TELEMETRY": "1"}


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


class open_instance:
    """The Dagster instance at a `$DAGSTER_HOME`, read from this process (runs, steps, materialisation metadata)."""

    def __init__(self, home: Path) -> None:
        from dagster import DagsterInstance
        from dagster._core.instance import InstanceRef

        self.instance = DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))

    def __enter__(self):
        return self.instance

    def __exit__(self, *exc: object) -> None:
        self.instance.dispose()


def child_env(**extra: str) -> dict[str, str]:
    """This environment plus `extra`, with the repository importable in the child."""
    return dict(os.environ, PYTHONPATH=str(ROOT), **extra)


def hermetic_env(**extra: str) -> dict[str, str]:
    """This environment without any REFLEXIO_* setting (a caller's setting must not leak into a measurement), with
    the offline switches (`OFFLINE_ENV`) and the repository first on PYTHONPATH, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REFLEXIO_")}
    env.update(OFFLINE_ENV)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


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


def daemon_cmd() -> list[str]:
    """`dagster-daemon run` over the repository's workspace.yaml (the code location reads REFLEXIO_LAKE at import);
    `python -m dagster._daemon` where the venv has no `dagster-daemon` script."""
    exe = Path(sys.executable).with_name("dagster-daemon")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "dagster._daemon"]
    return [*cmd, "run", "-w", str(ROOT / "workspace.yaml")]


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


def start_service(
    lake: Path, env: dict[str, str], *, daemon: bool, timeout: float = 60.0, what: str = "the service"
) -> tuple[subprocess.Popen, str]:
    """`service_cmd` on a free loopback port over `lake`, started by `start_process` (its own process group: stop it
    with `stop_process(..., group=True)`); returns (the process, its base URL) once /health answers."""
    port = free_port()
    url = f"http://{HOST}:{port}"
    return start_process(service_cmd(lake, port, daemon=daemon), env, http_ok(f"{url}/health"), timeout, what), url


def _tail(log: IO[bytes], limit: int = 2000) -> str:
    log.seek(0)
    return log.read().decode(errors="replace")[-limit:]


def log_tail(path: Path, chars: int = 3000) -> str:
    """The last `chars` characters of a child's log file, for an error message."""
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


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


def _descendants(pid: int) -> list[int]:
    """Every descendant of `pid` (from /proc; empty where /proc is missing)."""
    parents: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents[ppid].append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _signal_pids(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


class Processes:
    """Long-lived children logging to files (the stub, the service, the daemon, materialize), each in its own
    session. `stop` ends a child's process group and every descendant (the daemon's code server and run workers
    included), SIGTERM first, SIGKILL after `grace` seconds; `stop_all` stops whatever is still running."""

    def __init__(self) -> None:
        self._live: list[subprocess.Popen] = []
        self._lock = threading.Lock()

    def start(self, cmd: Sequence[str], env: dict[str, str], log: Path, cwd: Path = ROOT) -> subprocess.Popen:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                list(cmd),
                env=env,
                cwd=cwd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        with self._lock:
            self._live.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen, grace: float = 20.0) -> None:
        descendants = _descendants(proc.pid)
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        _signal_pids(descendants, signal.SIGTERM)  # children that left the group (own sessions) too
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in descendants):
            time.sleep(0.1)
        leftovers = [p for p in descendants if Path(f"/proc/{p}").exists()]
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _signal_pids(leftovers, signal.SIGKILL)
        if proc.poll() is None:
            proc.wait(timeout=10)
        with self._lock:
            if proc in self._live:
                self._live.remove(proc)

    def stop_all(self) -> None:
        with self._lock:
            live = list(reversed(self._live))
        for proc in live:
            self.stop(proc, grace=10.0)


#: This process's `Processes` (one registry, so an exit path can stop every child a benchmark started).
PROCS = Processes()


def write_result(path: Path | str, report: dict[str, Any]) -> Path:
    """Write a benchmark's report as indented JSON (creating the directory); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n")
    return path
