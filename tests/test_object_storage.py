"""The whole loop with the lake root on object storage (`s3://bucket/lake`), against a real local S3 server.

moto runs in server mode on 127.0.0.1 (a child process this module starts); the service and the pipeline reach it
only through the standard AWS environment variables, exactly as they would reach a remote bucket. One test drives:

- ingest: the real service (uvicorn on 127.0.0.1) acknowledges publishes over HTTP; every acknowledged request is
  in a landing object `lake/landing/turns/date=…/hour=…/*.parquet` in the bucket;
- materialise and index: a real Dagster run for the publishes' window writes Delta tables (log and data objects),
  state and a new index version plus `CURRENT` into the bucket, readable back through `Lake.at("s3://…")` and the
  analysts' DuckDB views;
- serve: the running service picks up the version `CURRENT` names (copying it into `REFLEXIO_CACHE_DIR`, since
  tantivy and faiss need local files) and answers searches with what was learned;
- aggregate: shared agent playbooks are consolidated through the API; none of them carries the words only the
  to-be-erased user wrote (a service only they deploy, their employer), although they contributed;
- erase: one user is erased through the HTTP API; their searches come back empty while other users' are unchanged;
  then the playbooks are aggregated again and the user erased again (test_privacy's `erased_for_good`).

What is proven about where the bytes are: every object of the bucket is downloaded and scanned with test_privacy's
`leftovers` (raw bytes, decoded Parquet values and footer statistics, tantivy terms). Before the erasure the scan
finds the user's id and each of their distinctive words (so it can fail); after it, zero hits, and zero hits in the
cache directory, in the process's temp directory and (for the planted words) in `$DAGSTER_HOME`, after the
erasure, the re-aggregation and the second erasure alike. No lake ever appears on local disk: the working directory
stays empty and no landing, Delta table or data Parquet file exists outside the bucket (the only local Parquet
files are the cached index versions).
"""

from __future__ import annotations

import io
import os
import re
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest

from reflexio_pipelines.demo.run import publish_payload
from reflexio_pipelines.lake.duck import connect
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.windows import key_of_landing_hour, key_of_moment
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.pending import pending_windows
from reflexio_pipelines.runs import launch
from reflexio_pipelines.settings import Settings
from serving.app import create_app
from tests.support.s3 import S3Server, moto_s3, s3_env
from tests.support.servers import serve_app
from tests.test_privacy import (
    CONVERSATIONS,
    NEEDLES,
    PLANTED,
    ZED,
    ZED_WORDS,
    _erase,
    erased_for_good,
    leftovers,
    shared_reads,
)

pytestmark = pytest.mark.e2e

BUCKET = "reflexio-test-lake"
PREFIX = "lake"
URI = f"s3://{BUCKET}/{PREFIX}"
LANDING = re.compile(rf"^{PREFIX}/landing/turns/date=(\d{{4}}-\d\d-\d\d)/hour=(\d\d)/[^/]+\.parquet$")
#: What the other users taught (a query and a word of the user playbook it must find), served after the erasure.
OTHERS_TAUGHT = {
    "ann": ("which region to deploy to", "us-west-2"),
    "bob": ("which region to deploy to", "us-west-2"),
    "dan": ("commit message language", "English"),
}
#: Published after the run, so it lives only in a landing object when the user is erased.
LANDED_ONLY = {"user_id": ZED, "interaction_data_list": [{"role": "user", "content": "Wobbleton is my dog."}]}


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with moto_s3() as server:
        server.make_bucket(BUCKET)
        yield server


@pytest.fixture
def local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3: S3Server) -> dict[str, Path]:
    """Point the process at the bucket, and give it nothing local but a cache, a temp dir and an empty cwd.

    The cwd is a fresh empty directory, so a lake accidentally opened at a relative path (the default `./lake`, or
    an `s3://` URI mistaken for a local path) would show up in it. The temp dir is swapped too (in-process, via
    `tempfile.tempdir`), so local working copies the library leaves behind are scanned along with the cache.
    """
    dirs = {name: tmp_path / name for name in ("work", "cache", "tmp")}
    for path in dirs.values():
        path.mkdir()
    s3_env(monkeypatch, s3)
    monkeypatch.delenv("REFLEXIO_LAKE", raising=False)
    monkeypatch.setenv("REFLEXIO_CACHE_DIR", str(dirs["cache"]))
    monkeypatch.setattr(tempfile, "tempdir", str(dirs["tmp"]))
    monkeypatch.chdir(dirs["work"])
    return dirs


def _publish(api: str, body: dict) -> str:
    reply = httpx.post(f"{api}/api/publish_interaction", json=body, timeout=30)
    assert reply.status_code == 200 and reply.json()["success"], reply.text
    assert reply.json()["message"] == "stored"
    return reply.json()["request_id"]


def _search(api: str, query: str, user_id: str | None = None) -> dict:
    body = {"query": query, "threshold": 0.0, **({"user_id": user_id} if user_id else {})}
    reply = httpx.post(f"{api}/api/search", json=body, timeout=30)
    assert reply.status_code == 200, reply.text
    return reply.json()


def _wait_serving(api: str, version: str, timeout_s: float = 15.0) -> None:
    """Until /health reports `version` (the service polls CURRENT in the bucket and copies the version locally)."""
    deadline = time.monotonic() + timeout_s
    served = None
    while time.monotonic() < deadline:
        served = httpx.get(f"{api}/health", timeout=5).json().get("index_version")
        if served == version:
            return
        time.sleep(0.2)
    raise AssertionError(f"service still serves index {served!r} {timeout_s} s after CURRENT named {version!r}")


def _landing_rows(s3: S3Server) -> tuple[list[str], list[dict]]:
    """The landing object keys in the bucket and every row they hold."""
    keys = s3.list_keys(BUCKET, f"{PREFIX}/landing/")
    assert keys and all(LANDING.match(k) for k in keys), keys
    rows = [r for k in keys for r in pq.read_table(io.BytesIO(s3.read(BUCKET, k))).to_pylist()]
    return keys, rows


def _current(s3: S3Server) -> str:
    return s3.read(BUCKET, f"{PREFIX}/indexes/search/CURRENT").decode().strip()


def _scan_bucket(s3: S3Server, dest: Path) -> tuple[int, int, list[tuple[str, str]]]:
    """Download every object of the bucket to `dest` and scan it with test_privacy's `leftovers`."""
    written = s3.download_all(BUCKET, dest)
    files, scanned, hits = leftovers(dest, NEEDLES)
    assert files == len(written)
    return files, scanned, hits


def _local_lake_traces(root: Path) -> list[str]:
    """Paths under `root` that would mean lake data was kept on local disk: a lake or landing directory, a Delta
    table, a mangled `s3:` path, or any Parquet file that is not part of a cached index version."""
    traces = []
    for path in root.rglob("*"):
        rel = str(path.relative_to(root))
        if (path.is_dir() and path.name in {"lake", "landing", "tables", "_delta_log"}) or "s3:" in rel:
            traces.append(rel)
        elif path.suffix == ".parquet" and not (path.parent / "manifest.json").exists():
            traces.append(rel)
    return sorted(traces)


def test_whole_loop_on_s3_ingest_materialise_index_serve_erase(s3, instance, local, tmp_path, tmp_path_factory, capsys):
    # `instance` comes before `local`: the ephemeral instance's own temp dir is not the one scanned below.
    lake = Lake.at(URI)
    assert str(lake.root).startswith(f"s3://{BUCKET}/{PREFIX}") and str(lake.index_root).endswith("indexes/search")
    settings = Settings(lake=URI)
    others = sorted({c["user_id"] for c in CONVERSATIONS} - {ZED})
    assert others == sorted(OTHERS_TAUGHT)

    with serve_app(create_app(settings)) as api:
        # Ingest: every acknowledged publish is a landing object in the bucket.
        before = datetime.now(timezone.utc)
        acked = [_publish(api, publish_payload(conversation)) for conversation in CONVERSATIONS]
        after = datetime.now(timezone.utc)
        keys, rows = _landing_rows(s3)
        assert {r["request_id"] for r in rows} == set(acked)
        assert len(rows) == sum(len(c["interactions"]) for c in CONVERSATIONS)
        assert {r["user_id"] for r in rows} == {ZED, *others}

        # Materialise the publishes' window(s) (ingest time: the current UTC hour, or two across an hour boundary).
        windows = sorted({key_of_landing_hour(*LANDING.match(k).groups(), GRANULARITY) for k in keys})
        assert set(windows) <= {key_of_moment(before, GRANULARITY), key_of_moment(after, GRANULARITY)}
        assert [w.partition_key for w in pending_windows(lake, GRANULARITY)] == windows  # what the sensor sees
        result = launch(windows, settings=settings, instance=instance)
        assert pending_windows(lake, GRANULARITY) == []
        for table in ("turns", "user_profiles", "user_playbooks"):
            objects = s3.list_keys(BUCKET, f"{PREFIX}/tables/{table}/")
            assert any("/_delta_log/" in k and k.endswith(".json") for k in objects), (table, objects)
            assert any(k.endswith(".parquet") and "/_delta_log/" not in k for k in objects), (table, objects)
        assert s3.list_keys(BUCKET, f"{PREFIX}/state/")
        assert {ZED, "bob"} <= set(lake.read_table("user_profiles").column("user_id").to_pylist())
        assert {ZED, *others} <= set(lake.read_table("user_playbooks").column("user_id").to_pylist())
        # Analysts' DuckDB views read the same objects (Delta tables and landing files through pyarrow).
        con = connect(URI)
        assert con.execute("select count(*) from turns").fetchone()[0] == len(rows)
        assert con.execute("select count(distinct request_id) from landing_turns").fetchone()[0] == len(acked)
        version = _current(s3)
        assert result.index_version == version == (lake.index_root / "CURRENT").read_text().strip()
        assert {
            f"{PREFIX}/indexes/search/{version}/manifest.json",
            f"{PREFIX}/indexes/search/{version}/docs.parquet",
        } <= set(s3.list_keys(BUCKET, f"{PREFIX}/indexes/search/{version}/"))

        # Serve: the running service swaps to the version CURRENT names and finds what was learned.
        _wait_serving(api, version)
        hits = _search(api, "Quixotica cat", ZED)
        assert hits["index_version"] == version
        assert any("Quixotica" in p["content"] and p["user_id"] == ZED for p in hits["profiles"]), hits
        hits = _search(api, "which region to deploy to", ZED)
        assert any("us-west-2" in p["content"] and p["user_id"] == ZED for p in hits["user_playbooks"]), hits
        assert all(p["user_id"] == ZED for p in hits["profiles"] + hits["user_playbooks"])

        # A publish the pipeline has not materialised yet: it lives only in a landing object.
        _publish(api, LANDED_ONLY)
        assert len(_landing_rows(s3)[0]) > len(keys)

        # Aggregate: the shared rules ZED contributed to never carry ZED's own words.
        aggregated = httpx.post(f"{api}/api/run_playbook_aggregation", json={"agent_version": "ops-1"}, timeout=300)
        assert aggregated.status_code == 200 and aggregated.json()["success"], aggregated.text
        rules = lake.read_table("agent_playbooks").to_pylist()
        assert any(ZED in r["member_user_ids"] and "us-west-2" in r["content"] for r in rules), rules
        assert [w for w in PLANTED if w in shared_reads(api)] == []

        files, _, found = _scan_bucket(s3, tmp_path_factory.mktemp("bucket-before"))
        assert {n for _, n in found} == set(NEEDLES), "the scan must find the user in the bucket before erasure"
        assert ZED.lower() in {n for _, n in leftovers(local["cache"], NEEDLES)[2]}, "the cached index holds the user"

        def scan() -> list[tuple[str, str]]:
            """The bucket, the cache, the temp dir (the user's id and words) and $DAGSTER_HOME (their words)."""
            home = Path(os.environ["DAGSTER_HOME"])
            return (
                _scan_bucket(s3, tmp_path_factory.mktemp("bucket"))[2]
                + leftovers(local["cache"], NEEDLES)[2]
                + leftovers(local["tmp"], NEEDLES)[2]
                + leftovers(home, ZED_WORDS)[2]
            )

        # Erase through the HTTP API, aggregate again, erase again.
        erased = erased_for_good(api, scan, capsys)
        for table in ("turns", "landing", "user_profiles", "user_playbooks"):
            assert erased["erased"][table] > 0, (table, erased)
        _wait_serving(api, _current(s3))
        for query in ("Quixotica cat", "Zanzibarville", "which region to deploy to", "Wobbleton dog"):
            hits = _search(api, query, ZED)
            assert hits["profiles"] == [] and hits["user_playbooks"] == [], (query, hits)
        for user, (query, taught) in OTHERS_TAUGHT.items():  # everyone else is still served what they taught
            hits = _search(api, query, user)
            assert any(taught in p["content"] and p["user_id"] == user for p in hits["user_playbooks"]), (user, hits)
        assert any("CET" in p["content"] for p in _search(api, "timezone", "bob")["profiles"])
        assert _erase(api, ZED).json()["success"]  # the searches above, made as ZED, are new data about ZED

    # After the service stopped (its last retrieval-log flush included): nothing of the user anywhere.
    files, scanned, hits = _scan_bucket(s3, tmp_path_factory.mktemp("bucket-after"))
    cache_files, cache_bytes, cache_hits = leftovers(local["cache"], NEEDLES)
    tmp_files, tmp_bytes, tmp_hits = leftovers(local["tmp"], NEEDLES)
    with capsys.disabled():
        print(
            f"\ns3 erasure scan: {files} objects, {scanned} bytes in s3://{BUCKET}, {len(hits)} hits; "
            f"cache: {cache_files} files, {cache_bytes} bytes, {len(cache_hits)} hits; "
            f"temp: {tmp_files} files, {tmp_bytes} bytes, {len(tmp_hits)} hits"
        )
    assert hits == [] and cache_hits == [] and tmp_hits == []
    assert ZED not in set(lake.read_table("turns").column("user_id").to_pylist())
    assert set(others) <= set(lake.read_table("user_playbooks").column("user_id").to_pylist())
    versions = {k.split("/")[3] for k in s3.list_keys(BUCKET, f"{PREFIX}/indexes/search/") if k.count("/") > 3}
    assert _current(s3) in versions and min(versions) >= erased["index_version"], (
        "no index version built before the erasure (which indexed the user) may survive in the bucket"
    )

    # The lake only ever lived in the bucket (tmp_path holds the cwd, the cache, the temp dir and DAGSTER_HOME).
    assert list(local["work"].iterdir()) == []
    assert _local_lake_traces(tmp_path) == []


def _append_control_rows(writer: int, commits: int, cache_dir: str) -> None:
    """One "host": its own cache (so its own lock directory) appending `commits` rows, one Delta commit each."""
    import os

    import pyarrow as pa

    from reflexio_pipelines.lake.schemas import TABLES

    os.environ["REFLEXIO_CACHE_DIR"] = cache_dir
    lake = Lake.at(f"{URI}-race")
    for n in range(commits):
        row = {
            "seq": writer * 1000 + n,
            "at": n,
            "entity": "agent_playbook",
            "item_id": f"w{writer}-{n}",
            "action": "playbook_status",
            "value": "approved",
            "actor": f"host-{writer}",
        }
        lake.append("control_log", pa.Table.from_pylist([row], schema=TABLES["control_log"]))


def test_writers_on_different_hosts_never_lose_a_commit(s3, local):
    """Delta commits on the bucket are conditional writes: writers that share no lock (separate processes with
    separate lock directories, as on separate hosts) racing on one table keep every commit, each its own version
    (without conditional writes, two commits of one version number overwrite each other and rows are lost)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    writers, commits = 3, 6
    spawn = multiprocessing.get_context("spawn")  # delta-rs's runtime does not survive fork
    with ProcessPoolExecutor(writers, mp_context=spawn) as pool:
        futures = [
            pool.submit(_append_control_rows, w, commits, str(local["cache"] / f"host-{w}")) for w in range(writers)
        ]
        for future in futures:
            future.result(timeout=120)
    rows = Lake.at(f"{URI}-race").read_table("control_log").to_pylist()
    assert sorted(r["item_id"] for r in rows) == sorted(f"w{w}-{n}" for w in range(writers) for n in range(commits))
    assert Lake.at(f"{URI}-race").table_version("control_log") == writers * commits - 1  # one version per commit


def test_doctor_reports_whether_the_bucket_is_writable(s3, local):
    from reflexio_pipelines.cli.doctor import lake_check
    from reflexio_pipelines.storage import lake_path

    ok = lake_check(lake_path(URI))
    assert ok.ok, ok
    assert not [k for k in s3.list_keys(BUCKET) if ".doctor-" in k], "the probe object is removed again"
    missing = lake_check(lake_path("s3://no-such-bucket-here/lake"))
    assert not missing.ok and "no-such-bucket-here" in missing.detail


def test_each_organisation_gets_a_prefix_of_the_bucket(tmp_path):
    from serving.tenancy import Tenants

    keys = tmp_path / "keys.json"
    keys.write_text('{"keys": []}')
    tenants = Tenants(Settings(lake=URI, api_keys_file=str(keys)))
    assert str(tenants.lake_of("acme")) == f"{URI}/orgs/acme"
    assert str(Lake.at(str(tenants.lake_of("acme"))).index_root) == f"{URI}/orgs/acme/indexes/search"


def test_a_publish_the_bucket_did_not_store_is_not_acknowledged(s3, local):
    """While the bucket cannot take the landing object the publish gets a 503 (retry), never a false ack; once the
    bucket is there the same publish lands, once."""
    bucket = "reflexio-late-bucket"
    body = {"user_id": "ann", "interaction_data_list": [{"role": "user", "content": "I prefer metric units."}]}
    headers = {"Idempotency-Key": "late-bucket-1"}
    with serve_app(create_app(Settings(lake=f"s3://{bucket}/lake"))) as api:
        refused = httpx.post(f"{api}/api/publish_interaction", json=body, headers=headers, timeout=30)
        assert refused.status_code == 503 and refused.json()["success"] is False, refused.text
        s3.make_bucket(bucket)
        for _ in range(2):  # the retry, then a duplicate retry
            stored = httpx.post(f"{api}/api/publish_interaction", json=body, headers=headers, timeout=30)
            assert stored.status_code == 200 and stored.json()["success"], stored.text
    keys = s3.list_keys(bucket, "lake/landing/")
    rows = [r for k in keys for r in pq.read_table(io.BytesIO(s3.read(bucket, k))).to_pylist()]
    assert [r["content"] for r in rows] == ["I prefer metric units."]
