"""Index builds that follow the new data: a learning run's `search_index` rebuilds the documents of the users whose
rows changed since the served version (lake/changes.py reads them from the Delta log) and keeps everyone else's as
the version holds them. Materialised in-process over a real lake; every scoped version is compared with a full
rebuild from the lake, document by document."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import dagster as dg

from reflexio_pipelines.lake.changes import source_versions, users_touched
from reflexio_pipelines.lake.curation import CurationOp, record
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.runs import launch
from reflexio_pipelines.search.build import doc_fingerprint
from reflexio_pipelines.search.documents import index_documents
from reflexio_pipelines.search.incremental import live_fingerprints
from reflexio_pipelines.search.versions import current_version, served_watermarks
from tests.support.landing import land_hourly

START = datetime(2026, 3, 2, 9, 0, 30, tzinfo=timezone.utc)


def _conversation(user: str, turns: list[tuple[str, str]]) -> dict:
    return {
        "id": f"{user}-{len(turns)}-{turns[0][1][:8]}",
        "user_id": user,
        "session_id": f"{user}-session",
        "agent_version": "v1",
        "source": "test",
        "interactions": [{"role": role, "content": content} for role, content in turns],
    }


def _facts(user: str, *facts: str) -> dict:
    turns = []
    for fact in facts:
        turns += [("user", fact), ("assistant", "Noted.")]
    return _conversation(user, turns)


def _served(lake: Lake) -> set[tuple[str, str, str]]:
    root = lake.index_root
    version_dir = root / current_version(root)
    manifest = json.loads((version_dir / "manifest.json").read_text())
    prints = live_fingerprints(version_dir, manifest)
    return {(t, doc_id, fp) for t, docs in prints.items() for doc_id, (_, fp) in docs.items()}


def _rebuilt(lake: Lake) -> set[tuple[str, str, str]]:
    docs, _, _ = index_documents(lake)
    return {(d.entity_type, d.doc_id, doc_fingerprint(d)) for d in docs}


def _index_metadata(instance: dg.DagsterInstance) -> dict:
    record_ = instance.fetch_materializations(dg.AssetKey("search_index"), limit=1).records[0]
    return {k: v.value for k, v in record_.asset_materialization.metadata.items()}


def test_a_window_rebuilds_only_its_users_docs_and_serves_what_a_full_rebuild_serves(lake: Lake, settings, instance):
    others = [f"bystander-{i}" for i in range(6)]
    first = [_facts(u, f"I live in Oslo {i}.", "I'm vegetarian.") for i, u in enumerate(others)]
    first.append(_facts("mover", "I live in London.", "I work at Acme."))
    land_hourly(lake, [first], START)
    launch(settings=settings, instance=instance)
    assert _index_metadata(instance)["users_rebuilt"] == "all"  # the first build reads the lake
    assert _served(lake) == _rebuilt(lake)

    # A later window: the mover moves (superseding a profile of the earlier window), a newcomer arrives, and an
    # item of a bystander is deleted through the API (a curation op, no learning run of its own).
    land_hourly(
        lake,
        [[_facts("mover", "I just moved to Austin."), _facts("newcomer", "I live in Lima.")]],
        START + timedelta(hours=1),
    )
    gone = next(
        r for r in lake.read_table("user_profiles").to_pylist() if r["user_id"] == others[0] and "Oslo" in r["content"]
    )
    record(lake, [CurationOp("profile", gone["profile_id"], "delete", user_id=others[0])])
    launch(settings=settings, instance=instance)

    metadata = _index_metadata(instance)
    assert metadata["users_rebuilt"] == 3  # mover, newcomer and the curated bystander: not the other five
    assert metadata["docs_read"] < metadata["dagster/row_count"]
    served = _served(lake)
    assert served == _rebuilt(lake)
    contents = {d.payload["content"] for d in index_documents(lake)[0] if d.entity_type == "profile"}
    assert any("Austin" in c for c in contents) and not any(gone["content"] == c for c in contents)


def test_the_log_says_which_users_changed_and_admits_when_it_cannot(lake: Lake, settings, instance):
    land_hourly(lake, [[_facts("ann", "I live in Rome."), _facts("bob", "I live in Kyiv.")]], START)
    before = source_versions(lake)
    launch(settings=settings, instance=instance)
    after = source_versions(lake)
    assert users_touched(lake, before, after) == {"ann", "bob"}
    assert users_touched(lake, after, after) == frozenset()
    assert users_touched(lake, {}, after) is None  # a version built before the watermarks existed
    served = served_watermarks(lake.index_root)
    assert {k: served[k] for k in after} == after  # the served version records what it was built from
    # A removed data file that is gone (an erasure vacuums at once): the log cannot say whose rows it held.
    land_hourly(lake, [[_facts("ann", "I live in Turin now.")]], START + timedelta(hours=1))
    launch(settings=settings, instance=instance)
    later = source_versions(lake)
    profiles = lake.table_path("user_profiles")
    for path in profiles.rglob("*.parquet"):
        path.unlink()
    assert users_touched(lake, after, later) is None


def test_a_later_run_of_the_same_window_rebuilds_only_the_users_it_taught(lake: Lake, settings, instance):
    from tests.support.landing import land

    land_hourly(lake, [[_facts("ann", "I live in Rome."), _facts("bob", "I live in Kyiv.")]], START)
    launch(settings=settings, instance=instance)
    # The same window again: its commit rewrites the window's files, ann's and bob's rows unchanged in them.
    land(lake, [_facts("cleo", "I live in Quito.")], at=START + timedelta(minutes=20))
    launch(settings=settings, instance=instance)
    metadata = _index_metadata(instance)
    assert metadata["users_rebuilt"] == 1
    assert _served(lake) == _rebuilt(lake)
    assert any("Quito" in d.text for d in index_documents(lake)[0])
