"""Assets `search_index` (build a new immutable index version) and `serving_index` (make it the one served).

They are two assets so that the blocking check `search_index_is_servable` sits between building and publishing:
a version that fails the check is built but never pointed at, and serving keeps answering from the previous one.
"""


import dagster as dg

from reflexio_pipelines.resources import EmbedderResource, LakeResource
from reflexio_pipelines.lake.records import live_rows
from reflexio_pipelines.lake.control import decisions
from reflexio_pipelines.search.documents import agent_playbook_docs, profile_docs, user_playbook_docs
from reflexio_pipelines.search.index import activate_version, prune_versions, stage_index

SEARCH_INDEX = dg.AssetKey("search_index")


@dg.asset(
    deps=["user_profiles", "user_playbooks", "agent_playbooks"],
    group_name="serving",
    kinds={"tantivy", "numpy"},
    description="A new immutable hybrid index version (BM25 + dense vectors) over all current learned items.",
)
def search_index(lake: LakeResource, embedder: EmbedderResource) -> dg.MaterializeResult:
    store = lake.get()
    profiles = live_rows(store, "profile")
    playbooks = live_rows(store, "user_playbook")
    agent = agent_playbook_docs(store.read_table("agent_playbooks").to_pylist(), decisions(store))
    docs = profile_docs(profiles) + user_playbook_docs(playbooks) + agent
    model = embedder.get()
    version = stage_index(store.index_root, docs, model)
    return dg.MaterializeResult(
        metadata={
            "version": version,
            "embedder": model.model_id,
            "dagster/row_count": len(docs),
            "expected_profile": len(profiles),
            "expected_user_playbook": len(playbooks),
            "expected_agent_playbook": len(agent),
        }
    )


@dg.asset(
    deps=[SEARCH_INDEX],
    group_name="serving",
    description="Points indexes/search/CURRENT at the newest checked version; serving hot-swaps to it.",
)
def serving_index(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    store = lake.get()
    version = staged_version(context.instance)
    activate_version(store.index_root, version)
    removed = prune_versions(store.index_root, keep=5)
    return dg.MaterializeResult(metadata={"version": version, "pruned_versions": len(removed)})


def staged_version(instance: dg.DagsterInstance) -> str:
    """The version the latest `search_index` materialisation built."""
    event = instance.get_latest_materialization_event(SEARCH_INDEX)
    if event is None or event.asset_materialization is None:
        raise dg.Failure("search_index has never been materialised")
    return str(event.asset_materialization.metadata["version"].value)


def expected_counts(instance: dg.DagsterInstance) -> dict[str, int]:
    """Per entity type, how many documents the latest `search_index` build was given."""
    event = instance.get_latest_materialization_event(SEARCH_INDEX)
    metadata = event.asset_materialization.metadata if event and event.asset_materialization else {}
    return {k.removeprefix("expected_"): int(v.value) for k, v in metadata.items() if k.startswith("expected_")}
