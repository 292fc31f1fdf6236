"""Readiness probe for one reflexio service replica (compose healthcheck, Kubernetes exec readinessProbe).

    python deploy/readiness.py [URL]      # default http://127.0.0.1:8081; the lake from $REFLEXIO_LAKE / reflexio.yaml

Ready (exit 0) when the replica answers and serves an index version, or when the lake has no published version
yet (then searches answer "no index published yet" and publishes must be accepted, or nothing could ever be
learned). Not ready (exit 1, reason on stderr) while the lake names a CURRENT version that the replica has not
loaded: a replica that just started, or one that could not load the index, gets no search traffic. A replica that
still serves the previous version for one poll interval after a publish stays ready: it answers from a complete
version.
"""

from __future__ import annotations

import sys

import httpx

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.search.versions import current_version
from reflexio_pipelines.settings import load_settings


def not_ready_reason(url: str, lake: Lake) -> str | None:
    """Why the replica at `url` is not ready, or None when it is."""
    try:
        reply = httpx.get(f"{url.rstrip('/')}/health", timeout=2)
    except httpx.HTTPError as exc:
        return f"{url} does not answer: {type(exc).__name__}"
    if reply.status_code != 200:
        return f"{url}/health answered HTTP {reply.status_code}"
    published = current_version(lake.index_root)
    if published is not None and reply.json().get("index_version") is None:
        return f"index version {published} is published but not loaded"
    return None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    url = args[0] if args else "http://127.0.0.1:8081"
    reason = not_ready_reason(url, Lake.at(load_settings().lake))
    if reason:
        print(f"not ready: {reason}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
