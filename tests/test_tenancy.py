"""Organisations: Bearer API keys (hashed at rest), physically separate lakes, no cross-organisation reads,
per-key rate limits. Over real uvicorn on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import dagster as dg
import httpx
import pytest

from reflexio_pipelines.demo.run import publish_payload
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.pending import pending_windows, unindexed_turn_files
from reflexio_pipelines.search.versions import turns_watermark
from reflexio_pipelines.settings import Settings
from serving.app import create_app
from serving.tenancy import KeyStore
from tests.support.servers import serve_app


@pytest.fixture
def keyed(tmp_path, instance):
    """A keyed service with two organisations (acme, and globex with a 3-per-minute search limit)."""
    keys_file = tmp_path / "keys.json"
    store = KeyStore(keys_file)
    acme, globex = store.create("acme"), store.create("globex", {"search": 3})
    lake = tmp_path / "lake"
    # The service learns nothing itself: tests evaluate the Dagster sensors and run what they request.
    settings = Settings(lake=str(lake), api_keys_file=str(keys_file))
    app = create_app(settings)
    with serve_app(app) as url:
        yield SimpleNamespace(
            url=url, keys_file=keys_file, acme=acme, globex=globex, lake=lake, app=app, instance=instance
        )


def _auth(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def test_keys_are_stored_hashed_and_required(keyed):
    url, keys_file, acme = keyed.url, keyed.keys_file, keyed.acme
    stored = keys_file.read_text()
    assert acme not in stored and acme.split(".", 1)[1] not in stored  # only the SHA-256 is at rest
    for path, body in (
        ("/api/search", {"query": "x"}),
        ("/api/get_profiles", {"user_id": "u"}),
        ("/api/publish_interaction", {"user_id": "u", "interaction_data_list": [{"content": "hi"}]}),
    ):
        for headers in ({}, _auth("rflx-nope.nope"), {"Authorization": acme}):  # no key, unknown key, not Bearer
            reply = httpx.post(url + path, json=body, headers=headers)
            assert reply.status_code == 401 and "Bearer" in reply.json()["message"]
    assert httpx.get(url + "/health").status_code == 200  # liveness stays open and names no organisation
    assert "index_version" not in httpx.get(url + "/health").json()
    who = httpx.get(url + "/api/whoami", headers=_auth(acme)).json()
    assert who["org_id"] == "acme"


def test_an_organisation_never_sees_another_organisations_data(keyed, samples):
    url, acme, globex, lake = keyed.url, keyed.acme, keyed.globex, keyed.lake
    for i, conversation in enumerate(samples):
        wait = "?wait_for_response=true" if i == len(samples) - 1 else ""
        reply = httpx.post(
            f"{url}/api/publish_interaction{wait}", json=publish_payload(conversation), headers=_auth(acme), timeout=300
        )
        assert reply.status_code == 200, reply.text
    query = {"query": "deploy region us-west-2", "user_id": "alice", "threshold": 0.0}
    mine = httpx.post(url + "/api/search", json=query, headers=_auth(acme)).json()
    assert any("us-west-2" in p["content"] for p in mine["user_playbooks"])

    theirs = httpx.post(url + "/api/search", json=query, headers=_auth(globex)).json()
    assert theirs["user_playbooks"] == [] and theirs["profiles"] == [] and theirs["agent_playbooks"] == []
    reads = [
        ("/api/get_profiles", {"user_id": "bob"}, "user_profiles"),
        ("/api/get_interactions", {"user_id": "alice"}, "interactions"),
        ("/api/get_user_playbooks", {"user_id": "alice"}, "user_playbooks"),
        ("/api/get_requests", {"user_id": "alice"}, "sessions"),
    ]
    for path, body, field in reads:
        assert httpx.post(url + path, json=body, headers=_auth(acme)).json()[field], path
        assert httpx.post(url + path, json=body, headers=_auth(globex)).json()[field] == [], path
    playbook = next(p for p in mine["user_playbooks"] if "us-west-2" in p["content"])
    update = {"user_playbook_id": playbook["user_playbook_id"], "content": "hijacked"}
    assert httpx.put(url + "/api/update_user_playbook", json=update, headers=_auth(globex)).status_code == 404
    request_id = httpx.post(url + "/api/get_interactions", json={"user_id": "alice"}, headers=_auth(acme)).json()[
        "interactions"
    ][0]["request_id"]
    gone = httpx.request("DELETE", url + "/api/delete_request", json={"request_id": request_id}, headers=_auth(globex))
    assert gone.status_code == 404
    assert httpx.post(url + "/api/get_requests", json={"request_id": request_id}, headers=_auth(acme)).json()[
        "sessions"
    ]

    # Physically separate: acme's words exist only under acme's directory.
    assert (lake / "orgs" / "acme" / "tables").is_dir()
    leaked = [
        p
        for p in (lake / "orgs").rglob("*")
        if p.is_file() and "acme" not in p.relative_to(lake / "orgs").parts[0] and b"us-west-2" in p.read_bytes()
    ]
    assert leaked == []


def _sensor_tick(instance: dg.DagsterInstance, lake: Path) -> dict[str, list[bool]]:
    """One tick of the daemon for `lake`: evaluate both sensors with a real instance and run every request they make
    for real (in-process, as the daemon's run launcher would in its own process); returns "org:job" -> successes."""
    from reflexio_pipelines.definitions import build_definitions
    from reflexio_pipelines.organisations import ORG_TAG
    from reflexio_pipelines.resources import LakeResource
    from reflexio_pipelines.sensors import interaction_index_sensor, landing_sensor

    defs = build_definitions(Settings(lake=str(lake)))
    ran: dict[str, list[bool]] = {}
    for sensor in (landing_sensor, interaction_index_sensor):
        context = dg.build_sensor_context(instance=instance, resources={"lake": LakeResource(root=str(lake))})
        for request in sensor(context).run_requests or []:
            result = defs.resolve_job_def(sensor.job_name).execute_in_process(
                run_config=request.run_config,
                partition_key=request.partition_key,
                tags=request.tags,
                instance=instance,
                raise_on_error=False,
            )
            ran.setdefault(f"{request.tags[ORG_TAG]}:{sensor.job_name}", []).append(result.success)
    return ran


def _profiles(url: str, key: str, user: str, timeout_s: float = 10) -> list[str]:
    """`user`'s profile contents, once the organisation's index watcher has picked up a new version (or `[]`)."""
    deadline = time.monotonic() + timeout_s
    while True:
        reply = httpx.post(url + "/api/get_profiles", json={"user_id": user}, headers=_auth(key)).json()
        found = [p["content"] for p in reply.get("user_profiles") or []]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def test_keyed_mode_learns_each_organisations_pending_windows(keyed, samples):
    url, acme, globex = keyed.url, keyed.acme, keyed.globex
    body = {
        "user_id": "zed",
        "interaction_data_list": [
            {"role": "user", "content": "I live in Oslo."},
            {"role": "assistant", "content": "Noted."},
        ],
    }
    assert httpx.post(url + "/api/publish_interaction", json=body, headers=_auth(globex)).status_code == 200
    # The landing sensor's learning run (its index build takes the turns in too, so no index_job is asked for).
    assert _sensor_tick(keyed.instance, keyed.lake) == {"globex:learn_job": [True]}
    assert _profiles(url, globex, "zed") == ["Lives in Oslo"]
    assert _sensor_tick(keyed.instance, keyed.lake) == {}  # nothing pending any more
    assert _profiles(url, acme, "zed", timeout_s=0) == []
    runs = keyed.instance.get_run_records(dg.RunsFilter(job_name="learn_job"))
    assert [r.dagster_run.tags.get("reflexio/org") for r in runs] == ["globex"]


def test_rate_limit_per_key_answers_429_with_retry_after(keyed):
    url, acme, globex = keyed.url, keyed.acme, keyed.globex
    codes = [httpx.post(url + "/api/search", json={"query": "x"}, headers=_auth(globex)).status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    limited = httpx.post(url + "/api/search", json={"query": "x"}, headers=_auth(globex))
    assert limited.status_code == 429 and int(limited.headers["Retry-After"]) >= 1
    assert "rate limit" in limited.json()["message"]
    # Another key is not affected.
    assert httpx.post(url + "/api/search", json={"query": "x"}, headers=_auth(acme)).status_code == 200


def test_key_cli_creates_lists_and_revokes(keyed):
    url, keys_file = keyed.url, keyed.keys_file
    env = {
        "REFLEXIO_API_KEYS_FILE": str(keys_file),
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
    }
    created = subprocess.run(
        [sys.executable, "-m", "serving", "keys", "create", "--org", "initech", "--limit", "publish=100"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    key = created.stdout.strip()
    assert key.startswith("rflx-") and key not in keys_file.read_text()
    assert httpx.get(url + "/api/whoami", headers=_auth(key)).json()["org_id"] == "initech"
    listed = subprocess.run(
        [sys.executable, "-m", "serving", "keys", "list"], env=env, capture_output=True, text=True, check=True
    ).stdout
    key_id = key[len("rflx-") :].split(".")[0]
    assert f"{key_id}\tinitech\tactive" in listed and key not in listed
    subprocess.run([sys.executable, "-m", "serving", "keys", "revoke", key_id], env=env, check=True)
    time.sleep(1.1)  # the service re-reads the keys file at most once a second
    assert httpx.get(url + "/api/whoami", headers=_auth(key)).status_code == 401
    for org in ("Bad Org!", "a\n", "acme\n"):  # a pattern ending in `$` matched "a\n" (before the newline)
        bad = subprocess.run(
            [sys.executable, "-m", "serving", "keys", "create", "--org", org], env=env, capture_output=True, text=True
        )
        assert bad.returncode != 0 and "org id" in bad.stderr, org
    assert json.loads(keys_file.read_text())["keys"][-1]["org_id"] == "initech"


def test_org_ids_are_validated_as_a_whole(tmp_path):
    """Every place an org id is checked uses a full match: a trailing newline (or anything after a valid prefix)
    is refused, and a directory with such a name is no organisation."""
    from reflexio_pipelines.organisations import is_org_id, org_lake, organisation_ids
    from serving.tenancy import KeyStore

    assert is_org_id("acme") and is_org_id("a") and is_org_id("org_2-b")
    for bad in ("a\n", "acme\n", "acme\nx", "", "Acme", "../x", "a" * 64):
        assert not is_org_id(bad), bad
        with pytest.raises(ValueError, match="org id"):
            org_lake(tmp_path, bad)
        with pytest.raises(ValueError, match="org id"):
            KeyStore(tmp_path / "keys.json").create(bad)
    (tmp_path / "orgs" / "acme").mkdir(parents=True)
    (tmp_path / "orgs" / "beta\n").mkdir()
    assert organisation_ids(tmp_path) == ["acme"]


def _corrupt(lake: Path, table: str) -> None:
    """Make one Delta table of a lake unreadable (its first commit is not JSON)."""
    log = lake / "tables" / table / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    (log / "00000000000000000000.json").write_text("{this is not a delta commit")


def test_a_failing_organisation_does_not_stop_the_others_from_learning(tmp_path, instance, caplog):
    """The daemon's sensors over three organisations: `aardvark`'s lake cannot be read (its pending windows cannot
    even be listed), `beta`'s runs fail every time, `zulu` is healthy. Sorted first, the failing ones must not hold
    zulu back: its publishes keep becoming searchable and indexed, tick after tick."""
    keys_file = tmp_path / "keys.json"
    store = KeyStore(keys_file)
    keys = {org: store.create(org) for org in ("aardvark", "beta", "zulu")}
    lake = tmp_path / "lake"
    app = create_app(Settings(lake=str(lake), api_keys_file=str(keys_file)))
    with serve_app(app) as url:
        for org in ("aardvark", "beta"):
            body = {"user_id": f"{org}-user", "interaction_data_list": [{"role": "user", "content": "I live in Rome."}]}
            assert httpx.post(url + "/api/publish_interaction", json=body, headers=_auth(keys[org])).status_code == 200
        _corrupt(lake / "orgs" / "aardvark", "extraction_failures")  # read to list pending windows
        _corrupt(lake / "orgs" / "beta", "user_profiles")  # read by every learning run, not by the listing
        with pytest.raises(Exception):  # noqa: B017  (the fault is real: whichever error the corrupt file raises)
            pending_windows(app.state.tenants.state("aardvark").lake, GRANULARITY)

        zulu = app.state.tenants.state("zulu").lake
        for user, city in (("zed", "Oslo"), ("yan", "Quito")):  # and again on a later tick: the fan-out keeps going
            body = {
                "user_id": user,
                "interaction_data_list": [
                    {"role": "user", "content": f"I live in {city}."},
                    {"role": "assistant", "content": "Noted."},
                ],
            }
            assert (
                httpx.post(url + "/api/publish_interaction", json=body, headers=_auth(keys["zulu"])).status_code == 200
            )
            ran = _sensor_tick(instance, lake)
            assert ran["zulu:learn_job"] == [True] and ran["beta:learn_job"] == [False], ran
            assert "aardvark:learn_job" not in ran, ran  # its windows cannot be listed (its turns still get indexed)
            assert _profiles(url, keys["zulu"], user) == [f"Lives in {city}"]
        assert not unindexed_turn_files(zulu) and turns_watermark(zulu.index_root) > 0  # its turns indexed too
        skipped = [r.getMessage() for r in caplog.records if "aardvark" in r.getMessage()]
        assert any("lake not readable" in m for m in skipped), skipped  # really tried, and logged under its org
        for org in ("aardvark", "beta"):  # nothing of theirs was learned
            assert _profiles(url, keys[org], f"{org}-user", timeout_s=0) == []
