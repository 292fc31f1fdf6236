"""Run an ASGI app on a real 127.0.0.1 socket in a background thread, for tests and benchmarks that need real
HTTP.

    with serve_app(app) as base_url:
        httpx.get(f"{base_url}/health")
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the OS picks it; a child process binds it shortly after)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _bound_socket() -> socket.socket:
    """A listening-ready socket on a free loopback port.

    Binding here and handing the socket to uvicorn (rather than picking a port number and letting uvicorn bind
    it later) leaves no window in which another process can take the port.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.set_inheritable(True)
    return sock


def _wait_accepting(host: str, port: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.02)
    return False


@contextmanager
def serve_app(
    app: Any, *, startup_timeout: float = 15.0, shutdown_timeout: float = 10.0, keep_alive_s: float = 5.0
) -> Iterator[str]:
    """Serve `app` with uvicorn on 127.0.0.1:<free port> in a daemon thread; yield its base URL (no trailing /).

    Waits until the server has started and accepts connections; on exit asks it to stop gracefully, forcing the
    exit if it does not stop within `shutdown_timeout`. Raises RuntimeError if the server fails to start.
    """
    sock = _bound_socket()
    port = sock.getsockname()[1]
    # keep_alive_s: how long an idle keep-alive connection stays open (uvicorn's default 5 s). A client that reuses a
    # pooled connection just as the server closes it gets a connection reset; servers that stand in for providers
    # (which keep connections open far longer) raise it so a slow machine does not hit that race.
    # log_config=None: uvicorn's default dictConfig clears every existing handler under logging's module lock, and
    # a thread of an earlier test still logging through a Dagster handler holds that handler's lock while it waits
    # for the module lock: the two deadlock (seen once in CI, a 600 s timeout).
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="auto", timeout_keep_alive=keep_alive_s, log_config=None
    )
    server = uvicorn.Server(config)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as exc:  # surfaced to the caller below instead of dying silently in the thread
            errors.append(exc)

    thread = threading.Thread(target=run, name=f"uvicorn-127.0.0.1:{port}", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + startup_timeout
        while not server.started:
            if errors or not thread.is_alive():
                cause = repr(errors[0]) if errors else "server thread exited"
                raise RuntimeError(f"uvicorn failed to start ({cause}); see the uvicorn log for the app's error")
            if time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not start within {startup_timeout} s")
            time.sleep(0.02)
        if not _wait_accepting("127.0.0.1", port, deadline):
            raise RuntimeError(f"uvicorn started but 127.0.0.1:{port} does not accept connections")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=shutdown_timeout)
        if thread.is_alive():
            server.force_exit = True  # drop lingering keep-alive connections / stuck requests
            thread.join(timeout=shutdown_timeout)
        sock.close()
