"""One bad file stays one bad file: a corrupt landing file and a corrupt Delta data file are quarantined (moved aside,
kept, listed in the `quarantine` table, on /api/quarantine and the dashboard), and the organisation keeps serving
(real service on 127.0.0.1), learning (real Dagster runs) and erasing; the erasure deletes the quarantined files
(they cannot be shown not to hold the erased user's rows)."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import unquote

import httpx
import pyarrow as pa
import pytest

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.windows import key_of_moment
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.runs import launch
from reflexio_pipelines.settings import Settings
from reflexio_pipelines.storage import open_delta
from serving.app import create_app
from tests.support.conversations import conversation
from tests.support.landing import land
from tests.support.learned import correction_turns
from tests.support.servers import serve_app

pytestmark = pytest.mark.e2e

T0 = datetime(2026, 7, 6, 9, 0, tzinfo=timezone.utc)
T1 = T0 + timedelta(hours=1)
ZED = "zed-quarantine"


def _conversation(user: str, n: int, correction: str) -> dict:
    turns = [("user", "Deploy the api."), ("assistant", "Deploying to us-east-1."), ("user", correction)]
    return conversation(user, f"{user}-{n}", *turns, session=f"{user}-s{n}", agent_version="a1", source="chat")


@pytest.fixture()
def lake(tmp_path: Path, dagster_home: Path) -> Lake:
    """ann, bob and ZED learned in window T0 (a real Dagster run); the index served."""
    store = Lake.at(tmp_path / "lake")
    users = ("ann", "bob", ZED)
    land(store, [_conversation(u, 0, "No, never us-east-1: always deploy to us-west-2.") for u in users], at=T0)
    assert launch([key_of_moment(T0, GRANULARITY)], settings=Settings(lake=str(store.root))).success
    return store


def _corrupt_landing_file(lake: Lake, at: datetime) -> Path:
    """A landing file of ZED's cut in half (a torn copy, bit rot): its footer is gone."""
    (request_id,) = land(lake, [_conversation(ZED, 9, "My badge number is 4471.")], at=at)
    files = [Path(p) for p in lake.landing_files([h for _, _, h in lake.landing_hours()])]
    (path,) = [p for p in files if request_id.encode() in p.read_bytes()]
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def _corrupt_table_file(lake: Lake, table: str) -> Path:
    """One data file of the current version of Delta `table`, overwritten with bytes that are not Parquet."""
    root = lake.table_path(table)
    actions = pa.table(open_delta(root).get_add_actions(flatten=False))
    path = Path(root) / unquote(actions.column("path")[0].as_py())
    path.write_bytes(b"\x00" * 64)
    return path


def _reads_answer(url: str) -> None:
    """Every user's reads and exports answer 200 (ZED's too: the organisation is not down)."""
    with httpx.Client(base_url=url, timeout=120) as client:
        for method, path, body in [
            ("GET", "/api/get_all_interactions", None),
            ("POST", "/api/get_interactions", {"user_id": "ann"}),
            ("POST", "/api/get_requests", {"user_id": "bob"}),
            ("POST", "/api/get_profiles", {"user_id": "ann"}),
            ("POST", "/api/get_user_playbooks", {"user_id": "bob"}),
            ("POST", "/api/search", {"query": "which region to deploy to", "user_id": "ann", "threshold": 0.0}),
            ("POST", "/api/export_user_data", {"user_id": "bob"}),
            ("POST", "/api/export_user_data", {"user_id": ZED}),
        ]:
            reply = client.request(method, path, json=body)
            assert reply.status_code == 200, (path, reply.status_code, reply.text[:300])


def _learn_more(url: str) -> None:
    """A publish that waits for its learning run (a real Dagster run) is learned and indexed."""
    turns = correction_turns(
        "Deploy the web app.", "Deploying the web app to us-east-1.", "No, never us-east-1: always deploy to us-west-2."
    )
    body = {"user_id": "cat", "agent_version": "a1", "interaction_data_list": turns}
    reply = httpx.post(f"{url}/api/publish_interaction?wait_for_response=true", json=body, timeout=300)
    assert reply.status_code == 200 and reply.json()["learned"] is True, reply.text


def _erase(url: str, user_id: str) -> dict:
    reply = httpx.request("DELETE", f"{url}/api/erase_user_data", json={"user_id": user_id}, timeout=300)
    assert reply.status_code == 200, reply.text
    return reply.json()


def _listed(url: str) -> list[dict]:
    reply = httpx.get(f"{url}/api/quarantine", timeout=30)
    assert reply.status_code == 200, reply.text
    return reply.json()["files"]


def test_a_corrupt_landing_file_is_quarantined_and_the_organisation_goes_on(lake: Lake) -> None:
    corrupt = _corrupt_landing_file(lake, T1)
    torn = corrupt.read_bytes()
    relative = lake.relative(corrupt)
    # learning the file's window (a real Dagster run) meets it first: the run succeeds without it
    assert launch([key_of_moment(T1, GRANULARITY)], settings=Settings(lake=str(lake.root))).success
    kept = lake.root / "quarantine" / relative
    assert not corrupt.exists() and kept.read_bytes() == torn  # moved aside, byte for byte
    with serve_app(create_app(Settings(lake=str(lake.root)))) as url:
        (row,) = _listed(url)
        assert row["kind"] == "landing" and row["original_path"] == relative and row["status"] == "quarantined"
        assert row["sha256"] == hashlib.sha256(torn).hexdigest() and row["size_bytes"] == len(torn)
        assert "quarantine" in httpx.get(f"{url}/dashboard").text  # the dashboard's section
        _reads_answer(url)
        _learn_more(url)
        erased = _erase(url, ZED)
        assert erased["erased"]["quarantined_files"] == 1 and erased["erased"]["turns"] >= 3
        (row,) = _listed(url)
        assert row["status"] == "erased" and row["erased_at_us"]
        _reads_answer(url)
    assert not kept.exists()  # the erasure deleted it: it may have held ZED's turns (it did)
    assert not any(ZED.encode() in p.read_bytes() for p in Path(lake.root).rglob("*") if p.is_file())


def test_a_corrupt_landing_file_read_first_by_the_service_is_quarantined_too(lake: Lake) -> None:
    corrupt = _corrupt_landing_file(lake, T1)  # never learned from: the service reads it for every user's reads
    with serve_app(create_app(Settings(lake=str(lake.root)))) as url:
        _reads_answer(url)
        (row,) = _listed(url)
        assert row["original_path"] == lake.relative(corrupt) and not corrupt.exists()
        assert launch([key_of_moment(T1, GRANULARITY)], settings=Settings(lake=str(lake.root))).success


@pytest.mark.parametrize("table", ["user_playbooks", "turns"])
def test_a_corrupt_table_file_is_quarantined_and_the_organisation_goes_on(lake: Lake, table: str) -> None:
    corrupt = _corrupt_table_file(lake, table)
    relative = lake.relative(corrupt)
    with serve_app(create_app(Settings(lake=str(lake.root)))) as url:
        _reads_answer(url)
        (row,) = _listed(url)
        assert row["kind"] == "table" and row["table_name"] == table and row["original_path"] == relative
        assert (lake.root / "quarantine" / relative).read_bytes() == b"\x00" * 64 and not corrupt.exists()
        _learn_more(url)  # learning reads and rewrites the table
        erased = _erase(url, ZED)  # not a 503: the table is readable without the file
        assert erased["erased"]["quarantined_files"] == 1
        _reads_answer(url)
    assert lake.read_table(table).num_rows  # the other files' rows are still there
    assert ZED not in set(lake.read_table(table).column("user_id").to_pylist())
