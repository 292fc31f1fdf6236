"""Reads by other users side by side with erasures, against the real service (uvicorn on 127.0.0.1): 1,000 reads
that overlap an erasure, 0 errors.

An erasure deletes and rewrites landing files and Delta data files, purges table histories and republishes the
index while the service keeps answering everybody else. A read that listed a file the erasure then deleted starts
again from a fresh listing until the erasure has committed (`Lake.read_consistently`), and readers never open a
temporary `.tmp-*` file a writer has not renamed into place yet (`lake.io.committed`).
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.windows import key_of_moment
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.runs import launch
from reflexio_pipelines.settings import Settings
from serving.app import create_app
from tests.support.conversations import conversation
from tests.support.landing import land
from tests.support.servers import serve_app

pytestmark = pytest.mark.e2e

T0 = datetime(2026, 6, 1, 9, 0, tzinfo=timezone.utc)
READERS = ("ann", "bob", "cat")
ERASED = tuple(f"gone-{n}" for n in range(12))
WANTED_READS = 1000
THREADS = 12


def _conversation(user: str, n: int, text: str) -> dict:
    turns = [("user", "Deploy the api."), ("assistant", "Deploying to us-east-1."), ("user", text)]
    return conversation(user, f"{user}-{n}", *turns, session=f"{user}-s{n}", agent_version="a1", source="chat")


READS = [
    ("POST", "/api/get_interactions", {"user_id": "ann"}),
    ("GET", "/api/get_all_interactions", None),
    ("POST", "/api/get_requests", {"user_id": "bob"}),
    ("POST", "/api/get_profiles", {"user_id": "cat"}),
    ("POST", "/api/get_user_playbooks", {"user_id": "ann"}),
    ("POST", "/api/get_agent_playbooks", {}),
    ("POST", "/api/search", {"query": "which region to deploy to", "user_id": "bob", "threshold": 0.0}),
    ("POST", "/api/search_interactions", {"query": "deploy", "user_id": "cat"}),
    ("POST", "/api/export_user_data", {"user_id": "ann"}),
]


@pytest.fixture()
def lake(tmp_path: Path, dagster_home: Path) -> Lake:
    """Learned rows of every user and landing files of the erased users, one per publish: learned from (so an
    erasure deleting one rewrites the window's consumed-file list too) and not yet (read from the landing files)."""
    store = Lake.at(tmp_path / "lake")
    users = READERS + ERASED
    land(store, [_conversation(u, 0, "No, never us-east-1: always deploy to us-west-2.") for u in users], at=T0)
    for user in ERASED:
        for n in range(1, 3):
            land(store, [_conversation(user, n, f"My note number {n} for {user}.")], at=T0)
    assert launch([key_of_moment(T0, GRANULARITY)], settings=Settings(lake=str(store.root))).success
    for user in ERASED:
        land(store, [_conversation(user, 3, f"My last note for {user}.")], at=T0)
    return store


def test_a_thousand_reads_by_other_users_during_erasures_never_fail(lake: Lake) -> None:
    errors: list[str] = []
    erasing = threading.Event()
    stop = threading.Event()
    overlapped = 0
    count_lock = threading.Lock()

    def reader(offset: int, base_url: str) -> None:
        nonlocal overlapped
        with httpx.Client(base_url=base_url, timeout=120) as client:
            n = offset
            while not stop.is_set():
                method, path, body = READS[n % len(READS)]
                n += 1
                during = erasing.is_set()
                try:
                    reply = client.request(method, path, json=body)
                except httpx.HTTPError as exc:
                    errors.append(f"{path}: {type(exc).__name__}")
                    continue
                during = during or erasing.is_set()
                if reply.status_code != 200:
                    errors.append(f"{path}: {reply.status_code} {reply.text[:200]}")
                if during:
                    with count_lock:
                        overlapped += 1

    started = time.monotonic()
    erased: list[httpx.Response] = []
    with serve_app(create_app(Settings(lake=str(lake.root)))) as base_url:
        threads = [threading.Thread(target=reader, args=(i, base_url)) for i in range(THREADS)]
        for thread in threads:
            thread.start()
        try:
            for user in ERASED:  # one erasure after another until enough reads overlapped one
                erasing.set()
                try:
                    erased.append(
                        httpx.request("DELETE", f"{base_url}/api/erase_user_data", json={"user_id": user}, timeout=300)
                    )
                finally:
                    erasing.clear()
                if overlapped >= WANTED_READS:
                    break
        finally:
            stop.set()
            for thread in threads:
                thread.join()
    elapsed = time.monotonic() - started
    assert all(r.status_code == 200 and r.json()["erased"]["landing"] >= 3 for r in erased), [r.text for r in erased]
    assert overlapped >= WANTED_READS, f"only {overlapped} reads overlapped {len(erased)} erasures"
    assert errors == [], (len(errors), errors[:10])
    print(f"{overlapped} reads during {len(erased)} erasures in {elapsed:.1f} s, 0 errors")
