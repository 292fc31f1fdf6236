"""Index builds take in new turns at the cost of the users who published them, not of every turn in the lake: a
scoped build (search/documents.py `scoped_turn_rows`) reads the turns of the users whose docs can differ from the
served version's — new turns, turns stamped just below its watermark that it lacks, deletions — and keeps every other
user's turn docs as the version holds them. Each version is built by the real `index_job` (blocking check
included) over a real lake, and compared doc by doc with a full rebuild from the lake."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from reflexio_pipelines.lake.curation import CurationOp, record
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.search.build import doc_fingerprint
from reflexio_pipelines.search.documents import index_documents
from reflexio_pipelines.search.incremental import live_fingerprints
from reflexio_pipelines.search.versions import current_version, turns_watermark
from tests.support.index_runs import index_turns
from tests.support.landing import land

T0 = datetime(2026, 3, 2, 10, 15, tzinfo=timezone.utc)
USERS = ("ana", "ben", "cai")


def _conversation(user: str, *lines: str) -> dict:
    return {
        "id": f"{user}-{lines[0][:12]}",
        "user_id": user,
        "agent_version": "v1",
        "source": "chat",
        "session_id": f"{user}-session",
        "interactions": [
            {"role": "user" if i % 2 == 0 else "assistant", "content": line} for i, line in enumerate(lines)
        ],
    }


def _served(lake: Lake) -> dict[str, str]:
    """Turn doc id -> fingerprint of every turn the served version holds."""
    version_dir = lake.index_root / current_version(lake.index_root)
    manifest = json.loads((version_dir / "manifest.json").read_text())
    return {doc_id: fp for doc_id, (_, fp) in live_fingerprints(version_dir, manifest)["interaction"].items()}


def _rebuilt(lake: Lake) -> dict[str, str]:
    """The same from a full read of the lake, up to the served version's watermark."""
    docs, _, _ = index_documents(lake)
    return {d.doc_id: doc_fingerprint(d) for d in docs if d.entity_type == "interaction"}


def _three_users(lake: Lake, settings, instance) -> None:
    for i, user in enumerate(USERS):
        land(
            lake,
            [_conversation(user, f"{user} asks about invoices", "Here is how invoices work.")],
            at=T0 + timedelta(seconds=i),
        )
    assert index_turns(settings, instance)["build_mode"] == "full"  # the first version


def test_new_turns_rebuild_their_users_turn_docs_only_and_serve_what_a_full_rebuild_serves(lake, settings, instance):
    _three_users(lake, settings, instance)
    before = _served(lake)
    # ana's session goes on: her new turns, and her earlier turns whose neighbours changed
    land(
        lake, [_conversation("ana", "ana asks about refunds", "Refunds take five days.")], at=T0 + timedelta(minutes=5)
    )
    docs, _, _ = index_documents(lake, new_turns=True, users=frozenset())
    assert {d.user_id for d in docs if d.entity_type == "interaction"} == {"ana"}  # ben's and cai's are not read
    meta = index_turns(settings, instance)
    after = _served(lake)
    assert meta["build_mode"] == "incremental" and after == _rebuilt(lake) and len(after) == len(before) + 2
    ana = _ids_of(lake, "ana")
    assert {d for d, fp in after.items() if before.get(d) != fp} <= ana
    assert {d: fp for d, fp in after.items() if d not in ana} == {d: fp for d, fp in before.items() if d not in ana}


def test_a_turn_stamped_below_the_watermark_after_a_build_is_still_taken_in(lake, settings, instance):
    _three_users(lake, settings, instance)
    watermark = turns_watermark(lake.index_root)
    # a publish stamped before the last one the build read, whose file became visible only after the build
    late = datetime.fromtimestamp(watermark / 1e6, tz=timezone.utc) - timedelta(seconds=1)
    land(lake, [_conversation("dev", "dev asks about shipping", "Shipping is free over 50 euros.")], at=late)
    land(
        lake, [_conversation("ben", "ben asks about vouchers", "Vouchers never expire.")], at=T0 + timedelta(minutes=5)
    )
    index_turns(settings, instance)
    served = _served(lake)
    assert served == _rebuilt(lake) and _ids_of(lake, "dev") <= set(served)


def test_a_deleted_turn_leaves_the_next_scoped_build(lake, settings, instance):
    _three_users(lake, settings, instance)
    (gone, *_) = sorted(_ids_of(lake, "cai"))
    record(lake, [CurationOp("interaction", gone, "delete", user_id="cai")])
    land(
        lake, [_conversation("ana", "ana asks about refunds", "Refunds take five days.")], at=T0 + timedelta(minutes=5)
    )
    meta = index_turns(settings, instance)
    served = _served(lake)
    assert meta["build_mode"] == "incremental" and gone not in served and served == _rebuilt(lake)


def _ids_of(lake: Lake, user: str) -> set[str]:
    from reflexio_pipelines.lake.interactions import turn_rows

    return {r["turn_id"] for r in turn_rows(lake, filters=[("user_id", "=", user)])}
