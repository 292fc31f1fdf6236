"""Per-user export and erasure over a lake with every table populated: real Dagster runs (learning, a rerun and an
upgrade, aggregation, evaluation), the service's retrieval log and approvals, landing files not yet materialised.

Words are planted in the erased user's turns, among them some that reach shared agent playbooks through their
playbooks (a service only they deploy, their employer in a question). The world's agent playbooks are consolidated
as before issue #19 (a member's wording copied), so they quote the user, as rules consolidated by an LLM that copied
a member, or approved before, may. After an erasure through the real HTTP API, after the next aggregation and after
a second erasure, every file under the lake (landing, tables and their Delta logs, state, index versions: base and
delta segments, turns included, issue #21) and under
`$DAGSTER_HOME` (run storage; previews on, the default) is scanned: raw bytes, decoded Parquet (rows and footer statistics) and
every term of every tantivy index; no trace of the user's id (in the lake) or of their planted words may remain.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import threading
import time
import zipfile
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import dagster as dg
import httpx
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from reflexio_pipelines.definitions import build_definitions
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.lake.windows import key_of_moment
from reflexio_pipelines.learning import aggregate
from reflexio_pipelines.learning.config import ExtractionConfig
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.pending import pending_windows
from reflexio_pipelines.privacy import erasure
from reflexio_pipelines.privacy.scope import AGGREGATE_TABLES, MissingErasureRule, check_rules
from reflexio_pipelines.runs import launch, run_aggregation, run_evaluation, run_operation
from reflexio_pipelines.settings import Settings
from serving.app import create_app
from tests.support.dagster_home import make_dagster_home
from tests.support.landing import land
from tests.support.servers import serve_app

pytestmark = pytest.mark.e2e

T0 = datetime(2026, 11, 3, 10, 0, tzinfo=timezone.utc)
ZED = "zed-erasable-7f3"
#: Words only ZED ever wrote that reach shared agent playbooks through ZED's playbooks: the service of ZED's region
#: correction (trigger and rationale), ZED's employer in a question the expert answered (a first-person fact).
PLANTED = ("flumpdoodle", "plonkworks")
#: Words only ZED ever wrote (casefolded, as the index stores them), and ZED's id itself.
ZED_WORDS = ("quixotica", "zanzibarville", "wobbleton", *PLANTED)
NEEDLES = (ZED.lower(), *ZED_WORDS)
POOL_ANSWER = "Size the pool at two connections per CPU core plus a few spare ones."


def _conversation(
    user: str, n: int, turns: list[tuple[str, str]], at: datetime, shadow: str | None = None, expert: str | None = None
) -> dict:
    created = int(at.timestamp()) + 100 * n  # a user's conversations one after the other, never interleaved
    interactions = [{"role": role, "content": text, "created_at": created + i} for i, (role, text) in enumerate(turns)]
    if shadow:
        interactions[1]["shadow_content"] = shadow
    if expert:
        interactions[1]["expert_content"] = expert
    return {
        "id": f"{user}-{n}",
        "user_id": user,
        "session_id": f"{user}-s{n}",
        "agent_version": "ops-1",
        "source": "test",
        "interactions": interactions,
    }


def _region(user: str, service: str) -> list[tuple[str, str]]:
    return [
        ("user", f"Please deploy the {service} service."),
        ("assistant", f"Deploying the {service} service to us-east-1."),
        ("user", "No — we never deploy to us-east-1, always use us-west-2."),
    ]


def _commits(text: str) -> list[tuple[str, str]]:
    return [
        ("user", "Write the commit message for this fix."),
        ("assistant", "Commit: arreglado el error de login."),
        ("user", text),
    ]


def _pool(question: str) -> list[tuple[str, str]]:
    return [("user", question), ("assistant", "Any pool size works."), ("user", "Thanks!")]


CONVERSATIONS = [
    _conversation(
        ZED,
        1,
        [
            ("user", "My cat is called Quixotica and I live in Zanzibarville."),
            ("assistant", "Noted, thanks for telling me."),
            ("user", "Thanks, perfect!"),
        ],
        T0,
    ),
    _conversation(ZED, 2, _region(ZED, "Flumpdoodle"), T0, shadow="Deploying to us-west-2 as always."),
    _conversation(ZED, 3, _commits("No, always write commit messages in English."), T0),
    _conversation(
        ZED,
        4,
        _pool("I am a staff engineer at Plonkworks, how should I size the database pool?"),
        T0,
        expert=POOL_ANSWER,
    ),
    _conversation("ann", 1, _region("ann", "billing"), T0),
    _conversation("ann", 2, _pool("How should I size the database pool?"), T0, expert=POOL_ANSWER),
    _conversation("bob", 1, _region("bob", "search"), T0),
    _conversation(
        "bob",
        2,
        [
            ("user", "My timezone is CET, so schedule reports for 8am my time."),
            ("assistant", "Got it: reports at 08:00 CET."),
            ("user", "Thanks!"),
        ],
        T0,
    ),
    _conversation("dan", 1, _commits("No — commit messages must always be in English."), T0),
]


def _settings(lake: Lake, tmp: Path) -> Settings:
    config = tmp / "extraction.json"
    # Two users make a shared rule here (the default is 3): this world needs rules two users share, to test erasure.
    playbooks = ExtractionConfig().user_playbook_extractor_configs[0].model_dump(exclude_none=True)
    playbooks["aggregation_config"] = {"min_distinct_users": 2}
    evaluation = [{"evaluation_name": "ops_success", "sampling_rate": 1.0}]
    config.write_text(json.dumps({"agent_success_configs": evaluation, "user_playbook_extractor_configs": [playbooks]}))
    # Previews on (the default): Dagster's run storage, scanned too, may then hold ids and text lengths, never words.
    return Settings(lake=str(lake.root), extraction_config=str(config), metadata_previews=True)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    """A lake with every table populated, built once; each test works on its own copy (lake and `$DAGSTER_HOME`)."""
    tmp = tmp_path_factory.mktemp("privacy-world")
    lake = Lake.at(tmp / "lake")
    settings = _settings(lake, tmp)
    with pytest.MonkeyPatch.context() as mp:
        home = make_dagster_home(tmp / "dagster_home")
        mp.setenv("DAGSTER_HOME", str(home))
        # Rules worded as before issue #19 (one member's wording copied, here always ZED's), which erasure must
        # re-word: what a rule consolidated earlier, approved as worded, or copied by an LLM can still say.
        mp.setattr(aggregate, "shared_rule", lambda rule, members: rule)
        mp.setattr(aggregate, "representative", lambda members, vectors: min(members, key=lambda m: m.user_id != ZED))
        with dg.DagsterInstance.get() as instance:  # runs recorded on disk, in the $DAGSTER_HOME that is scanned
            land(lake, CONVERSATIONS, at=T0)  # one group commit: landing files mixing several users
            launch([key_of_moment(T0, GRANULARITY)], settings=settings, instance=instance)
            # Turns into the index (interaction_index_sensor's run); the runs below add delta segments on top.
            assert (
                build_definitions(settings)
                .resolve_job_def("index_job")
                .execute_in_process(
                    instance=instance, run_config={"ops": {"search_index": {"config": {"index_turns": True}}}}
                )
                .success
            )
            run_operation(
                "rerun_job",
                {"entity": "profile", "operation_id": "op-rerun", "user_id": ZED},
                settings=settings,
                instance=instance,
            )
            run_operation(
                "lifecycle_job",
                {"entity": "profile", "op": "upgrade", "operation_id": "op-up", "user_id": ZED},
                settings=settings,
                instance=instance,
            )
            run_aggregation({"agent_version": "ops-1"}, settings=settings, instance=instance)
            run_evaluation(now=int((T0 + timedelta(hours=1)).timestamp()), settings=settings, instance=instance)
            with TestClient(create_app(settings)) as client:
                for playbook in client.post("/api/get_agent_playbooks", json={}).json()["agent_playbooks"]:
                    client.put(
                        "/api/update_agent_playbook_status",
                        json={"agent_playbook_id": playbook["agent_playbook_id"], "playbook_status": "approved"},
                    )
                client.post("/api/search", json={"query": "deploy region", "user_id": ZED, "threshold": 0.0})
                client.post("/api/search", json={"query": "commit message language", "threshold": 0.0})
                # A session outcome the client reported (tables/reported_outcomes).
                turns = lake.read_table("turns", filters=[("user_id", "=", ZED)]).to_pylist()
                report = {"session_id": min(t["session_id"] for t in turns if t["session_id"]), "outcome": "success"}
                report["occurred_at"] = int((T0 + timedelta(hours=1)).timestamp())
                assert client.post("/api/session_outcome", json=report).json()["recorded"]
                # A publish the pipeline has not materialised yet: it lives only in a landing file.
                body = {"user_id": ZED, "interaction_data_list": [{"role": "user", "content": "Wobbleton is my dog."}]}
                assert client.post("/api/publish_interaction", json=body).json()["success"]
    return tmp


@pytest.fixture
def env(world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A private copy of the world: (lake, settings)."""
    shutil.copytree(world, tmp_path / "w")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "w" / "dagster_home"))
    lake = Lake.at(tmp_path / "w" / "lake")
    return lake, _settings(lake, tmp_path / "w")


def test_world_populates_every_table(world: Path):
    lake = Lake.at(world / "lake")
    empty = [name for name in TABLES if not lake.read_table(name).num_rows]
    # Written by features this world does not exercise (curation, failed extractions, retrieval before sessions,
    # LLM calls: the world learns with the built-in rules; tests/test_llm_calls.py erases a user's ledger rows;
    # outcomes of served items and the holdout comparison need sessions after a search: tests/test_outcomes.py
    # erases a user's outcome rows; quarantine: only an unreadable file writes it, tests/test_quarantine.py).
    assert set(empty) <= {
        "quarantine",
        "curation_log",
        "extraction_failures",
        "impact_before_after",
        "llm_calls",
        "item_outcome_events",
        "item_outcomes",
        "outcome_change_log",
        "impact_holdout",
    }, empty
    rules = lake.read_table("agent_playbooks").to_pylist()
    assert any(ZED in r["member_user_ids"] and len(r["member_user_ids"]) >= 2 for r in rules)
    quoted = json.dumps(rules + lake.read_table("aggregation_change_log").to_pylist()).lower()
    assert all(word in quoted for word in PLANTED), "the shared rules must quote ZED for erasure to re-word them"


def test_every_table_has_an_erasure_rule():
    check_rules()  # raises for a table with no identifying column that is not a declared aggregate
    assert set(AGGREGATE_TABLES) <= set(TABLES)
    with pytest.raises(MissingErasureRule, match="mystery"):
        check_rules({**TABLES, "mystery": TABLES["impact_metrics"]})


def test_export_json_and_parquet_hold_every_table_and_only_the_user(env):
    lake, settings = env
    with TestClient(create_app(settings)) as client:
        reply = client.post("/api/export_user_data", json={"user_id": ZED})
        assert reply.status_code == 200
        tables = reply.json()["tables"]
        archive = client.post("/api/export_user_data", json={"user_id": ZED, "format": "parquet"})
        unknown = client.post("/api/export_user_data", json={"user_id": "nobody-here"}).json()["tables"]
    assert set(tables) == set(TABLES)
    for name in (
        "turns",
        "user_profiles",
        "user_playbooks",
        "change_log",
        "extraction_bookmarks",
        "lifecycle_events",
        "playbook_embeddings",
        "agent_playbooks",
        "aggregation_change_log",
        "control_log",
        "session_evaluations",
        "shadow_comparisons",
        "retrievals",
    ):
        assert tables[name], f"{name} exported nothing"
    for name, rows in tables.items():
        for row in rows:
            if "user_id" in row and name != "lifecycle_events":
                assert row["user_id"] == ZED, name
            if "member_user_ids" in row:
                assert row["member_user_ids"] == [ZED]  # other contributors are not disclosed
    assert {r["content"] for r in tables["turns"]} >= {
        "Wobbleton is my dog.",
        "My cat is called Quixotica and I live in Zanzibarville.",
    }
    landed_only = [r for r in tables["turns"] if r["content"] == "Wobbleton is my dog."]
    assert landed_only[0]["landing_file"].startswith("landing/turns/")
    profile = next(r for r in tables["user_profiles"] if "Quixotica" in r["content"])
    assert profile["source_turn_ids"] and profile["run_id"] and profile["extractor"]  # provenance travels along
    assert {r["status"] for r in tables["user_profiles"]} >= {"current", "pending"}  # history too, rerun included
    assert unknown == {name: [] for name in TABLES}
    assert tables["agent_playbooks"] and all(word in json.dumps(tables).lower() for word in PLANTED)  # ZED's own words
    for other in OTHERS:  # a shared rule quoting ZED shows another contributor only their own words of it
        with TestClient(create_app(settings)) as client:
            theirs = client.post("/api/export_user_data", json={"user_id": other}).json()["tables"]
        assert not [w for w in NEEDLES if w in json.dumps(theirs).lower()], other
    assert theirs["agent_playbooks"]

    assert archive.status_code == 200 and archive.headers["content-type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(archive.content)) as z:
        assert sorted(z.namelist()) == sorted(f"{name}.parquet" for name in TABLES)
        for name in TABLES:
            table = pq.read_table(io.BytesIO(z.read(f"{name}.parquet")))
            assert table.schema.names == TABLES[name].names and table.num_rows == len(tables[name])


def test_bad_requests_are_422_naming_the_field(env):
    lake, settings = env
    with TestClient(create_app(settings)) as client:
        for method, path, body, field in [
            ("POST", "/api/export_user_data", {}, "user_id"),
            ("POST", "/api/export_user_data", {"user_id": "  "}, "user_id"),
            ("POST", "/api/export_user_data", {"user_id": ZED, "format": "xml"}, "format"),
            ("DELETE", "/api/erase_user_data", {}, "user_id"),
            ("DELETE", "/api/erase_user_data", {"user_id": 7}, "user_id"),
        ]:
            reply = client.request(method, path, json=body)
            assert reply.status_code == 422 and field in reply.json()["message"], (path, body, reply.text)
    assert lake.read_table("turns", filters=[("user_id", "=", ZED)]).num_rows  # nothing was touched


def leftovers(root: Path, needles: tuple[str, ...]) -> tuple[int, int, list[tuple[str, str]]]:
    """Scan every file under `root` for the needles: raw bytes (both cases), every decoded Parquet value and footer
    statistic, and every term of every tantivy field. Returns (files, bytes, hits as (path, needle))."""
    import tantivy

    files = scanned = 0
    hits: set[tuple[str, str]] = set()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        files, scanned = files + 1, scanned + len(data)
        texts = [data.lower()]
        if data[:4] == b"PAR1":
            parquet = pq.ParquetFile(path)
            texts.append(json.dumps(parquet.read().to_pylist(), default=str).lower().encode())
            texts.append(
                str([parquet.metadata.row_group(i).to_dict() for i in range(parquet.num_row_groups)]).lower().encode()
            )
        hits |= {(str(path.relative_to(root)), n) for n in needles for t in texts if n.encode() in t}
    for meta in root.rglob("meta.json"):  # tantivy indexes: terms live in an FST, not as plain bytes
        index = tantivy.Index.open(str(meta.parent))
        searcher = index.searcher()
        for field in ("text", "doc_id", "user_id", "agent_version", "playbook_name", "status", "playbook_status"):
            for term, _count in searcher.terms_with_prefix(field, ""):
                hits |= {(str(meta.parent.relative_to(root)), n) for n in needles if n in str(term).lower()}
    return files, scanned, sorted(hits)


def _erase(base_url: str, user_id: str) -> httpx.Response:
    return httpx.request("DELETE", f"{base_url}/api/erase_user_data", json={"user_id": user_id}, timeout=300)


#: Everyone but ZED: their data stays, and what they read of shared rules must not quote ZED.
OTHERS = ("ann", "bob", "dan")


def shared_reads(base_url: str) -> str:
    """What callers read of shared agent playbooks, lower-cased: the list, a search, the aggregation change log and
    every other user's export."""
    replies = [
        httpx.post(f"{base_url}/api/get_agent_playbooks", json={"status_filter": None}, timeout=30),
        httpx.post(
            f"{base_url}/api/search_agent_playbooks",
            json={"query": "deploy service pool commit", "top_k": 20, "threshold": 0.0},
            timeout=30,
        ),
        httpx.get(f"{base_url}/api/playbook_aggregation_change_logs", timeout=30),
        *(httpx.post(f"{base_url}/api/export_user_data", json={"user_id": u}, timeout=60) for u in OTHERS),
    ]
    assert all(r.status_code == 200 for r in replies), [r.text for r in replies]
    return "\n".join(r.text for r in replies).lower()


def erased_for_good(base_url: str, scan: Callable[[], list[tuple[str, str]]], capsys) -> dict:
    """Erase ZED over HTTP, aggregate again, erase again: after each step `scan()` (the lake's files and whatever
    else the caller adds) finds nothing of ZED, nor does anything callers read of shared rules. Returns the first
    erasure's answer."""
    first = _erase(base_url, ZED)
    assert first.status_code == 200 and first.json()["success"], first.text
    steps = {"erasure": scan()}
    aggregated = httpx.post(f"{base_url}/api/run_playbook_aggregation", json={"agent_version": "ops-1"}, timeout=300)
    assert aggregated.status_code == 200 and aggregated.json()["success"], aggregated.text
    steps["re-aggregation"] = scan()
    again = _erase(base_url, ZED).json()
    assert again["success"] and set(again["erased"].values()) == {0}, again  # nothing came back
    steps["second erasure"] = scan()
    with capsys.disabled():
        print(f"\nafter {', '.join(steps)}: {[len(hits) for hits in steps.values()]} hits")
    assert steps == {step: [] for step in steps}, steps
    assert not [w for w in NEEDLES if w in shared_reads(base_url)]
    return first.json()


def test_erasure_over_http_leaves_no_trace_keeps_others_and_is_idempotent(env, capsys):
    lake, settings = env
    home = Path(os.environ["DAGSTER_HOME"])
    files, _, before = leftovers(lake.root, NEEDLES)
    assert {n for _, n in before} == set(NEEDLES), "the scan must find the user before erasure"
    shared_before = {r["agent_playbook_id"]: r for r in lake.read_table("agent_playbooks").to_pylist()}
    # retrieval_events is left out: the searches below, made as ann and bob, log new answers to them.
    others_before = {
        name: lake.read_table(name, filters=[("user_id", "in", list(OTHERS))]).num_rows
        for name in TABLES
        if "user_id" in TABLES[name].names and name != "retrieval_events"
    }

    def scan() -> list[tuple[str, str]]:
        # Dagster's run storage keeps run configs (a rerun for ZED names ZED, docs/operations.md), never words.
        return leftovers(lake.root, NEEDLES)[2] + [(f"$DAGSTER_HOME/{p}", n) for p, n in leftovers(home, ZED_WORDS)[2]]

    assert _indexed_turns(lake, ZED) > 0, "ZED's turns must be in the index versions before erasure"
    app = create_app(settings)
    with serve_app(app) as base_url:
        turns = _found_turns(base_url, "Quixotica cat Zanzibarville")  # from the index version
        assert any("Quixotica" in t["content"] for t in turns)
        deadline = time.monotonic() + 5  # the landing-only turn: the overlay reads it on the watcher's tick
        while not any("Wobbleton" in t["content"] for t in _found_turns(base_url, "Wobbleton dog")):
            assert time.monotonic() < deadline, "the unindexed turn never reached the recent-turns overlay"
            time.sleep(0.2)
        unknown = _erase(base_url, "nobody-here").json()  # not an error, and nothing to rebuild
        assert unknown["success"] and set(unknown["erased"].values()) == {0}
        assert unknown["index_version"] == lake.index_root.joinpath("CURRENT").read_text().strip()
        agents = httpx.post(
            f"{base_url}/api/search", json={"query": "Flumpdoodle service deploy region", "top_k": 10, "threshold": 0.0}
        ).json()["agent_playbooks"]
        assert any("flumpdoodle" in json.dumps(a).lower() for a in agents)  # served before: a legacy rule quotes ZED
        body = erased_for_good(base_url, scan, capsys)
        assert body["erased"]["turns"] > 0 and body["erased"]["landing"] > 0
        assert body["erased"]["user_profiles"] > 0 and body["erased"]["shadow_comparisons"] > 0
        assert body["redacted"]["agent_playbooks"] > 0 and body["redacted"]["aggregation_change_log"] > 0
        served = httpx.get(f"{base_url}/health").json()["index_version"]
        assert served == lake.index_root.joinpath("CURRENT").read_text().strip()  # already swapped
        for query in ("Quixotica cat", "Zanzibarville", "deploy region"):
            hits = httpx.post(f"{base_url}/api/search", json={"query": query, "user_id": ZED, "threshold": 0.0}).json()
            assert hits["profiles"] == [] and hits["user_playbooks"] == [], query
        for query in ("Quixotica cat Zanzibarville", "Wobbleton dog"):  # index and overlay alike
            assert _found_turns(base_url, query) == [], query
        others = httpx.post(
            f"{base_url}/api/search", json={"query": "which region to deploy to", "user_id": "ann", "threshold": 0.0}
        ).json()
        assert any("us-west-2" in p["content"] for p in others["user_playbooks"])
        bob = httpx.post(
            f"{base_url}/api/search", json={"query": "timezone", "user_id": "bob", "threshold": 0.0}
        ).json()
        assert any("CET" in p["content"] for p in bob["profiles"])
        agents = httpx.post(
            f"{base_url}/api/search",
            json={"query": "commit messages English deploy region pool", "threshold": 0.0, "top_k": 10},
        ).json()
        agents = agents["agent_playbooks"]
        assert agents and all(ZED not in json.dumps(a) for a in agents)
        contents = " ".join(a["content"] for a in agents)
        assert "us-west-2" in contents and "English" in contents and "pool" in contents  # the rules still say it
        assert _erase(base_url, ZED).json()["success"]  # the searches above, made as ZED, are new data about ZED

    files, scanned, hits = leftovers(lake.root, NEEDLES)
    with capsys.disabled():
        print(f"\nerasure scan: {files} files, {scanned} bytes under the lake, {len(hits)} hits")
    assert hits == []
    assert {
        name: lake.read_table(name, filters=[("user_id", "in", list(OTHERS))]).num_rows for name in others_before
    } == others_before
    after = {r["agent_playbook_id"]: r for r in lake.read_table("agent_playbooks").to_pylist()}
    assert set(after) == set(shared_before)  # every shared rule is supported by someone else: kept
    for row in after.values():
        assert ZED not in row["member_user_ids"] and row["member_user_ids"]
        assert len(row["member_ids"]) == len(row["member_user_ids"])
    pool = next(r for r in after.values() if "pool" in r["content"])
    assert pool["trigger"] == "When asked: how should the user size the database pool?"  # ZED's fact is gone
    marker = erasure.ErasureMarker.of(lake, ZED).read()
    assert marker["status"] == "completed" and ZED not in json.dumps(marker) and marker["erased"]["turns"] > 0
    versions = sorted(v.name for v in lake.index_root.iterdir() if v.is_dir())
    assert versions[0] >= body["index_version"]  # no version built before the erasure survives (names sort by time)
    assert _indexed_turns(lake, ZED) == 0 and _indexed_turns(lake, "ann") > 0  # others' turns stay searchable


def _found_turns(base_url: str, query: str) -> list[dict]:
    """ZED's turns search_interactions finds for `query`."""
    reply = httpx.post(f"{base_url}/api/search_interactions", json={"user_id": ZED, "query": query, "top_k": 10})
    assert reply.status_code == 200, reply.text
    return reply.json()["interactions"]


def _indexed_turns(lake: Lake, user_id: str) -> int:
    """Turn documents of `user_id` in every segment (base and deltas) of every index version on disk."""
    from reflexio_pipelines.search.versions import list_versions, version_doc_files

    return sum(
        pq.read_table(path, columns=["entity_type", "user_id"])
        .to_pylist()
        .count({"entity_type": "interaction", "user_id": user_id})
        for version in list_versions(lake.index_root)
        for path in version_doc_files(lake.index_root, version)
    )


def test_agent_playbook_supported_only_by_the_erased_user_goes(env):
    lake, settings = env
    (commit_rule,) = [r for r in lake.read_table("agent_playbooks").to_pylist() if "English" in r["content"]]
    assert sorted(commit_rule["member_user_ids"]) == ["dan", ZED]
    with TestClient(create_app(settings)) as client:
        for user in (ZED, "dan"):
            assert client.request("DELETE", "/api/erase_user_data", json={"user_id": user}).json()["success"]
        rules = client.post("/api/get_agent_playbooks", json={"status_filter": None}).json()["agent_playbooks"]
    commit_rules = [r for r in lake.read_table("agent_playbooks").to_pylist() if "English" in r["content"]]
    assert commit_rules == [] and all("English" not in r["content"] for r in rules)
    left = {r["item_id"] for r in lake.read_table("control_log").to_pylist()}
    assert left == {str(r["agent_playbook_id"]) for r in lake.read_table("agent_playbooks").to_pylist()}
    assert not [r for r in lake.read_table("aggregation_change_log").to_pylist() if "English" in (r["after"] or "")]


def _wait_until(check: Callable[[], bool], timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_crash_midway_is_listed_resumed_at_start_up_and_never_names_the_user(env):
    lake, settings = env
    from reflexio_pipelines.learning.embedding import make_embedder

    crashed_after: list[tuple[str, int]] = []

    def crash_after_first_erased_table(name: str, rows: int) -> None:
        if rows:
            crashed_after.append((name, rows))
            raise RuntimeError(f"simulated crash after {name}")

    with pytest.raises(RuntimeError, match="simulated crash"):
        erasure.erase_user(lake, ZED, make_embedder(settings.embedder.model), on_table=crash_after_first_erased_table)
    ((table, rows),) = crashed_after
    markers = lake.root / "state" / "erasure_requests"
    (marker,) = markers.glob("*.json")
    state = json.loads(marker.read_text())
    assert state["status"] == "in_progress" and state["erased"][table] == rows
    assert ZED not in marker.read_text() and ZED not in json.dumps(erasure.erasure_requests(lake))  # never the id
    assert [p.name for p in (markers / "active").iterdir()] == [marker.stem]
    assert lake.read_table("turns", filters=[("user_id", "=", ZED)]).num_rows  # the rest is still there

    with TestClient(create_app(settings)) as client:  # start-up resumes it in the background

        def listed() -> list[dict]:
            reply = client.get("/api/erasures")
            assert reply.status_code == 200, reply.text
            return reply.json()["erasures"]

        first = listed()
        assert [e["erasure_id"] for e in first] == [marker.stem] and ZED not in json.dumps(first)
        _wait_until(lambda: listed()[0]["status"] == "completed")
        body = client.request("DELETE", "/api/erase_user_data", json={"user_id": ZED}).json()  # a client's retry
        assert body["success"] and body["message"] == "nothing of this user was left to erase"
        stored = client.post(
            "/api/publish_interaction",
            json={"user_id": ZED, "interaction_data_list": [{"role": "user", "content": "a new start"}]},
        )
        assert stored.status_code == 200  # no longer paused
    (done,) = listed()
    assert done["erased"][table] == rows and done["erased"]["turns"] > 0  # both attempts counted
    assert list((markers / "active").iterdir()) == [] and ZED not in marker.read_text()
    assert [h for h in leftovers(lake.root, NEEDLES)[2] if not h[0].startswith("landing/")] == []  # but "a new start"
    assert {r["content"] for r in erasure_landing(lake)} == {"a new start"}


def erasure_landing(lake: Lake) -> list[dict]:
    """ZED's turns in landing files."""
    from reflexio_pipelines.privacy.scope import landing_rows

    return [r for hit in landing_rows(lake, ZED) for r in hit.rows.to_pylist()]


def test_erasure_converges_while_the_user_keeps_publishing(env):
    """A user publishing all the time is erased in one call: their publishes answer 409 while it runs, nothing they
    published before it survives, what they publish after it is stored, and the marker never names them."""
    lake, settings = env
    replies: list[tuple[int, str, str]] = []  # (status, message, request id) in order
    done = threading.Event()

    def keep_publishing() -> None:
        with httpx.Client(base_url=base_url, timeout=60) as client:
            n = 0
            while not done.is_set():
                n += 1
                body = {"user_id": ZED, "interaction_data_list": [{"role": "user", "content": f"Wobbleton {n}."}]}
                reply = client.post("/api/publish_interaction", json=body)
                replies.append((reply.status_code, reply.json()["message"], reply.json().get("request_id", "")))
                time.sleep(0.01)

    with serve_app(create_app(settings)) as base_url:
        publisher = threading.Thread(target=keep_publishing)
        publisher.start()
        try:
            _wait_until(lambda: len(replies) >= 5, 30)
            erased = _erase(base_url, ZED)
            _wait_until(lambda: replies[-1][0] == 200 and any(r[0] == 409 for r in replies), 30)
            time.sleep(0.2)
        finally:
            done.set()
            publisher.join()
    assert erased.status_code == 200 and erased.json()["success"], erased.text
    statuses = [status for status, _, _ in replies]
    assert set(statuses) == {200, 409}, set(statuses)
    first, last = statuses.index(409), len(statuses) - 1 - statuses[::-1].index(409)
    assert set(statuses[first : last + 1]) == {409}  # refused while the erasure ran, and only then
    assert all("being erased" in message for status, message, _ in replies if status == 409)
    remaining = {r["request_id"] for r in erasure_landing(lake)}
    before, after = ({rid for status, _, rid in part if status == 200} for part in (replies[:first], replies[last:]))
    assert before and not before & remaining  # everything published before the erasure is gone
    assert after and after == remaining  # what was published after it is stored
    (marker,) = (lake.root / "state" / "erasure_requests").glob("*.json")
    assert json.loads(marker.read_text())["status"] == "completed" and ZED not in marker.read_text()


def test_rows_a_racing_run_writes_back_are_caught_by_another_pass(env):
    lake, settings = env
    from reflexio_pipelines.learning.embedding import make_embedder

    embedder = make_embedder(settings.embedder.model)
    stale = lake.read_table("turns", filters=[("user_id", "=", ZED)])  # what a run read before the erasure

    def run_commits_stale_rows(name: str, rows: int, limit: list[int]) -> None:
        if name == "turns" and limit[0] > 0:
            limit[0] -= 1
            lake.append("turns", stale)

    once = [1]
    result = erasure.erase_user(lake, ZED, embedder, on_table=lambda n, r: run_commits_stale_rows(n, r, once))
    assert result.erased["turns"] == 2 * stale.num_rows  # erased, written back once, erased again
    assert leftovers(lake.root, NEEDLES)[2] == []

    land(lake, [CONVERSATIONS[0]], at=T0)  # the user publishes again; a run keeps writing stale rows back
    forever = [erasure.PASSES + 1]
    with pytest.raises(erasure.ErasureIncomplete):
        erasure.erase_user(lake, ZED, embedder, on_table=lambda n, r: run_commits_stale_rows(n, r, forever))
    assert erasure.ErasureMarker.of(lake, ZED).read()["status"] == "in_progress"  # a retry finishes it
    retried = erasure.erase_user(lake, ZED, embedder)  # passes 2 and 3 erased the rows once each, the retry once
    assert retried.erased["turns"] == 3 * stale.num_rows and retried.erased["landing"] == 3
    assert leftovers(lake.root, NEEDLES)[2] == []


def test_erased_landing_files_keep_the_pipeline_consistent(env):
    """Rewritten landing files are no new work for the sensor, re-materialising the window gives the same turns,
    and the landing writer's idempotency index, rebuilt from them at start-up, still knows the other users' keys."""
    lake, settings = env
    keys = {r["user_id"]: r["idempotency_key"] for r in lake.read_table("turns").to_pylist()}
    with TestClient(create_app(settings)) as client:
        assert client.request("DELETE", "/api/erase_user_data", json={"user_id": ZED}).json()["success"]

    assert key_of_moment(T0, GRANULARITY) not in {p.partition_key for p in pending_windows(lake, GRANULARITY)}
    turns = sorted(lake.read_table("turns").column("turn_id").to_pylist())
    with dg.DagsterInstance.ephemeral() as instance:
        launch([key_of_moment(T0, GRANULARITY)], settings=settings, instance=instance)
    assert sorted(lake.read_table("turns").column("turn_id").to_pylist()) == turns
    assert ZED not in set(lake.read_table("turns").column("user_id").to_pylist())

    def publish(client: TestClient, user: str) -> str:
        body = {
            "user_id": user,
            "idempotency_key": keys[user],
            "interaction_data_list": [{"role": "user", "content": "a retried publish"}],
        }
        return client.post("/api/publish_interaction", json=body).json()["message"]

    with TestClient(create_app(settings)) as client:  # a restarted service
        assert publish(client, "ann").startswith("duplicate")  # ann's publish is still on disk: a retry lands once
        assert publish(client, ZED) == "stored"  # nothing of the erased publish is remembered


def test_erased_idempotency_keys_no_longer_deduplicate(env):
    """After erasure a retry carrying one of the user's old idempotency keys is stored again (the running service
    forgot the key along with the rows), instead of being answered as a duplicate of data that no longer exists."""
    lake, settings = env
    from reflexio_pipelines.lake.interactions import turn_rows

    keys = {r["idempotency_key"] for r in turn_rows(lake, [("user_id", "=", ZED)]) if r["idempotency_key"]}
    assert keys
    key = sorted(keys)[0]
    publish = {"user_id": ZED, "interaction_data_list": [{"role": "user", "content": "hello again"}]}
    with serve_app(create_app(settings)) as base_url:
        before = httpx.post(
            f"{base_url}/api/publish_interaction", json=publish, headers={"Idempotency-Key": key}
        ).json()
        assert before["message"].startswith("duplicate")
        assert _erase(base_url, ZED).json()["success"]
        after = httpx.post(f"{base_url}/api/publish_interaction", json=publish, headers={"Idempotency-Key": key}).json()
        assert after["success"] and after["message"] == "stored"


#: Reads a client may send while an erasure runs (issue #19: landing files and Delta data files vanish under them).
CONCURRENT_READS = [
    ("POST", "/api/get_interactions", {"user_id": "ann"}),
    ("GET", "/api/get_all_interactions", None),
    ("POST", "/api/get_requests", {"user_id": ZED}),
    ("POST", "/api/get_profiles", {"user_id": "bob"}),
    ("POST", "/api/get_user_playbooks", {}),
    ("POST", "/api/get_agent_playbooks", {}),
    ("POST", "/api/search", {"query": "deploy region", "threshold": 0.0}),
    ("POST", "/api/export_user_data", {"user_id": "ann"}),
]


def test_reads_during_an_erasure_never_answer_5xx(env):
    """Every read keeps answering 2xx while the erasure deletes and rewrites landing files and table data files."""
    lake, settings = env
    for n in range(12):  # landing files holding only ZED's turns, which the erasure deletes
        land(lake, [_conversation(ZED, 100 + n, [("user", f"Wobbleton fact number {n}.")], T0)], at=T0)
    errors: list[str] = []
    done = threading.Event()

    def read(method: str, path: str, body: dict | None) -> None:
        with httpx.Client(base_url=base_url, timeout=60) as client:
            while not done.is_set():
                try:
                    reply = client.request(method, path, json=body)
                except httpx.HTTPError as exc:  # a dropped connection is what a 500 looked like to the client
                    errors.append(f"{path}: {type(exc).__name__}")
                    continue
                if reply.status_code >= 500:
                    errors.append(f"{path}: {reply.status_code} {reply.text[:200]}")

    with serve_app(create_app(settings)) as base_url:
        readers = [threading.Thread(target=read, args=spec) for spec in CONCURRENT_READS]
        for thread in readers:
            thread.start()
        try:
            erased = _erase(base_url, ZED)
        finally:
            done.set()
            for thread in readers:
                thread.join()
    assert erased.status_code == 200 and erased.json()["erased"]["landing"] >= 12, erased.text
    assert errors == [], errors[:10]
