"""Assets `search_index` (build a new immutable index version) and `serving_index` (make it the one served).

They are two assets so that the blocking check `search_index_is_servable` sits between building and publishing:
a version that fails the check is built but never pointed at, and serving keeps answering from the previous one.
"""

import dagster as dg

from reflexio_pipelines.lake.changes import source_versions, users_touched
from reflexio_pipelines.lake.embedding_cache import EmbeddingCache
from reflexio_pipelines.lake.embedding_cache import compact as compact_cache
from reflexio_pipelines.resources import EmbedderResource, LakeResource
from reflexio_pipelines.search.documents import index_documents
from reflexio_pipelines.search.incremental import stage_update
from reflexio_pipelines.search.types import SearchDoc
from reflexio_pipelines.search.versions import activate_if_newer, current_version, prune_versions, served_watermarks
from reflexio_pipelines.storage import LakePath

SEARCH_INDEX = dg.AssetKey("search_index")


class SearchIndexConfig(dg.Config):
    """`compact`: build a new base from scratch (tombstones dropped, the HNSW graph over every row) instead of a
    delta on the current version; the daily `index_compaction_schedule` asks for it.

    `index_turns`: also take in every turn published since the current version (embedding each new turn's line once,
    through the embedding cache). Off, a build keeps exactly the turns the current version holds: learning runs
    (`materialize`, the landing sensor) never wait on turn embeddings; `interaction_index_sensor` runs `index_job`
    with it on shortly after turns land, and serving covers the turns in between (serving/recent_turns.py).

    `max_new_turns` (> 0) bounds how many new turns one build takes in, oldest first; the rest wait for the next
    build. The sensors' runs set it (`jobs.MAX_NEW_TURNS_PER_LEARNING_BUILD`, `jobs.MAX_NEW_TURNS_PER_BUILD`) so that
    the items a learning run learned are not held back behind a backlog of turn embeddings, nor slowed by a long turn
    build beside them."""

    compact: bool = False
    index_turns: bool = False
    max_new_turns: int = 0


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
    sources = source_versions(store)  # read before the tables: a commit during the build is seen by the next one
    users = None if config.compact else users_touched(store, served_watermarks(store.index_root), sources)

    watermarks: dict[str, int] = {}

    def read(scope: frozenset[str] | None) -> list[SearchDoc]:
        # The watermarks are those of the last read: a scoped build that turns out to need a full one (stage_update
        # calls `everything`) records the turn watermark of the docs it was given.
        docs, _, marks = index_documents(
            store, new_turns=config.index_turns, max_new_turns=config.max_new_turns, users=scope
        )
        watermarks.clear()
        watermarks.update({**marks, **sources})
        return docs

    docs = read(users)
    model = embedder.get()
    staged = stage_update(
        store.index_root,
        docs,
        model,
        cache=cache,
        compact=config.compact,
        watermarks=watermarks,
        users=users,
        everything=lambda: read(None),
    )
    if config.compact:  # the daily compaction also merges the small files appends left in the embedding cache
        compact_cache(store)
    return dg.MaterializeResult(
        metadata={
            "version": staged.version,
            "index_root": str(store.index_root),
            "embedder": model.model_id,
            "dagster/row_count": sum(staged.counts.values()),
            "docs_read": len(docs),
            "users_rebuilt": "all" if users is None else len(users),
            **{f"expected_{entity}": n for entity, n in staged.counts.items()},
            **watermarks,
            **staged.metadata(),  # full / incremental / unchanged, and why
            **cache.stats.metadata(),  # texts embedded vs served from the lake's embedding cache
        }
    )


@dg.asset(
    deps=[SEARCH_INDEX],
    group_name="serving",
    description="Points indexes/search/CURRENT at the newest checked version; serving hot-swaps to it.",
)
def serving_index(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    store = lake.get()
    version = staged_version(context.instance, store.index_root, context.run.run_id)
    activated = activate_if_newer(store.index_root, version)
    removed = prune_versions(store.index_root, keep=5)
    return dg.MaterializeResult(
        metadata={
            "version": version,
            "activated": activated,
            "served_version": current_version(store.index_root) or "",
            "pruned_versions": len(removed),
        }
    )


def latest_build(instance: dg.DagsterInstance, index_root: LakePath, run_id: str | None = None) -> dict:
    """Metadata of the `search_index` build for this lake's index root that `run_id` made, else (a run that only
    publishes) the latest one. A run must read its own build: a learning run and an `index_job` run can build at once,
    and the newest build overall may be the other run's (its version checked against this run's counts, or served
    without its check). One Dagster instance can also record builds for several lakes (one per organisation)."""
    if run_id is not None:
        own = [
            r.asset_materialization
            for r in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
            if r.asset_materialization is not None and r.asset_materialization.asset_key == SEARCH_INDEX
        ]
        for mat in reversed(own):
            if _built_for(mat.metadata, index_root):
                return {k: v.value for k, v in mat.metadata.items()}
    records = instance.fetch_materializations(SEARCH_INDEX, limit=50).records
    for record in records:
        metadata = record.asset_materialization.metadata if record.asset_materialization else {}
        if _built_for(metadata, index_root):
            return {k: v.value for k, v in metadata.items()}
    raise dg.Failure(f"search_index has never been materialised for {index_root}")


def _built_for(metadata: dict, index_root: LakePath) -> bool:
    root = metadata.get("index_root")
    return root is None or str(root.value) == str(index_root)  # builds before index_root was recorded


def staged_version(instance: dg.DagsterInstance, index_root: LakePath, run_id: str | None = None) -> str:
    """The version `run_id`'s (else the latest) `search_index` materialisation for `index_root` built."""
    return str(latest_build(instance, index_root, run_id)["version"])


def expected_counts(instance: dg.DagsterInstance, index_root: LakePath, run_id: str | None = None) -> dict[str, int]:
    """Per entity type, how many documents `run_id`'s (else the latest) build for `index_root` was given."""
    metadata = latest_build(instance, index_root, run_id)
    return {k.removeprefix("expected_"): int(v) for k, v in metadata.items() if k.startswith("expected_")}
