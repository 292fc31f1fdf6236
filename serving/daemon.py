"""The Dagster daemon as a child of the service: `python -m serving` alone runs the whole loop.

Learning and indexing are the daemon's sensors (reflexio_pipelines/sensors.py) launching runs; without a daemon,
published turns land but are never learned (only `wait_for_response` learns in the request). So the service starts
`dagster-daemon run` for the project's code location in its own process group, with the same environment
(REFLEXIO_LAKE, and DAGSTER_HOME: `./.dagster_home` unless set, as the Makefile uses), and stops the whole group when
it exits. Where the daemon is its own container (deploy/: compose, Helm) the service runs with `--no-daemon` or
REFLEXIO_DAEMON=off. A daemon that dies is logged as an error and restarted with backoff, so one crash does not stop
learning until the next deploy, and a daemon that cannot start at all does not take the API down with it.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)

#: Seconds to wait after SIGTERM for the daemon's group (daemon, its code server, run workers) before SIGKILL.
STOP_GRACE_S = 15.0
#: Restart backoff after a crash: doubles from the first to the last; a daemon that ran longer than the last
#: counts as healthy and the next crash starts again from the first.
BACKOFF_S = (1.0, 60.0)


def daemon_wanted(no_daemon_flag: bool) -> bool:
    """Whether this service starts its own daemon: not with `--no-daemon`, nor with REFLEXIO_DAEMON=off/0/false/no."""
    env = os.environ.get("REFLEXIO_DAEMON", "").strip().lower()
    return not no_daemon_flag and env not in {"off", "0", "false", "no"}


def daemon_argv() -> list[str]:
    """`dagster-daemon run` for the installed code location (the module workspace.yaml names), from this venv."""
    program = Path(sys.executable).with_name("dagster-daemon")
    command = str(program) if program.exists() else (shutil.which("dagster-daemon") or "dagster-daemon")
    return [command, "run", "-m", "reflexio_pipelines.definitions"]


class DaemonChild:
    """`start()` launches the daemon and a supervising thread that restarts it; `stop()` ends both and waits."""

    def __init__(self, argv: list[str] | None = None) -> None:
        self._argv = argv or daemon_argv()
        self._proc: subprocess.Popen | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> int:
        """Start the daemon (DAGSTER_HOME prepared first); returns its pid."""
        from reflexio_pipelines.runs import ensure_dagster_home

        home = ensure_dagster_home()  # sets DAGSTER_HOME in this process, so the child inherits it
        self._spawn()
        log.info("dagster daemon started (pid %s, DAGSTER_HOME=%s): sensors and schedules run here", self.pid, home)
        self._thread = threading.Thread(target=self._supervise, name="dagster-daemon", daemon=True)
        self._thread.start()
        return self.pid or 0

    def stop(self) -> None:
        """Terminate the daemon's process group and wait for it (SIGKILL after `STOP_GRACE_S`)."""
        self._stopping.set()
        with self._lock:
            proc = self._proc
        if proc is not None and proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                log.warning(
                    "dagster daemon (pid %s) still running %.0f s after SIGTERM: killing it", proc.pid, STOP_GRACE_S
                )
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
            _signal_group(proc, signal.SIGKILL)  # its code server or a run worker that outlived it
        if self._thread is not None:
            self._thread.join(timeout=5)
        log.info("dagster daemon stopped")

    def _spawn(self) -> None:
        with self._lock:
            if self._stopping.is_set():
                return
            # Own session: a stop reaches the daemon's children too (its code server, run workers), and a Ctrl-C in
            # the terminal reaches only the service, which then stops the daemon in order.
            self._proc = subprocess.Popen(self._argv, env=dict(os.environ), preexec_fn=_own_session_dying_with_parent)

    def _supervise(self) -> None:
        delay = BACKOFF_S[0]
        while not self._stopping.is_set():
            proc = self._proc
            if proc is None:
                return
            started = time.monotonic()
            code = proc.wait()
            if self._stopping.is_set():
                return
            if time.monotonic() - started > BACKOFF_S[1]:
                delay = BACKOFF_S[0]
            log.error(
                "dagster daemon (pid %s) exited with code %s: published turns are not learned until it runs again; "
                "restarting in %.0f s",
                proc.pid,
                code,
                delay,
            )
            if self._stopping.wait(delay):
                return
            delay = min(delay * 2, BACKOFF_S[1])
            try:
                self._spawn()
                log.error("dagster daemon restarted (pid %s)", self.pid)
            except OSError:
                log.exception("dagster daemon could not be restarted")


def _own_session_dying_with_parent() -> None:
    """In the child before exec: a session of its own, and SIGTERM when the service dies without stopping it (a
    SIGKILL or OOM kill), so no daemon outlives its service and keeps launching runs (Linux; elsewhere only the
    session)."""
    os.setsid()
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _signal_group(proc: subprocess.Popen, sig: signal.Signals) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:  # already gone
        pass
