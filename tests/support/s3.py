"""A real local S3-compatible server for tests: moto in server mode, as a child process on 127.0.0.1.

Server mode (rather than moto's in-process `mock_aws`) because the code under test talks to S3 from places an
in-process patch of botocore does not reach: delta-rs and object_store speak HTTP from Rust, and s3fs uses aiobotocore.
Over a real socket every client is exercised exactly as against a remote bucket.

    with moto_s3() as server:
        server.make_bucket("lake")
        s3_env(monkeypatch, server)  # what the library reads: AWS_ENDPOINT_URL, credentials, region
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.processes import free_port

ACCESS_KEY = "testing"
SECRET_KEY = "testing"
REGION = "us-east-1"


@dataclass(frozen=True)
class S3Server:
    """A running moto server: its endpoint and a few conveniences over a boto3 client bound to it."""

    endpoint_url: str

    def client(self) -> Any:
        """A boto3 S3 client for this server, with explicit credentials (independent of the environment)."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def make_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def list_keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every object key under `prefix`, sorted (paginated, so large listings are complete)."""
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(obj["Key"] for page in pages for obj in page.get("Contents", []))

    def read(self, bucket: str, key: str) -> bytes:
        return self.client().get_object(Bucket=bucket, Key=key)["Body"].read()

    def download_all(self, bucket: str, dest: Path) -> list[Path]:
        """Copy every object of the bucket to `dest/<key>`, so tools that walk a local tree can scan the bucket.

        Keys ending in "/" are directory markers some clients write; they hold no data and are skipped.
        Returns the local paths written.
        """
        client = self.client()
        written = []
        for key in self.list_keys(bucket):
            if key.endswith("/"):
                continue
            path = dest / key
            path.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(bucket, key, str(path))
            written.append(path)
        return written


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code < 500
    except httpx.HTTPError:
        return False


def _start(port: int, log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _wait_ready(proc: subprocess.Popen, url: str, timeout_s: float) -> bool:
    """True once the server answers HTTP; False if it exits first (e.g. its port was taken) or never answers."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if _answers(url):
            return True
        time.sleep(0.1)
    return False


def _stop(proc: subprocess.Popen, timeout_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `timeout_s`; always reaps the child."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout_s)


@contextmanager
def moto_s3(*, startup_timeout: float = 30.0, attempts: int = 3) -> Iterator[S3Server]:
    """Run `python -m moto.server` on 127.0.0.1:<free port> for the duration of the block.

    The port is chosen before the child binds it, so another process can take it in between; the child then
    exits, and we retry on a new port (up to `attempts` times). Raises RuntimeError with the server's log tail
    if it never answers. The child is stopped (terminate, then kill) on exit, also when the block raises.
    """
    with tempfile.TemporaryDirectory(prefix="moto-") as tmp:
        log = Path(tmp) / "moto.log"
        for _ in range(attempts):
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            proc = _start(port, log)
            try:
                if not _wait_ready(proc, url, startup_timeout):
                    continue
                yield S3Server(endpoint_url=url)
                return
            finally:
                _stop(proc)
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise RuntimeError(f"moto server did not answer on 127.0.0.1 after {attempts} attempts: {tail}")


def s3_env(monkeypatch: pytest.MonkeyPatch, server: S3Server) -> None:
    """Point the standard AWS environment variables (the only S3 configuration the library reads) at `server`.

    Variables that could make a client pick up real credentials instead (a profile, a session token) are removed.
    """
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    values = {
        "AWS_ENDPOINT_URL": server.endpoint_url,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ALLOW_HTTP": "true",  # object_store (delta-rs) refuses plain http endpoints without it
        "AWS_EC2_METADATA_DISABLED": "true",  # never wait on an instance-metadata lookup on a dev machine
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
