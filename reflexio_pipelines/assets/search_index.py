"""Assets `search_index` (build a new immutable index version) and `serving_index` (make it the one served).

They are two assets so that the blocking check `search_index_is_servable` sits between building and publishing:
a version that fails the check is built but never pointed at, and serving keeps answering from the previous one.
"""

import dagster as dg

from reflexio_pipelines.resources import EmbedderResource, LakeResource
from reflexio_pipelines.lake.control import decisions
from reflexio_pipelines.lake.embedding_cache import EmbeddingCache, compact as compact_cache
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.curation import live_agent_playbooks
from reflexio_pipelines.lake.interactions import turn_rows
from reflexio_pipelines.lake.records import live_rows
from reflexio_pipelines.learning.lifecycle import LIFECYCLE_STATUSES
from reflexio_pipelines.search.conversation import turn_docs
from reflexio_pipelines.search.documents import agent_playbook_docs, profile_docs, user_playbook_docs
from reflexio_pipelines.search.incremental import stage_update
from reflexio_pipelines.search.index import (
    TURNS_WATERMARK,
    SearchDoc,
    activate_version,
    prune_versions,
    turns_watermark,
)
from reflexio_pipelines.storage import LakePath

SEARCH_INDEX = dg.AssetKey("search_index")


class SearchIndexConfig(dg.Config):
    """`compact`: build a new base from scratch (tombstones dropped, the HNSW graph over every row) instead of a
    delta on the current version; the daily `index_compaction_schedule` asks for it.

    `index_turns`: also take in every turn published since the current version (embedding each new turn's line once,
    through the embedding cache). Off, a build keeps exactly the turns the current version holds: learning runs
    (`materialize`, the landing sensor) never wait on turn embeddings; `interaction_index_sensor` runs `index_job`
    with it on shortly after turns land, and serving covers the turns in between (serving/recent_turns.py)."""

    compact: bool = False
    index_turns: bool = False


@dg.asset(
    deps=["user_profiles", "user_playbooks", "agent_playbooks"],
    group_name="serving",
    kinds={"tantivy", "numpy"},
    description="A new immutable hybrid index version (BM25 + dense vectors) over all live learned items: every "
    "lifecycle status (search filters to current by default), manual curation applied; and the live turns with "
    "their conversational context up to the version's turn watermark (all of them with `index_turns`). Built as a "
    "delta on the "
    "current version (only changed documents embedded and indexed) unless a full rebuild is due or asked for.",
)
def search_index(config: SearchIndexConfig, lake: LakeResource, embedder: EmbedderResource) -> dg.MaterializeResult:
    store = lake.get()
    cache = EmbeddingCache(store)  # opened before the documents are read (see EmbeddingCache)
    docs, counts, watermarks = index_documents(store, new_turns=config.index_turns)
    model = embedder.get()
    staged = stage_update(store.index_root, docs, model, cache=cache, compact=config.compact, watermarks=watermarks)
    if config.compact:  # the daily compaction also merges the small files appends left in the embedding cache
        compact_cache(store)
    return dg.MaterializeResult(
        metadata={
            "version": staged.version,
            "index_root": str(store.index_root),
            "embedder": model.model_id,
            "dagster/row_count": len(docs),
            **{f"expected_{entity}": n for entity, n in counts.items()},
            **watermarks,
            **staged.metadata(),  # full / incremental / unchanged, and why
            **cache.stats.metadata(),  # texts embedded vs served from the lake's embedding cache
        }
    )


def index_documents(store: Lake, new_turns: bool = False) -> tuple[list[SearchDoc], dict[str, int], dict[str, int]]:
    """Every document an index version holds, how many of each entity type, and the version's watermarks; shared
    with per-user erasure, which publishes a version without the erased user through the same path.

    Turns: those ingested up to the current version's watermark (`TURNS_WATERMARK`), or with `new_turns` every
    live turn (the watermark then moves to the newest one). Turns deleted or erased since leave either way."""
    profiles = profile_docs(live_rows(store, "profile", statuses=LIFECYCLE_STATUSES))
    playbooks = user_playbook_docs(live_rows(store, "user_playbook", statuses=LIFECYCLE_STATUSES))
    agent = agent_playbook_docs(live_agent_playbooks(store), decisions(store))
    through = turns_watermark(store.index_root)
    # Nothing to read while no version holds turns and none are taken in (learning runs before the first turn
    # indexing run); otherwise every live turn, as for the other entity types.
    rows = turn_rows(store) if new_turns or through else []
    if new_turns:
        through = max([through, *(r["ingested_at_us"] for r in rows)])
    turns = turn_docs(r for r in rows if r["ingested_at_us"] <= through)
    counts = {"profile": len(profiles), "user_playbook": len(playbooks), "agent_playbook": len(agent),
              "interaction": len(turns)}  # fmt: skip
    return profiles + playbooks + agent + turns, counts, {TURNS_WATERMARK: through}


@dg.asset(
    deps=[SEARCH_INDEX],
    group_name="serving",
    description="Points indexes/search/CURRENT at the newest checked version; serving hot-swaps to it.",
)
def serving_index(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    store = lake.get()
    version = staged_version(context.instance, store.index_root)
    activate_version(store.index_root, version)
    removed = prune_versions(store.index_root, keep=5)
    return dg.MaterializeResult(metadata={"version": version, "pruned_versions": len(removed)})


def latest_build(instance: dg.DagsterInstance, index_root: LakePath) -> dict:
    """Metadata of the latest `search_index` materialisation for this lake's index root. One Dagster instance can
    record builds for several lakes (one per organisation), so the newest build overall may be another lake's."""
    records = instance.fetch_materializations(SEARCH_INDEX, limit=50).records
    for record in records:
        metadata = record.asset_materialization.metadata if record.asset_materialization else {}
        root = metadata.get("index_root")
        if root is None or str(root.value) == str(index_root):  # builds before index_root was recorded
            return {k: v.value for k, v in metadata.items()}
    raise dg.Failure(f"search_index has never been materialised for {index_root}")


def staged_version(instance: dg.DagsterInstance, index_root: LakePath) -> str:
    """The version the latest `search_index` materialisation for `index_root` built."""
    return str(latest_build(instance, index_root)["version"])


def expected_counts(instance: dg.DagsterInstance, index_root: LakePath) -> dict[str, int]:
    """Per entity type, how many documents the latest build for `index_root` was given."""
    metadata = latest_build(instance, index_root)
    return {k.removeprefix("expected_"): int(v) for k, v in metadata.items() if k.startswith("expected_")}
