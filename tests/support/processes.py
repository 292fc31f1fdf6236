"""Start the real service (`python -m serving`) as a child process on 127.0.0.1 for end-to-end tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from reflexio_pipelines.devtools.servers import free_port
from tests.support.dagster_home import make_dagster_home


def child_env(lake: Path, dagster_home: Path, **extra: str) -> dict[str, str]:
    """This environment with the lake, `$DAGSTER_HOME` and `extra` set and the repository importable in the child."""
    env = dict(os.environ, REFLEXIO_LAKE=str(lake), DAGSTER_HOME=str(dagster_home), **extra)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    return env


def start_service(lake: Path, dagster_home: Path, port: int, log: Path) -> subprocess.Popen:
    """`python -m serving --no-daemon` on 127.0.0.1:port (these tests launch their runs themselves); returns once
    /health answers (or raises with the log)."""
    make_dagster_home(dagster_home)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "serving",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--lake",
                str(lake),
                "--log-level",
                "warning",
                "--no-daemon",
            ],
            env=child_env(lake, dagster_home),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"service exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"service did not answer: {log.read_text()[-2000:]}")


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    """Send `sig` to the child's process group (it leads one) and wait for it."""
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
        proc.wait(timeout=30)


@contextmanager
def running_service(lake: Path, dagster_home: Path, log: Path) -> Iterator[str]:
    """`start_service` on a free port for the duration of the context; yields its base URL."""
    port = free_port()
    proc = start_service(lake, dagster_home, port, log)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)
